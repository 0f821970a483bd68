"""Find and replace secrets in trace metadata, ``run.json`` manifests, event names and args.

Pure functions over strings and JSON-like values (dicts, lists, tuples, scalars); nothing here
reads files or imports the rest of the package but :mod:`trace_report.errors`.

What is a secret (the rule, applied by :func:`redact_text` and :func:`redact_value`):

1. **Token shapes**, anywhere inside any string: HuggingFace ``hf_`` + 30 or more letters/digits
   (``hf_token``); OpenAI ``sk-`` / ``sk-proj-`` + 20 or more of ``[A-Za-z0-9_-]``
   (``openai_key``); AWS access key ids ``AKIA``/``ASIA`` + 16 upper-case letters/digits
   (``aws_access_key``) and the 40-character secret after an ``aws_secret[_access]_key`` key
   (``aws_secret_key``, also the kind of anything rules 2 and 3 redact under such a name);
   GitHub ``ghp_``/``gho_``/``ghs_``/``ghu_``/``ghr_`` + 30 or more, and ``github_pat_`` + 30
   or more (``github_token``); Slack ``xoxb-``/``xoxp-``/``xoxa-``...
   (``slack_token``); JWTs, three base64url parts the first starting ``eyJ`` (``jwt``);
   ``Bearer <token>`` with a token of 8 or more characters (``bearer``); the value of an
   ``Authorization:`` / ``Authorization=`` header (``basic_auth`` for ``Basic``, else
   ``bearer`` or ``authorization``); PEM private keys ``-----BEGIN ... PRIVATE KEY-----`` up to
   ``-----END ...-----`` (``pem``).
2. **Command-line flags** whose name contains ``token``, ``key``, ``secret``, ``password``,
   ``passwd`` or ``credential`` (``--hf-token X``, ``--api-key=X``, ``--password X``): the value
   is a secret (``cli_flag``, or the token shape it has) unless it is a boolean/null literal
   (true, false, yes, no, on, off, none, null...) or a number. ``--max-tokens 4096`` stays.
   In an argv list the value is the next element (when it does not start with ``-``).
3. **Secret-looking keys**: a key (dict key, ``KEY=value`` inside a string, or a JSON
   ``"key": "value"`` inside a string) containing ``TOKEN``, ``KEY``, ``SECRET``,
   ``PASSWORD``, ``PASSWD``, ``CREDENTIAL`` or ``AUTH``, case-insensitively, except where the
   match is ``TOKENIZ...`` (``TOKENIZERS_PARALLELISM``, ``tokenizer``) or ``AUTHOR``. The
   value under such a key is a secret (``secret_key``, or the token shape it has) only when it
   is *credential-like*: a string that is not a boolean/null literal, not a number, and either
   has 8 or more characters or contains a token shape. So ``{"use_auth_token": true}``,
   ``{"max_tokens": 4096}``, ``{"key_dim": 64}``, ``{"num_keys": "8"}``,
   ``TOKENIZERS_PARALLELISM=false`` and ``{"pad_token": "[PAD]"}`` stay; a list of strings under
   such a key is judged element by element; a dict under it is walked with its own keys.

Only the secret part is replaced, by ``<redacted:KIND>``: ``python run.py --hf-token
<redacted:hf_token> --lr 0.1``. What was replaced is reported as :class:`Redaction` records
(kind and place, never the value); :func:`summarize` turns them into ``kind@where`` strings.

Bulk use: :data:`PRECHECK_PATTERN` is one regular expression (valid for Python ``re`` and for
RE2, i.e. ``pyarrow.compute.match_substring_regex``) that matches every string in which the
rules above could find something; strings it does not match need no further work
(:func:`could_contain_secret`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trace_report.errors import InputError

MARKER = "<redacted:{kind}>"
"""What replaces a secret; ``KIND`` is the :attr:`Redaction.kind`."""

MIN_SECRET_TEXT = 7
"""The shortest text any rule redacts something in (``--key=x``); shorter ones are skipped."""

MAX_DEPTH = 200
"""Nesting depth of dicts/lists beyond which :func:`redact_value` refuses a value."""

_FLAG_WORDS = r"(?:token(?!iz)|key|secret|passw(?:or)?d|credential)"
_KEY_WORDS = r"(?:token(?!iz)|key|secret|passw(?:or)?d|credential|auth(?!or(?!iz)))"

SECRET_KEY = re.compile(_KEY_WORDS, re.IGNORECASE)
"""Matches (``search``) a secret-looking key name (rule 3 of the module docstring)."""

_SHAPES: list[tuple[str, str]] = [
    ("pem", r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[^\"]*?(?:-----END[A-Z0-9 ]*-----|(?=\")|\Z)"),
    ("jwt", r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    ("hf_token", r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}"),
    ("openai_key", r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("aws_access_key", r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"),
    ("github_token", r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ("slack_token", r"(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,}"),
]
"""Self-contained token shapes: (kind, pattern); the whole match is the secret."""

_BEARER = r"(?<![A-Za-z0-9_])(?i:bearer)\s+(?P<bearer_v>[A-Za-z0-9\-._~+/]{8,}=*)"
_AUTHZ = (r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?:(?P<authz_scheme>[A-Za-z]+)\s+)?"
          r"(?P<authz_v>[^\s\"',;\\]{8,})")
_AWS_SECRET = (r"(?i:aws_?secret(?:_?access)?(?:_?key)?)[\"']?\s*[:=]\s*[\"']?"
               r"(?P<aws_secret_v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])")
_QUOTED_OR_BARE = r"\"[^\"]*\"|'[^']*'"
_CLI = (rf"(?<![A-Za-z0-9_-])--[A-Za-z0-9_-]*(?i:{_FLAG_WORDS})[A-Za-z0-9_-]*(?:=|\s+)"
        rf"(?P<cli_v>{_QUOTED_OR_BARE}|(?!-)[^\s\"'\\]+)")
_ENV = (rf"(?i:{_KEY_WORDS})[A-Za-z0-9_]*="
        rf"(?P<env_v>{_QUOTED_OR_BARE}|[^\s\"'\\,;&|)]+)")
_JSON_KV = rf"(?i:{_KEY_WORDS})[A-Za-z0-9_-]*\"\s*:\s*\"(?P<json_v>[^\"\\]*)\""
# ENV and JSON_KV start at the secret word, not at the start of the key: the value is all they
# replace, and a pattern that may start anywhere would be tried at every position of the text.

_COMBINED = re.compile(
    "|".join(
        [f"(?P<{kind}>{pattern})" for kind, pattern in _SHAPES]
        + [f"(?P<aws_secret>{_AWS_SECRET})", f"(?P<authz>{_AUTHZ})", f"(?P<bearer>{_BEARER})",
           f"(?P<cli>{_CLI})", f"(?P<json>{_JSON_KV})", f"(?P<env>{_ENV})"]
    )
)
_SHAPE_RE = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _SHAPES)
                       + f"|(?P<bearer>{_BEARER})")
_AWS_SECRET_KEY = re.compile(r"aws.?secret", re.IGNORECASE)
_FLAG_ONLY = re.compile(rf"--[A-Za-z0-9_-]*(?i:{_FLAG_WORDS})[A-Za-z0-9_-]*")

PRECHECK_PATTERN = (
    r"hf_|sk-|AKIA|ASIA|gh[pousr]_|github_pat_|xox[abposr]-|eyJ|-----BEGIN|(?i:bearer)\s"
    r"|(?i:authorization|aws.?secret)"
    r"|--[A-Za-z0-9_-]*(?i:token|key|secret|passw|credential)"
    r"|(?i:token|key|secret|passw|credential|auth)[A-Za-z0-9_]*="
    r"|(?i:token|key|secret|passw|credential|auth)[^\"'=:]*[\"']\s*:\s*[\"'\[]"
)
"""A superset of what the rules can find, for a cheap first screen (Python ``re`` and RE2).

