"""Find and replace secrets in every string the ingest stores: trace metadata, ``run.json``
manifests, event names and args, host and device names, nsys and ncu strings.

Pure functions over strings and JSON-like values (dicts, lists, tuples, scalars); nothing here
reads files or imports the rest of the package but :mod:`trace_report.errors`. One screen,
:func:`redact_text`, judges every string; :func:`redact_value` walks JSON-like values with it,
:class:`StringScreen` applies it to many stored strings (each distinct value once).

What is a secret (the rule, applied by :func:`redact_text` and :func:`redact_value`):

1. **Token shapes**, anywhere inside any string: HuggingFace ``hf_`` + 30 or more letters/digits
   (``hf_token``); OpenAI ``sk-`` / ``sk-proj-`` + 20 or more of ``[A-Za-z0-9_-]``
   (``openai_key``); AWS access key ids ``AKIA``/``ASIA`` + 16 upper-case letters/digits
   (``aws_access_key``) and the 40-character secret after an ``aws_secret[_access]_key`` key
   (``aws_secret_key``, also the kind of anything rules 2 and 3 redact under such a name);
   GitHub ``ghp_``/``gho_``/``ghs_``/``ghu_``/``ghr_`` + 30 or more, and ``github_pat_`` + 30
   or more (``github_token``; GitHub's token formats, "Authentication token format updates",
   https://github.blog/changelog/2021-03-31-authentication-token-format-updates/:
   36 characters after the prefix, fine-grained tokens
   ``github_pat_`` + 82); GitLab tokens, a GitLab prefix (``glpat-`` personal/project/group
   access, ``gloas-`` OAuth application secret, ``gldt-`` deploy, ``glrt-`` runner, ``glcbt-``
   CI/CD job, ``glptt-`` pipeline trigger, ``glft-`` feed, ``glimt-`` incoming mail,
   ``glagent-`` agent, ``glsoat-`` SCIM, ``glffct-`` feature flags client: docs.gitlab.com,
   "GitLab token overview", "Token prefixes") + 20 or more of ``[0-9A-Za-z_-]`` and the
   ``.``-separated routing suffix newer tokens carry (``gitlab_token``); Stripe secret and
   restricted keys ``sk_live_``/``rk_live_`` (and the ``_test_`` ones) + 20 or more letters/digits
   (``stripe_key``; docs.stripe.com/keys; Stripe's own detection pattern allows 10 to 128, we
   ask 20 so that identifiers such as ``mask_live_kernel`` stay); Google API keys ``AIza`` + 35
   of ``[0-9A-Za-z_-]`` (``google_api_key``, 39 characters in all, GitHub secret scanning's
   ``google_api_key``); npm access tokens ``npm_`` + 36 letters/digits (``npm_token``;
   docs.npmjs.com "About access tokens", GitHub secret scanning's ``npm_access_token``); PyPI
   API tokens ``pypi-`` + a macaroon that starts ``AgE`` (``pypi-AgEIcHlwaS5vcmc...`` on
   pypi.org, ``pypi-AgENdGVzdC5weXBpLm9yZw...`` on TestPyPI) + 50 or more of ``[A-Za-z0-9_-]``
   (``pypi_token``; GitHub secret scanning's ``pypi_api_token``); Slack
   ``xoxb-``/``xoxp-``/``xoxa-``... (``slack_token``); JWTs, three base64url parts the first
   starting ``eyJ`` (``jwt``); ``Bearer <token>`` with a token of 8 or more characters
   (``bearer``); the value of an ``Authorization:`` / ``Authorization=`` header (``basic_auth``
   for ``Basic``, else ``bearer`` or ``authorization``); PEM private keys ``-----BEGIN ...
   PRIVATE KEY-----`` up to ``-----END ...-----`` (``pem``). The prefixes that no identifier
   contains (``hf_``, ``gh?_``, ``github_pat_``, the GitLab ones, ``sk_live_``..., ``AIza``,
   ``npm_``, ``pypi-``) count glued to a word (``FOO_ghp_...``, ``x_hf_...``): only the token
   is replaced; ``sk-``, ``xox?-``, ``eyJ`` and ``AKIA`` need a boundary before them.
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
   A dict key that itself holds a secret is replaced like any string.
4. **Credentials in URLs** (RFC 3986 userinfo, ``scheme://user:password@host``): the password
   (everything from the first ``:`` after ``://`` to the last ``@`` of the authority) is a
   secret (``url_password``, or the token shape it has); scheme, user and host stay readable:
   ``postgres://admin:<redacted:url_password>@db:5432/x``,
   ``https://__token__:<redacted:pypi_token>@upload.pypi.org``. A URL without ``user:...@``
   (``https://host/path``, ``http://host:8080/``) and placeholders (``***``, ``$PASS``,
   ``${PASS}``, ``%s``, ``{}``) stay. A token used as the user name is found by rule 1.
5. **A password glued to ``-p``** after a client whose ``-p`` *is* the password: the MySQL /
   MariaDB clients (``mysql``, ``mysqldump``, ``mysqladmin``, ``mysqlimport``, ``mysqlcheck``,
   ``mysqlshow``, ``mysqlslap``, ``mysqlpump``, ``mysqlbinlog``, ``mysqlsh``, ``mariadb`` and
   ``mariadb-dump``...: "if you use the short option form (-p), you cannot have a space between
   the option and the password", MySQL reference manual, "Command options for connecting to the
   server") and ``sshpass -p``. In the same command (up to a newline, ``;``, ``|`` or ``&``), or
   in an argv list after such an element, every ``-pVALUE`` is redacted (``cli_flag``) unless
   VALUE is only digits (a port's shape: ``-p3306`` stays, at the price of an all-digit MySQL
   password). Nothing else: ``gcc -pthread``, ``docker run -p8080:80``, ``ssh -p2222`` and
   ``psql -p5432`` (psql's ``-p`` is the port; its password never goes on the command line)
   have no such command word before them and stay. Uppercase ``-P`` (MySQL's port) is not ``-p``.

Only the secret part is replaced, by ``<redacted:KIND>``: ``python run.py --hf-token
<redacted:hf_token> --lr 0.1``. What was replaced is reported as :class:`Redaction` records
(kind and place, never the value); :func:`summarize` turns them into ``kind@where`` strings.

Bulk use: :data:`PRECHECK_PATTERN` is one regular expression (valid for Python ``re`` and for
RE2, i.e. ``pyarrow.compute.match_substring_regex``) that matches every string in which the
rules above could find something; strings it does not match need no further work
(:func:`could_contain_secret`).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from trace_report.errors import InputError

MARKER = "<redacted:{kind}>"
"""What replaces a secret; ``KIND`` is the :attr:`Redaction.kind`."""

MIN_SECRET_TEXT = 6
"""The shortest text any rule redacts something in (``://:x@``); shorter ones are skipped."""

MAX_DEPTH = 200
"""Nesting depth of dicts/lists beyond which :func:`redact_value` refuses a value."""

_FLAG_WORDS = r"(?:token(?!iz)|key|secret|passw(?:or)?d|credential)"
_KEY_WORDS = r"(?:token(?!iz)|key|secret|passw(?:or)?d|credential|auth(?!or(?!iz)))"

SECRET_KEY = re.compile(_KEY_WORDS, re.IGNORECASE)
"""Matches (``search``) a secret-looking key name (rule 3 of the module docstring)."""

_GITLAB_PREFIXES = ("glpat", "gloas", "gldt", "glrt", "glcbt", "glptt", "glft", "glimt", "glagent", "glsoat",
                    "glffct")
"""GitLab's token prefixes (docs.gitlab.com, "GitLab token overview", "Token prefixes")."""

_SHAPES: list[tuple[str, str]] = [
    ("pem", r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[^\"]*?(?:-----END[A-Z0-9 ]*-----|(?=\")|\Z)"),
    ("jwt", r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    ("hf_token", r"hf_[A-Za-z0-9]{30,}"),
    ("openai_key", r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("aws_access_key", r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"),
    ("gitlab_token", rf"(?:{'|'.join(_GITLAB_PREFIXES)})-[0-9A-Za-z_-]{{20,}}(?:\.[0-9A-Za-z_.-]*[0-9A-Za-z])?"),
    ("stripe_key", r"[sr]k_(?:live|test)_[0-9A-Za-z]{20,}"),
    ("google_api_key", r"AIza[0-9A-Za-z_-]{35}"),
    ("npm_token", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    ("pypi_token", r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    ("slack_token", r"(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,}"),
]
"""Self-contained token shapes: (kind, pattern); the whole match is the secret. The shapes
whose prefix no identifier holds have no boundary before them (glued tokens, rule 1)."""

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
_SHAPE_PATTERN = "|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _SHAPES) + f"|(?P<bearer>{_BEARER})"
_AWS_SECRET_KEY = re.compile(r"aws.?secret", re.IGNORECASE)
_FLAG_ONLY = re.compile(rf"--[A-Za-z0-9_-]*(?i:{_FLAG_WORDS})[A-Za-z0-9_-]*")

# Rule 4. It starts at "://" (a pattern starting at the scheme would be tried, and scan a run of
# letters, from every position of a long text); the user name holds no ":" and no "@", the
# password runs to the last "@" before the path (an unencoded "@" in a password is common).
_URL_CREDENTIALS = r"://[^\s:/?#@\"'<>\[\]\\]*:(?P<pw>[^\s/?#\"'<>\\]+)@"
_PLACEHOLDER = r"\*+|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%s|%\([A-Za-z_]+\)s|\{[A-Za-z0-9_]*\}"

# Rule 5: the command word (alone: not inside a longer word, path or package name such as
# mysql_config, mysqlclient, mysql.connector), the rest of its command, and in it each glued -p
# whose value is not all digits.
_PW_COMMAND = (r"(?:mysql(?:dump|admin|import|check|show|slap|pump|binlog|sh)?"
               r"|mariadb(?:-(?:dump|admin|import|check|show|slap|binlog))?|sshpass)(?:\.exe)?")
_PW_COMMAND_LINE = rf"(?<![A-Za-z0-9_.-])(?i:{_PW_COMMAND})(?![A-Za-z0-9_.-])[^\n;|&]*"
_PW_COMMAND_WORD = rf"(?s:.*[/\\])?(?i:{_PW_COMMAND})"
_VALUE_END = r"[^\s\"',;|&\])]"
_GLUED_P = (rf"(?<=[\s\"'\[,])-p(?!\d+(?!{_VALUE_END}))"
            rf"(?:'(?P<pw_sq>[^'\n]+)'|\"(?P<pw_dq>[^\"\n]+)\"|(?P<pw>[^<\s\"',;|&\])]{_VALUE_END}*))")
_GLUED_P_ELEMENT = r"-p(?!\d+\Z)(?P<pw>(?s:[^<].*))"
_rx = functools.cache(re.compile)
"""The patterns above (and :data:`_SHAPE_PATTERN`), compiled on first use: most ingests never
need them, and compiling them all costs every command's start a few milliseconds."""

PRECHECK_PATTERN = (
    r"hf_|sk-|AKIA|ASIA|gh[pousr]_|github_pat_|xox[abposr]-|eyJ|-----BEGIN|(?i:bearer)\s"
    rf"|(?:{'|'.join(_GITLAB_PREFIXES)})-|[sr]k_(?:live|test)_|AIza|npm_|pypi-"
    r"|(?i:authorization|aws.?secret)"
    r"|--[A-Za-z0-9_-]*(?i:token|key|secret|passw|credential)"
    r"|(?i:token|key|secret|passw|credential|auth)[A-Za-z0-9_]*="
    r"|(?i:token|key|secret|passw|credential|auth)[^\"'=:]*[\"']\s*:\s*[\"'\[]"
    r"|:\\?/\\?/[^\s@]*@"
    r"|(?i:mysql|mariadb|sshpass)[^\n]*-p"
)
"""A superset of what the rules can find, for a cheap first screen (Python ``re`` and RE2).

Key words count only where a value may follow: ``WORD...=``, or a quoted key whose value is a
string or a list (``"num_tokens": 128`` and ``"use_auth_token": true`` are not candidates), so
that JSON ``args`` with harmless numeric keys do not reach the Python pass. A URL counts only
with an ``@`` after its ``://`` (``:\\/\\/`` too: JSON may escape ``/``); a MySQL-like command
word only with a ``-p`` after it."""
_PRECHECK = re.compile(PRECHECK_PATTERN)
_QUICK = re.compile(
    "|".join(re.escape(f) for f in ("hf_", "sk-", "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
                                    "github_pat_", "xox", "eyj", "-----begin", "bearer", "--", "token", "key",
                                    "secret", "passw", "credential", "auth", *(f"{p}-" for p in _GITLAB_PREFIXES),
                                    "k_live_", "k_test_", "aiza", "npm_", "pypi-", "@", "mysql", "mariadb",
                                    "sshpass"))
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
    return len(v) >= 8 or _rx(_SHAPE_PATTERN).search(v) is not None


def _value_kind(value: str, default: str, key: str = "") -> str:
    """The token shape found in ``value``, else ``aws_secret_key`` under an AWS secret key, else
    ``default``."""
    if key and _AWS_SECRET_KEY.search(key):
        default = "aws_secret_key"
    m = _rx(_SHAPE_PATTERN).search(value)
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


def _is_pw_command(item: str) -> bool:
    """Rule 5: whether an argv element is a MySQL-like command (``mysql``, ``/usr/bin/mysqldump``)."""
    tail = item[-24:].lower()
    if "sql" not in tail and "mariadb" not in tail and "sshpass" not in tail:
        return False
    return _rx(_PW_COMMAND_WORD).fullmatch(item) is not None


def _url_password(m: re.Match[str], found: list[str]) -> str:
    """Rule 4: the password of one ``://user:password@`` match replaced (placeholders kept)."""
    pw = m.group("pw")
    if _rx(_PLACEHOLDER).fullmatch(pw):
        return m.group(0)
    kind = _value_kind(pw, "url_password")
    found.append(kind)
    return _replace_group(m, "pw", kind)


def _glued_password(m: re.Match[str], found: list[str]) -> str:
    """Rule 5: each glued ``-pVALUE`` in one MySQL-like command replaced."""
    def one(p: re.Match[str]) -> str:
        group = next(g for g in ("pw", "pw_sq", "pw_dq") if p.group(g) is not None)
        if _is_redacted(p.group(group)):
            return p.group(0)
        kind = _value_kind(p.group(group), "cli_flag")
        found.append(kind)
        return _replace_group(p, group, kind)

    return _rx(_GLUED_P).sub(one, m.group(0))


def redact_text(text: str, where: str = "") -> tuple[str, list[Redaction]]:
    """Replace every secret inside one string (rules 1-5 of the module docstring).

    Inputs: ``text``, and ``where`` (the place to report, e.g. ``metadata.command_line``).
    Output: the new text (``text`` itself when nothing was found) and one :class:`Redaction`
    per replaced secret. Never raises for a string. This is the one screen of every stored
    string: :func:`redact_value`, :func:`redact_json_text` and :class:`StringScreen` call it.
    """
    if not could_contain_secret(text):
        return text, []
    kinds: list[str] = []
    new = text
    if "@" in new:  # rule 4 first: a token used as the URL's user name is then left to rule 1
        new = _rx(_URL_CREDENTIALS).sub(lambda m: _url_password(m, kinds), new)
    new = _COMBINED.sub(lambda m: _substitute(m, kinds), new)
    if "-p" in new:  # after the other rules: a secret between the command word and -p is theirs
        new = _rx(_PW_COMMAND_LINE).sub(lambda m: _glued_password(m, kinds), new)
    if not kinds:
        return text, []
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
            if isinstance(key, str):
                clean_key, sub = redact_text(key, _child(where, "<key>"))
                found.extend(sub)
            else:
                clean_key = key
            out[clean_key] = _walk(item, _child(where, clean_key), found, depth + 1, secret_key)
        return out
    if isinstance(obj, (list, tuple)):
        items = []
        skip_next = False
        pw_command = False
        for i, item in enumerate(obj):
            here = f"{where}[{i}]"
            if skip_next and isinstance(item, str) and _is_flag_value_secret(item):
                kind = _value_kind(item, "cli_flag", obj[i - 1])
                found.append(Redaction(kind, here))
                items.append(marker(kind))
                skip_next = False
                continue
            glued = _rx(_GLUED_P_ELEMENT).fullmatch(item) if pw_command and isinstance(item, str) else None
            if glued is not None:  # rule 5 in an argv list: ["mysql", "-u", "root", "-pVALUE"]
                kind = _value_kind(glued.group("pw"), "cli_flag")
                found.append(Redaction(kind, here))
                items.append("-p" + marker(kind))
                continue
            pw_command = pw_command or (isinstance(item, str) and _is_pw_command(item))
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


class StringScreen:
    """:func:`redact_text` over many stored strings (columns of a table, fields of rows), each
    distinct string judged once, the values changed counted by ``kind@where``.

    ``screen(text, where)`` gives the text to store (``text`` itself when clean; non-strings
    and None are returned as they are); :attr:`counts` holds, per ``kind@where``, how many of
    the values given were changed (a value with two secrets of one kind counts once);
    :meth:`summary` gives them as ``traces.redacted_keys`` writes them for events:
    ``kind@where (N events)``."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._seen: dict[str, tuple[str, tuple[str, ...]] | None] = {}

    def _judge(self, text: str) -> tuple[str, tuple[str, ...]] | None:
        """(new text, kinds) of a string with a secret, None for a clean one; each string once."""
        try:
            return self._seen[text]
        except KeyError:
            new, found = redact_text(text)
            hit = (new, tuple(dict.fromkeys(r.kind for r in found))) if found else None
            self._seen[text] = hit
            return hit

    def __call__(self, text: Any, where: str) -> Any:
        if not isinstance(text, str):
            return text
        hit = self._judge(text)
        if hit is None:
            return text
        for kind in hit[1]:
            self.counts[f"{kind}@{where}"] += 1
        return hit[0]

    def column(self, values: list[Any], where: str) -> list[Any]:
        """``values`` with every string screened (the list itself when nothing changed)."""
        changed = {}
        for text in set(values):
            if isinstance(text, str):
                hit = self._judge(text)
                if hit is not None:
                    changed[text] = hit
        if not changed:
            return values
        for text, (_, kinds) in changed.items():
            n = values.count(text)
            for kind in kinds:
                self.counts[f"{kind}@{where}"] += n
        return [changed[v][0] if isinstance(v, str) and v in changed else v for v in values]

    def record(self, row: dict[str, Any], where: str) -> dict[str, Any]:
        """A copy of ``row`` with every string value screened (``where.<key>`` for each)."""
        return {k: self(v, f"{where}.{k}") for k, v in row.items()}

    def summary(self, unit: str = "events") -> list[str]:
        """``kind@where (N <unit>)`` for every count, sorted."""
        return [f"{key} ({n} {unit})" for key, n in sorted(self.counts.items()) if n > 0]