Key words count only where a value may follow: ``WORD...=``, or a quoted key whose value is a
string or a list (``"num_tokens": 128`` and ``"use_auth_token": true`` are not candidates), so
that JSON ``args`` with harmless numeric keys do not reach the Python pass."""
_PRECHECK = re.compile(PRECHECK_PATTERN)
_QUICK = re.compile(
    "|".join(re.escape(f) for f in ("hf_", "sk-", "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
                                    "github_pat_", "xox", "eyj", "-----begin", "bearer", "--", "token", "key",
                                    "secret", "passw", "credential", "auth"))
)
"""Literals of which every :data:`PRECHECK_PATTERN` match holds one, searched in lower-cased
text: Python's ``re`` runs this plain alternation several times faster than the pre-check."""

_NOT_SECRET_WORDS = frozenset(
    {"", "true", "false", "yes", "no", "y", "n", "t", "f", "on", "off", "none", "null", "nil",
     "undefined", "enabled", "disabled", "enable", "disable"}
)


@dataclass(frozen=True)
class Redaction:
    """One replaced secret: its ``kind`` (``hf_token``, ``cli_flag``, ``secret_key``...) and
    ``where`` it was (a dotted path such as ``metadata.env.HF_TOKEN`` or ``argv[3]``).
    Never holds the secret itself."""

    kind: str
    where: str

    def __str__(self) -> str:
        return f"{self.kind}@{self.where}"


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``: ``<redacted:KIND>``."""
    return MARKER.format(kind=kind)


def could_contain_secret(text: str) -> bool:
    """False when ``text`` certainly holds nothing :func:`redact_text` would replace (cheap)."""
    return (len(text) >= MIN_SECRET_TEXT and _QUICK.search(text.lower()) is not None
            and _PRECHECK.search(text) is not None)


def _is_redacted(text: str) -> bool:
    return text.startswith("<redacted")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_flag_value_secret(value: str) -> bool:
    """Rule 2: a command-line flag's value is a secret unless boolean/null-like or a number."""
    v = value.strip()
    return not (v.lower() in _NOT_SECRET_WORDS or _is_number(v) or _is_redacted(v))


def is_credential_like(value: Any) -> bool:
    """Rule 3: True when ``value`` (found under a secret-looking key) is to be redacted.

    Input: any value. Output: True only for a string that is not a boolean/null literal, not a
    number, not already a ``<redacted...>`` marker, and has 8 or more characters (stripped) or
    contains a token shape. Bools, numbers, None, dicts and lists give False.
    """
    if not isinstance(value, str):
        return False
    v = value.strip()
    if v.lower() in _NOT_SECRET_WORDS or _is_number(v) or _is_redacted(v):
        return False
    return len(v) >= 8 or _SHAPE_RE.search(v) is not None


def _value_kind(value: str, default: str, key: str = "") -> str:
    """The token shape found in ``value``, else ``aws_secret_key`` under an AWS secret key, else
    ``default``."""
    if key and _AWS_SECRET_KEY.search(key):
        default = "aws_secret_key"
    m = _SHAPE_RE.search(value)
    return m.lastgroup or default if m else default


def _unquote(start: int, end: int, text: str) -> tuple[int, int]:
    if end - start >= 2 and text[start] == text[end - 1] and text[start] in "\"'":
        return start + 1, end - 1
    return start, end


def _replace_group(m: re.Match[str], group: str, kind: str) -> str:
    s, e = m.span(group)
    base = m.start()
    whole = m.group(0)
    return whole[: s - base] + marker(kind) + whole[e - base:]


def _substitute(m: re.Match[str], found: list[str]) -> str:
    """Replacement for one match of :data:`_COMBINED`; appends the kind when it redacts."""
    name = m.lastgroup or ""
    whole = m.group(0)
    if name == "bearer":
        found.append("bearer")
        return _replace_group(m, "bearer_v", "bearer")
    if name == "authz":
        scheme = (m.group("authz_scheme") or "").lower()
        kind = {"basic": "basic_auth", "bearer": "bearer"}.get(scheme, "authorization")
        found.append(kind)
        return _replace_group(m, "authz_v", kind)
    if name == "aws_secret":
        found.append("aws_secret_key")
        return _replace_group(m, "aws_secret_v", "aws_secret_key")
    if name in ("cli", "env", "json"):
        group = f"{name}_v"
        s, e = _unquote(*m.span(group), m.string)
        value = m.string[s:e]
        secret = _is_flag_value_secret(value) if name == "cli" else is_credential_like(value)
        if not secret:
            return whole
        key = m.string[max(0, m.start() - 16):s]  # the key may start before the secret word
        kind = _value_kind(value, "cli_flag" if name == "cli" else "secret_key", key)
        found.append(kind)
        base = m.start()
        return whole[: s - base] + marker(kind) + whole[e - base:]
    found.append(name)
    return marker(name)


def redact_text(text: str, where: str = "") -> tuple[str, list[Redaction]]:
    """Replace every secret inside one string (rules 1-3 of the module docstring).

    Inputs: ``text``, and ``where`` (the place to report, e.g. ``metadata.command_line``).
    Output: the new text (``text`` itself when nothing was found) and one :class:`Redaction`
    per replaced secret. Never raises for a string.
    """
    if not could_contain_secret(text):
        return text, []
    kinds: list[str] = []
    new = _COMBINED.sub(lambda m: _substitute(m, kinds), text)
    return new, [Redaction(k, where) for k in kinds]


def _child(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _walk(obj: Any, where: str, found: list[Redaction], depth: int, under_secret: bool) -> Any:
    if depth > MAX_DEPTH:
        raise InputError(f"{where or 'value'}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, str):
        if under_secret and is_credential_like(obj):
            kind = _value_kind(obj, "secret_key", where.rsplit(".", 1)[-1])
            found.append(Redaction(kind, where))
            return marker(kind)
        new, sub = redact_text(obj, where)
        found.extend(sub)
        return new
    if isinstance(obj, dict):
        out = {}
        for key, item in obj.items():
            secret_key = isinstance(key, str) and SECRET_KEY.search(key) is not None
            out[key] = _walk(item, _child(where, key), found, depth + 1, secret_key)
        return out
    if isinstance(obj, (list, tuple)):
        items = []
        skip_next = False
        for i, item in enumerate(obj):
            here = f"{where}[{i}]"
            if skip_next and isinstance(item, str) and _is_flag_value_secret(item):
                kind = _value_kind(item, "cli_flag", obj[i - 1])
                found.append(Redaction(kind, here))
                items.append(marker(kind))
                skip_next = False
                continue
            skip_next = isinstance(item, str) and _FLAG_ONLY.fullmatch(item) is not None
            if skip_next and i + 1 < len(obj) and isinstance(obj[i + 1], str) and obj[i + 1].startswith("-"):
                skip_next = False
            items.append(_walk(item, here, found, depth + 1, under_secret))
        return tuple(items) if isinstance(obj, tuple) else items
    return obj


def redact_value(obj: Any, where: str = "") -> tuple[Any, list[Redaction]]:
    """A copy of a JSON-like value with every secret replaced; the input is not modified.

    Inputs: ``obj`` (dicts, lists, tuples, strings and scalars, nested), ``where`` (the path of
    ``obj`` itself; children get ``where.key`` and ``where[i]``). Strings are scanned with
    :func:`redact_text`; values under secret-looking keys are judged as in rule 3; a list element
    after a ``--*token*``-style flag element is judged as in rule 2. Other types are returned as
    they are. Output: (copy, redactions). Raises :class:`~trace_report.errors.InputError` when
    ``obj`` is nested deeper than :data:`MAX_DEPTH`.
    """
    found: list[Redaction] = []
    return _walk(obj, where, found, 0, False), found


def redact_json_text(text: str, where: str = "") -> tuple[str, list[Redaction]]:
    """Redact a JSON document held as text (an event's ``args``).

    The text is decoded and walked with :func:`redact_value`, so keys count (rule 3); when
    something was replaced it is encoded again (compact, non-ASCII kept), else ``text`` is
    returned unchanged. Text that is not valid JSON (or too deeply nested) is scanned as plain
    text with :func:`redact_text`. Never raises for a string.
    """
    if not could_contain_secret(text):
        return text, []
    try:
        doc = json.loads(text)
        clean, found = redact_value(doc, where)
    except (ValueError, RecursionError, InputError):
        return redact_text(text, where)
    if not found:
        return text, []
    return json.dumps(clean, ensure_ascii=False, separators=(",", ":")), found


def summarize(redactions: list[Redaction]) -> list[str]:
    """``kind@where`` strings (for ``traces.redacted_keys``), first occurrence order, no repeats."""
    return list(dict.fromkeys(str(r) for r in redactions))

