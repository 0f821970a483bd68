"""trace_report.redact: secrets found by value and by key, and nothing else.

Planted secrets are built at test time (never as literals in the repository: a pre-commit
check greps tracked files for token shapes), from seeded random characters so that they do
not compress away when a later test greps written files for them.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import random
import string
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import SHARED, TRACES, shared_or_skip
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_report.errors import InputError
from trace_report.redact import (
    PRECHECK_PATTERN,
    Redaction,
    StringScreen,
    could_contain_secret,
    is_credential_like,
    marker,
    redact_json_text,
    redact_text,
    redact_value,
    summarize,
)

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
LOWER_DIGITS = string.ascii_lowercase + string.digits


def rand(n: int, alphabet: str = ALNUM, seed: int = 0) -> str:
    rng = random.Random(f"{seed}-{n}-{alphabet[:3]}")
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(obj: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def hf_token(seed: int = 0) -> str:
    return "hf_" + rand(34, seed=seed)


def aws_key_id(seed: int = 0) -> str:
    return "AKIA" + rand(16, UPPER, seed)


def google_key(seed: int = 0) -> str:
    return "AIza" + rand(35, ALNUM + "_-", seed)


def npm_token(seed: int = 0) -> str:
    return "npm_" + rand(36, seed=seed)


def pypi_token(seed: int = 0) -> str:
    """A pypi.org API token: ``pypi-`` + a macaroon whose base64 starts ``AgEIcHlwaS5vcmc``."""
    return "pypi-AgEIcHlwaS5vcmc" + rand(120, ALNUM + "_-", seed)


def pem_block() -> str:
    body = "\n".join(rand(64, ALNUM + "+/", i) for i in range(3))
    kind = "RSA " + "PRIVATE KEY"
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


# (expected kind, the secret, a text holding it, what must survive around it)
SHAPES: list[tuple[str, Callable[[], str], str]] = [
    ("hf_token", hf_token, "export of {s} done"),
    ("openai_key", lambda: "sk-proj-" + rand(48, ALNUM + "_-"), "client key {s}, model gpt"),
    ("openai_key", lambda: "sk-" + rand(48), "OPENAI {s} end"),
    ("aws_access_key", aws_key_id, "id={s} region=us-east-1"),
    ("aws_access_key", lambda: "ASIA" + rand(16, UPPER, 1), "temporary {s} creds"),
    ("github_token", lambda: "ghp_" + rand(36), "git clone with {s} ok"),
    ("github_token", lambda: "gho_" + rand(36, seed=1), "oauth {s} ok"),
    ("github_token", lambda: "ghs_" + rand(36, seed=2), "server {s} ok"),
    ("github_token", lambda: "ghu_" + rand(36, seed=3), "user {s} ok"),
    ("github_token", lambda: "github_pat_" + rand(22) + "_" + rand(59, seed=4), "fine-grained {s} ok"),
    ("slack_token", lambda: "xoxb-" + rand(12, string.digits) + "-" + rand(24), "slack {s} ok"),
    ("slack_token", lambda: "xoxp-" + rand(12, string.digits, 5) + "-" + rand(24, seed=5), "slack {s} ok"),
    ("jwt", lambda: f"{b64url({'alg': 'HS256'})}.{b64url({'sub': rand(10)})}.{rand(43, ALNUM + '_-')}",
     "cookie {s}; path=/"),
    ("pem", pem_block, "key file:\n{s}\nthen more"),
    # Shapes by their documented formats (redact.py, rule 1, cites each)
    ("stripe_key", lambda: "sk_live_" + rand(24, seed=30), "charge with {s} now"),
    ("stripe_key", lambda: "rk_live_" + rand(99, seed=31), "restricted {s} now"),
    ("stripe_key", lambda: "sk_test_" + rand(24, seed=32), "test mode {s} now"),
    ("google_api_key", google_key, "maps?key={s}&v=3"),
    ("gitlab_token", lambda: "glpat-" + rand(20, ALNUM + "_-", 33), "clone with {s} ok"),
    ("gitlab_token", lambda: "glpat-" + rand(27, ALNUM + "_-", 34) + ".01." + rand(9, LOWER_DIGITS, 34),
     "routable {s} ok"),
    ("gitlab_token", lambda: "glrt-" + rand(20, ALNUM + "_-", 35), "runner {s} ok"),
    ("gitlab_token", lambda: "gldt-" + rand(20, ALNUM + "_-", 36), "deploy {s} ok"),
    ("npm_token", npm_token, "//registry.npmjs.org/:_authToken {s}"),
    ("pypi_token", pypi_token, "upload with {s} ok"),
    ("pypi_token", lambda: "pypi-AgENdGVzdC5weXBpLm9yZw" + rand(80, ALNUM + "_-", 37), "testpypi {s} ok"),
    # glued after "_" or other word characters: the prefix is distinctive, only the token goes
    ("github_token", lambda: "ghp_" + rand(36, seed=38), "FOO_{s} ok"),
    ("github_token", lambda: "github_pat_" + rand(22, seed=39) + "_" + rand(59, seed=39), "MY_{s} ok"),
    ("hf_token", lambda: hf_token(40), "x_{s} ok"),
    ("stripe_key", lambda: "sk_live_" + rand(30, seed=41), "STRIPE_{s} ok"),
    ("google_api_key", lambda: google_key(42), "KEY{s} ok"),
    ("gitlab_token", lambda: "glpat-" + rand(20, ALNUM + "_-", 43), "GL_{s} ok"),
    ("npm_token", lambda: npm_token(44), "NPM{s} ok"),
    ("pypi_token", lambda: pypi_token(45), "TWINE_{s} ok"),
]


@pytest.mark.parametrize(("kind", "make", "context"), SHAPES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SHAPES)])
def test_token_shapes_are_found_anywhere_in_a_string(kind: str, make: Callable[[], str], context: str) -> None:
    secret = make()
    text = context.format(s=secret)
    new, found = redact_text(text, "metadata.note")
    assert new == context.format(s=marker(kind))
    assert found == [Redaction(kind, "metadata.note")]
    assert could_contain_secret(text)
    assert secret not in repr(found) and secret not in " ".join(summarize(found))


@pytest.mark.parametrize(("url", "expected", "kind"), [
    ("postgres://admin:{pw}@db.internal:5432/prod", "postgres://admin:<redacted:url_password>@db.internal:5432/prod",
     "url_password"),
    ("postgresql://user:{pw}@host/db?sslmode=require", "postgresql://user:<redacted:url_password>@host/db?sslmode=require",
     "url_password"),
    ("mysql://root:{pw}@localhost", "mysql://root:<redacted:url_password>@localhost", "url_password"),
    ("redis://:{pw}@cache:6379/0", "redis://:<redacted:url_password>@cache:6379/0", "url_password"),
    ("amqp://guest:p@ss{pw}@mq/vhost", "amqp://guest:<redacted:url_password>@mq/vhost", "url_password"),
    ("https://__token__:{pypi}@upload.pypi.org/legacy/",
     "https://__token__:<redacted:pypi_token>@upload.pypi.org/legacy/", "pypi_token"),
    ("https://oauth2:{gl}@gitlab.example.com/g/p.git", "https://oauth2:<redacted:gitlab_token>@gitlab.example.com/g/p.git",
     "gitlab_token"),
    ('{{"url": "postgres://u:{pw}@h/db"}}', '{{"url": "postgres://u:<redacted:url_password>@h/db"}}', "url_password"),
])
def test_url_userinfo_keeps_scheme_user_and_host(url: str, expected: str, kind: str) -> None:
    values = {"pw": rand(14, seed=50), "pypi": pypi_token(51), "gl": "glpat-" + rand(20, ALNUM + "_-", 52)}
    text = url.format(**values)
    new, found = redact_text(f"connect {text} done", "metadata.cmd")
    assert new == f"connect {expected.format(**values)} done"
    assert found == [Redaction(kind, "metadata.cmd")]
    assert not any(v in new for v in values.values())
    assert could_contain_secret(text)


def test_url_with_a_token_as_user_name_loses_both() -> None:
    token = "ghp_" + rand(36, seed=53)
    new, found = redact_text(f"git clone https://{token}:x-oauth-basic@github.com/o/r.git")
    assert new == "git clone https://<redacted:github_token>:<redacted:url_password>@github.com/o/r.git"
    assert sorted(r.kind for r in found) == ["github_token", "url_password"]


@pytest.mark.parametrize(("line", "expected"), [
    ("mysql -h db -u root -p{pw} prod", "mysql -h db -u root -p<redacted:cli_flag> prod"),
    ("/usr/bin/mysqldump -uroot -p{pw} --all-databases > x.sql",
     "/usr/bin/mysqldump -uroot -p<redacted:cli_flag> --all-databases > x.sql"),
    ("MYSQL -p'{pw}' -e 'select 1'", "MYSQL -p'<redacted:cli_flag>' -e 'select 1'"),
    ("mariadb-dump -u u -p{pw} db; gcc -pthread x.c", "mariadb-dump -u u -p<redacted:cli_flag> db; gcc -pthread x.c"),
    ("sshpass -p{pw} ssh -p2222 host", "sshpass -p<redacted:cli_flag> ssh -p2222 host"),
    ("mysqladmin -P3306 -p{pw} status", "mysqladmin -P3306 -p<redacted:cli_flag> status"),
])
def test_password_glued_to_p_after_a_mysql_like_command(line: str, expected: str) -> None:
    pw = rand(12, seed=54)
    new, found = redact_text(line.format(pw=pw), "events.name")
    assert new == expected and pw not in new
    assert found == [Redaction("cli_flag", "events.name")]


def test_password_glued_to_p_in_an_argv_list() -> None:
    pw = rand(12, seed=55)
    argv = ["/usr/bin/mysql", "-u", "root", f"-p{pw}", "-P3306", "-p3306", "--silent", "prod"]
    clean, found = redact_value({"argv": argv, "other": ["gcc", "-pthread", f"-p{pw}x"]})
    assert clean["argv"] == ["/usr/bin/mysql", "-u", "root", "-p<redacted:cli_flag>", "-P3306", "-p3306", "--silent",
                             "prod"]
    assert clean["other"] == ["gcc", "-pthread", f"-p{pw}x"]  # no MySQL-like command before it
    assert summarize(found) == ["cli_flag@argv[3]"]


NEAR_MISSES = [
    "gcc -O2 -pthread -o train train.c", "nvcc -Xcompiler -pthread kernel.cu", "docker run -p8080:80 server",
    "python -m http.server -p8080", "ssh -p2222 user@host", "psql -h db -p5432 -U app", "mysql -u root -p3306 prod",
    "mysql -u root -p prod", "mysql_config --libs -pthread", "pip install mysqlclient -pfoo",
    "https://host/path", "https://huggingface.co/bert-base-uncased/resolve/main/config.json",
    "http://host:8080/x?y=a@b", "ssh://git@github.com:22/o/r.git", "git@github.com:o/r.git",
    "postgres://u:***@h/db", "postgres://u:${PGPASSWORD}@h/db", "mailto:someone@example.com",
    "mask_live_kernel", "void mask_live_kernel<float>(float*, int)", "risk_test_metrics", "task_live_update_step",
    "void attn_mask_live_tokens_kernel<128>(Params)", "sk_live_short", "npm_run_build", "pypi-simple-index",
    "glpat-short", "AIzaShort", "glue_ft-tuning", "numpy_npm_helper", "hf_hub_download", "github_pat_short",
    "aten::_scaled_dot_product_flash_attention", "cudaLaunchKernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_stay(text: str) -> None:
    assert redact_text(text, "events.name") == (text, [])
    assert redact_json_text(json.dumps({"cmd": text}), "events.args") == (json.dumps({"cmd": text}), [])


def test_a_secret_dict_key_is_replaced_too() -> None:
    token = "ghp_" + rand(36, seed=56)
    clean, found = redact_value({"env": {token: "1", "PATH": "/usr/bin"}}, "metadata")
    assert clean == {"env": {"<redacted:github_token>": "1", "PATH": "/usr/bin"}}
    assert summarize(found) == ["github_token@metadata.env.<key>"] and token not in repr(found)


def test_string_screen_judges_each_distinct_value_once_and_counts_values() -> None:
    from trace_report import redact

    token = google_key(57)
    calls: list[str] = []
    real = redact.redact_text

    def spy(text: str, where: str = "") -> tuple[str, list[Redaction]]:
        calls.append(text)
        return real(text, where)

    screen = StringScreen()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(redact, "redact_text", spy)
        names = [screen(t, "events.name") for t in ["gemm", f"k {token}", "gemm", f"k {token}", None, 3]]
        column = screen.column(["a", f"k {token}", 1.5, None, f"k {token}", "a"], "ncu_metrics.text")
        same = screen.column(["a", "b", 2.0], "ncu_metrics.unit")
    assert names == ["gemm", "k <redacted:google_api_key>", "gemm", "k <redacted:google_api_key>", None, 3]
    assert column == ["a", "k <redacted:google_api_key>", 1.5, None, "k <redacted:google_api_key>", "a"]
    assert sorted(calls) == sorted(["gemm", f"k {token}", "a", "b"])  # once each, whatever the column
    assert same == ["a", "b", 2.0]
    assert screen.summary() == ["google_api_key@events.name (2 events)", "google_api_key@ncu_metrics.text (2 events)"]
    assert screen.record({"host": f"h {token}", "pid": 4}, "ncu_kernels") == {"host": "h <redacted:google_api_key>",
                                                                              "pid": 4}


SCREEN_WORDS = ["://", ":\\/\\/", "@", "mysql", "MariaDB", "sshpass", "-p", "-P", "sk_live_", "rk_test_", "k_live",
                "AIza", "aiza", "npm_", "pypi-", "glpat-", "GLRT-", "gl", "pat", "x", "_", "-", " ", ":", "/",
                "abcdefghij", "1234", "é", "ſk_live_", "\\"]
"""Pieces of the new rules' words for the compiled scanner's screen."""
_SCREEN_TEXTS = st.lists(st.sampled_from(SCREEN_WORDS), max_size=8).map("".join)
_SCREEN_ARGS = st.dictionaries(st.sampled_from(["a", "url", "cmd"]),
                               _SCREEN_TEXTS | st.lists(_SCREEN_TEXTS, max_size=4), max_size=3)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SCREEN_ARGS, min_size=1, max_size=5))
def test_compiled_screen_marks_every_row_re2_flags_for_the_new_rules(objects: list[dict[str, Any]]) -> None:
    """The scanner's anchor words (formats/_scan.pyx) cover the new parts of PRECHECK_PATTERN."""
    import msgspec

    from trace_report.formats import kineto

    if kineto._scan is None:
        pytest.skip("the compiled scanner is not built")
    events = [{"ph": "X", "name": "k", "ts": i, "dur": 1, "args": a} for i, a in enumerate(objects)]
    piece = kineto._scanned_piece(msgspec.json.encode(events))
    assert piece is not None and piece.args_suspects is not None
    args = piece.table.column("args").to_pylist()
    hits = pc.fill_null(pc.match_substring_regex(pa.array(args, pa.string()), PRECHECK_PATTERN), False).to_pylist()
    for text, hit, mark in zip(args, hits, piece.args_suspects.tolist(), strict=True):
        assert mark or not hit, text


def test_bearer_and_authorization_headers_keep_the_scheme() -> None:
    token = rand(40, ALNUM + "-._~+/", 7)
    basic = base64.b64encode(f"user:{rand(12)}".encode()).decode()
    assert redact_text(f"GET / Bearer {token} HTTP/1.1") == (f"GET / Bearer {marker('bearer')} HTTP/1.1",
                                                              [Redaction("bearer", "")])
    new, found = redact_text(f"Authorization: Basic {basic}", "h")
    assert new == f"Authorization: Basic {marker('basic_auth')}" and found == [Redaction("basic_auth", "h")]
    new, found = redact_text(f'{{"Authorization": "Bearer {token}"}}', "h")
    assert token not in new and found[0].kind == "bearer"


def test_aws_secret_key_after_its_key_name() -> None:
    secret = rand(40, ALNUM + "/+", 8)
    for text in (f"aws_secret_access_key = {secret}", f'"aws_secret_access_key": "{secret}"',
                 f"AWS_SECRET_ACCESS_KEY={secret}"):
        new, found = redact_text(text)
        assert secret not in new and marker("aws_secret_key") in new
        assert found == [Redaction("aws_secret_key", "")]


@pytest.mark.parametrize(("line", "expected", "kinds"), [
    ("python run.py --hf-token {hf} --lr 0.1", "python run.py --hf-token <redacted:hf_token> --lr 0.1", ["hf_token"]),
    ("run --hf-token={hf}", "run --hf-token=<redacted:hf_token>", ["hf_token"]),
    ("run --api-key=abc --x 1", "run --api-key=<redacted:cli_flag> --x 1", ["cli_flag"]),
    ("login --password hunter2", "login --password <redacted:cli_flag>", ["cli_flag"]),
    ("login --db-passwd 'two words'", "login --db-passwd '<redacted:cli_flag>'", ["cli_flag"]),
    ("s3 --aws-secret-key K/ey+value", "s3 --aws-secret-key <redacted:aws_secret_key>", ["aws_secret_key"]),
    ("gen --max-tokens 4096 --key-dim=64 --use-auth-token true --tokenizer bert-base-uncased",
     "gen --max-tokens 4096 --key-dim=64 --use-auth-token true --tokenizer bert-base-uncased", []),
    ("gen --token --verbose", "gen --token --verbose", []),
])
def test_command_line_flags(line: str, expected: str, kinds: list[str]) -> None:
    hf = hf_token(1)
    new, found = redact_text(line.format(hf=hf), "metadata.command_line")
    assert new == expected
    assert [r.kind for r in found] == kinds
    assert all(r.where == "metadata.command_line" for r in found)


def test_argv_lists_redact_the_element_after_the_flag() -> None:
    hf = hf_token(2)
    argv = ["train.py", "--hf-token", hf, "--lr", "0.1", "--password", "hunter2", "--api-key=abc",
            "--max-tokens", "4096", "--token", "--verbose", "--secret", "false"]
    before = list(argv)
    clean, found = redact_value({"argv": argv})
    assert argv == before
    assert clean["argv"] == ["train.py", "--hf-token", "<redacted:hf_token>", "--lr", "0.1", "--password",
                             "<redacted:cli_flag>", "--api-key=<redacted:cli_flag>", "--max-tokens", "4096",
                             "--token", "--verbose", "--secret", "false"]
    assert summarize(found) == ["hf_token@argv[2]", "cli_flag@argv[6]", "cli_flag@argv[7]"]


def test_env_style_pairs_in_strings() -> None:
    secret = rand(20, seed=9)
    text = f"HF_TOKEN={secret} TOKENIZERS_PARALLELISM=false API_KEY=short DB_PASSWORD='{secret}' PATH=/usr/bin"
    new, found = redact_text(text, "env")
    assert new == ("HF_TOKEN=<redacted:secret_key> TOKENIZERS_PARALLELISM=false API_KEY=short "
                   "DB_PASSWORD='<redacted:secret_key>' PATH=/usr/bin")
    assert found == [Redaction("secret_key", "env")] * 2


def test_dict_entries_with_secret_looking_keys() -> None:
    hf, other = hf_token(3), rand(24, seed=10)
    value = {"env": {"HF_TOKEN": hf, "OPENAI_API_KEY": other, "AUTH_HEADER": other, "MY_CREDENTIALS": other,
                     "TOKENIZERS_PARALLELISM": "false", "PATH": "/usr/bin"},
             "api_keys": [other, "ab"], "pad_token": "[PAD]", "author": "Jane Q. Public"}
    clean, found = redact_value(value, "metadata")
    assert clean["env"] == {"HF_TOKEN": "<redacted:hf_token>", "OPENAI_API_KEY": "<redacted:secret_key>",
                            "AUTH_HEADER": "<redacted:secret_key>", "MY_CREDENTIALS": "<redacted:secret_key>",
                            "TOKENIZERS_PARALLELISM": "false", "PATH": "/usr/bin"}
    assert clean["api_keys"] == ["<redacted:secret_key>", "ab"]
    assert clean["pad_token"] == "[PAD]" and clean["author"] == "Jane Q. Public"
    assert summarize(found) == ["hf_token@metadata.env.HF_TOKEN", "secret_key@metadata.env.OPENAI_API_KEY",
                                "secret_key@metadata.env.AUTH_HEADER", "secret_key@metadata.env.MY_CREDENTIALS",
                                "secret_key@metadata.api_keys[0]"]


@pytest.mark.parametrize("value", [
    {"TOKENIZERS_PARALLELISM": "false"}, {"use_auth_token": True}, {"max_tokens": 4096}, {"key_dim": 64},
    {"num_keys": "8"}, {"secret_sauce": None}, {"api_key": ""}, {"token_budget": "1e6"}, {"auth": "no"},
    {"key": "dur"}, {"env": ["TOKENIZERS_PARALLELISM=false", "USE_AUTH=1"]},
    {"name": "aten::mm", "kernel": "void at::native::vectorized_elementwise_kernel<4>"},
    {"stack": "transformers/tokenization_utils_base.py(2855): __call__"},
])
def test_non_secrets_stay(value: dict[str, Any]) -> None:
    assert redact_value(value, "metadata") == (value, [])


def test_credential_like_rule() -> None:
    assert not any(is_credential_like(v) for v in [True, 4096, 1.5, None, "false", "YES", "null", "0", "1",
                                                   "8", "-3.5", "short", "[PAD]", "", "<redacted:hf_token>"])
    assert all(is_credential_like(v) for v in ["hunter22", rand(12), hf_token(4)])


def test_nested_paths_and_input_not_mutated() -> None:
    hf, aws = hf_token(5), aws_key_id(5)
    value = {"a": {"b": [{"c": f"x --hf-token {hf}"}, ("t", aws)], "n": 3}, "args": [0, 1, 2, {"name": aws}]}
    before = copy.deepcopy(value)
    clean, found = redact_value(value, "metadata")
    assert value == before
    assert clean == {"a": {"b": [{"c": "x --hf-token <redacted:hf_token>"}, ("t", "<redacted:aws_access_key>")],
                           "n": 3}, "args": [0, 1, 2, {"name": "<redacted:aws_access_key>"}]}
    assert summarize(found) == ["hf_token@metadata.a.b[0].c", "aws_access_key@metadata.a.b[1][1]",
                                "aws_access_key@metadata.args[3].name"]
    text = repr(found) + json.dumps(summarize(found))
    assert hf not in text and aws not in text


def test_summary_has_no_repeats() -> None:
    found = [Redaction("jwt", "a"), Redaction("jwt", "a"), Redaction("pem", "a")]
    assert summarize(found) == ["jwt@a", "pem@a"]


def test_json_text_keeps_clean_documents_as_they_are() -> None:
    hf = hf_token(6)
    clean = '{"External id": 7,  "Input Dims": [[1, 2]], "key_dim": 64}'
    assert redact_json_text(clean, "events.args") == (clean, [])
    new, found = redact_json_text(json.dumps({"hf_token": "x" * 12, "cmd": f"--hf-token {hf}"}), "events.args")
    assert json.loads(new) == {"hf_token": "<redacted:secret_key>", "cmd": "--hf-token <redacted:hf_token>"}
    assert summarize(found) == ["secret_key@events.args.hf_token", "hf_token@events.args.cmd"]
    broken = '{"cmd": "--hf-token ' + hf + '", '
    new, found = redact_json_text(broken, "events.args")
    assert hf not in new and found == [Redaction("hf_token", "events.args")]


def test_too_deep_values_are_refused() -> None:
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    with pytest.raises(InputError, match="nested deeper"):
        redact_value(deep)


def test_precheck_is_cheap_and_agrees_with_re2() -> None:
    """The screen used on Arrow columns (RE2) flags every planted secret and no common name."""
    planted = [ctx.format(s=make()) for _, make, ctx in SHAPES] + [
        "run --password hunter2", "HF_TOKEN=abcdefghij", '{"api_key": "abcdefgh"}', "x Bearer abcdefghij",
        '{"api key (prod)":"abcdefgh12"}', '{"tokens": ["abcdefgh12"]}', "Authorization: Basic dXNlcjpwYXNz",
        "aws_secret_access_key: " + rand(40, ALNUM + "/+", 3)]
    benign = ["aten::mm", "ProfilerStep#3", "cudaLaunchKernel", "void cutlass::Kernel<cutlass_80_tensorop>(Params)",
              "nn.Module: BertSelfAttention_0", "transformers/tokenization_utils_base.py(2855): __call__",
              '{"External id": 7, "Input Dims": [[8, 512]], "Input type": ["float"], "Call stack": ""}',
              "key_padding_mask", "torch/nn/functional.py(5373): multi_head_attention_forward",
              '{"num_tokens": 128, "use_auth_token": true, "key_dim": 64}', "tokenizer.encode(text=x)"]
    re2 = pc.match_substring_regex(pa.array(planted + benign), PRECHECK_PATTERN).to_pylist()
    assert re2 == [True] * len(planted) + [False] * len(benign)
    assert [could_contain_secret(t) for t in planted + benign] == re2
    assert all(redact_text(t) == (t, []) and redact_json_text(t) == (t, []) for t in benign)
    assert all(redact_json_text(t)[1] for t in planted)


def _env_dicts(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        found = [value] if "HF_TOKEN" in value else []
        return found + [d for v in value.values() for d in _env_dicts(v)]
    if isinstance(value, list):
        return [d for v in value for d in _env_dicts(v)]
    return []


def test_real_tracelens_metadata_env() -> None:
    """TraceLens traces carry ``metadata...env.HF_TOKEN`` (overwritten with X characters)."""
    shared_or_skip()
    checked = 0
    for path in sorted(TRACES.glob("tracelens_*/*.json.gz")):
        raw = gzip.decompress(path.read_bytes())
        if b'"HF_TOKEN"' not in raw:
            continue
        doc = json.loads(raw)
        meta = {k: v for k, v in doc.items() if k != "traceEvents"}
        clean, found = redact_value(meta)
        summary = summarize(found)
        envs, clean_envs = _env_dicts(meta), _env_dicts(clean)
        assert envs and len(envs) == len(clean_envs)
        for env, cleaned in zip(envs, clean_envs, strict=True):
            assert cleaned["HF_TOKEN"].startswith("<redacted:")
            assert any(s.endswith("env.HF_TOKEN") for s in summary)
            flags = {k: v for k, v in env.items() if str(v).lower() in ("true", "false", "0", "1")}
            assert any("TOKEN" in k for k in flags)  # TOKENIZERS_PARALLELISM=false is there ...
            assert {k: cleaned[k] for k in flags} == flags  # ... and stays
            assert [k for k in env if env[k] != cleaned[k]] == ["HF_TOKEN"]
            # by key: a value that has no token shape is redacted all the same
            _, again = redact_value({**env, "HF_TOKEN": "X" * 20}, "env")
            assert again == [Redaction("secret_key", "env.HF_TOKEN")]
        checked += 1
    assert checked >= 1, "no TraceLens trace with metadata env HF_TOKEN found"


def test_trace_metadata_and_run_json_are_redacted_by_value(tmp_path: Any) -> None:
    """``metadata.redact`` (trace metadata) and ``runs.read_manifest`` (run.json) delegate here."""
    from trace_report.formats.kineto_metadata import redact
    from trace_report.manifest import raw_manifest as read_manifest

    hf, aws = hf_token(11), aws_key_id(11)
    meta = {"metadata": {"command_line": f"python serve.py --hf-token {hf} --port 8000", "note": f"key {aws}",
                         "env": {"TOKENIZERS_PARALLELISM": "false"}}}
    clean, summary = redact(meta)
    assert clean["metadata"]["command_line"] == "python serve.py --hf-token <redacted:hf_token> --port 8000"
    assert clean["metadata"]["env"] == {"TOKENIZERS_PARALLELISM": "false"}
    assert summary == ["hf_token@metadata.command_line", "aws_access_key@metadata.note"]
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r1", "argv": ["train.py", "--hf-token", hf],
                                                   "config": {"max_tokens": 4096, "note": aws}}))
    manifest = read_manifest(tmp_path)
    assert manifest == {"run_id": "r1", "argv": ["train.py", "--hf-token", "<redacted:hf_token>"],
                        "config": {"max_tokens": 4096, "note": "<redacted:aws_access_key>"}}


def _hostile_trace() -> tuple[dict[str, Any], dict[str, str]]:
    """A small Kineto trace with secrets planted in metadata, event names and event args."""
    planted = {
        "hf": hf_token(20), "aws_meta": aws_key_id(20), "wandb": rand(40, string.hexdigits.lower(), 20),
        "gh": "ghp_" + rand(36, seed=21), "openai": "sk-proj-" + rand(48, seed=22),
        "bearer": rand(40, ALNUM + "-._", 23), "api_key": rand(24, seed=24), "aws_args": aws_key_id(25),
        "password": rand(14, seed=26),
    }
    p = planted
    base = {"ph": "X", "pid": 1, "tid": 1, "dur": 10.0}
    events = [
        {**base, "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "args": {"External id": 5, "Input Dims": [[8, 8]]}},
        {**base, "cat": "user_annotation", "name": f"download(token={p['gh']})", "ts": 20.0},
        {**base, "cat": "python_function", "name": f"client.py(12): call {p['openai']}", "ts": 40.0},
        {**base, "cat": "cpu_op", "name": "fetch", "ts": 60.0,
         "args": {"External id": 6, "url": f"https://hub.example/x?api_key={p['api_key']}&rev=main",
                  "header": f"Authorization: Bearer {p['bearer']}", "note": f"key {p['aws_args']}",
                  "Concrete Inputs": ["", f"--password {p['password']}"], "key_dim": 64}},
        {**base, "cat": "kernel", "name": "gemm_kernel", "ts": 80.0, "tid": 7,
         "args": {"correlation": 9, "stream": 7, "device": 0, "External id": 5}},
    ]
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1},
           "metadata": {"command_line": f"python serve.py --hf-token {p['hf']} --port 8000",
                        "cloud": {"note": f"creds {p['aws_meta']}"},
                        "env": {"TOKENIZERS_PARALLELISM": "false", "WANDB_API_KEY": p["wandb"]}},
           "traceEvents": events}
    return doc, planted


def test_end_to_end_nothing_planted_is_written(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """ingest -> .duckdb + event files, export, sql -f json -o, report, charts, every command's
    output: no planted secret in any byte written (or printed)."""
    import pyarrow.parquet as pq
    from conftest import run_cli

    doc, planted = _hostile_trace()
    src = tmp_path / "in" / "hostile.json"
    src.parent.mkdir()
    src.write_text(json.dumps(doc))
    out = tmp_path / "out"
    out.mkdir()
    db = out / "h.duckdb"
    code, _, err = run_cli(["ingest", str(src), "-o", str(db)], capsys)
    assert code == 0, err
    assert "redacted secrets in events" in err
    code, _, err = run_cli(["export", str(db), "-o", str(out / "export")], capsys)
    assert code == 0, err
    for table in ("events", "traces"):
        code, _, err = run_cli(["sql", str(db), f"select * from {table}", "-f", "json", "-o",
                                str(out / f"{table}.json")], capsys)
        assert code == 0, err
    code, _, err = run_cli(["report", str(db), "-o", str(out / "report.html")], capsys)
    assert code == 0, err
    code, _, err = run_cli(["compare", str(db), str(src), "--chart", str(out / "compare.html")], capsys)
    assert code == 0, err
    printed = ""
    for command in (["top-kernels"], ["breakdown"], ["flags"], ["advise"], ["roofline"]):
        code, stdout, stderr = run_cli([*command, str(db), "-f", "json"], capsys)
        printed += stdout + stderr
    assert not any(value in printed for value in planted.values())
    written = sorted(p for p in out.rglob("*") if p.is_file())
    assert any(p.suffix == ".parquet" for p in written) and (out / "h.duckdb.events").is_dir()
    assert any("export" in p.parts for p in written)
    texts = [p.read_bytes() for p in written]
    for p in written:  # Parquet is compressed: read its values back as well as grepping its bytes
        if p.suffix == ".parquet":
            texts.append(json.dumps(pq.read_table(p).to_pylist(), default=str).encode())
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        for (table,) in con.execute("select table_name from information_schema.tables").fetchall():
            texts.append(json.dumps(con.execute(f'select * from "{table}"').fetchall(), default=str).encode())
        (keys,) = con.execute("select redacted_keys from traces").fetchone()
    for name, value in planted.items():
        assert not any(value.encode() in t for t in texts), f"planted {name} was written"
    assert set(keys) == {
        "hf_token@metadata.command_line", "aws_access_key@metadata.cloud.note",
        "secret_key@metadata.env.WANDB_API_KEY",
        "github_token@events.name (1 events)", "openai_key@events.name (1 events)",
        "secret_key@events.args (1 events)", "bearer@events.args (1 events)",
        "aws_access_key@events.args (1 events)", "cli_flag@events.args (1 events)",
    }
    assert not any(v in " ".join(keys) for v in planted.values())
    events = json.loads((out / "events.json").read_text())
    by_ts = {e["ts_us"]: e for e in events}
    assert by_ts[20.0]["name"] == "download(token=<redacted:github_token>)"
    assert by_ts[40.0]["name"] == "client.py(12): call <redacted:openai_key>"
    args = json.loads(by_ts[60.0]["args"])
    assert args["header"] == "Authorization: Bearer <redacted:bearer>" and args["key_dim"] == 64
    assert args["url"] == "https://hub.example/x?api_key=<redacted:secret_key>&rev=main"
    assert by_ts[60.0]["external_id"] == 6 and json.loads(by_ts[0.0]["args"])["Input Dims"] == [[8, 8]]
    meta = json.loads(json.loads((out / "traces.json").read_text())[0]["metadata"])
    assert meta["metadata"]["env"]["TOKENIZERS_PARALLELISM"] == "false"


def test_in_memory_open_redacts_events_too(tmp_path: Any) -> None:
    import trace_report as tr

    doc, planted = _hostile_trace()
    src = tmp_path / "hostile.json"
    src.write_text(json.dumps(doc))
    with tr.open(src) as db:
        rows = db.sql("select name, args from events").fetchall()
    text = json.dumps(rows)
    assert not any(v in text for v in planted.values())
    assert "<redacted:github_token>" in text and "<redacted:bearer>" in text


def test_pieces_in_worker_processes_add_up(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets in many small pieces decoded by worker processes: all replaced, counts summed."""
    from trace_report.ingest import start
    from trace_report.ingest.pipeline import IngestOptions, open_in_memory
    from trace_report.inputs import resolve

    doc, planted = _hostile_trace()
    doc["traceEvents"] = [{**e, "ts": e["ts"] + 100.0 * i} for i in range(60) for e in doc["traceEvents"]]
    src = tmp_path / "many.json"
    src.write_text(json.dumps(doc))
    monkeypatch.setattr(start, "PARALLEL_MIN_BYTES", 0)
    with resolve([src]) as found:
        con, report = open_in_memory(found, IngestOptions(workers=2, piece_bytes=4096))
    try:
        text = json.dumps(con.execute("select name, args from events").fetchall())
        (keys,) = con.execute("select redacted_keys from traces").fetchone()
    finally:
        con.close()
    assert not any(v in text for v in planted.values())
    assert "github_token@events.name (60 events)" in keys and "bearer@events.args (60 events)" in keys
    assert any("redacted secrets in events" in w for w in report.warnings)


# ---------------------------------------------------------------- every stored string

NSYS_SAMPLE = SHARED / "data" / "nsys" / "nvfuser_nsys_h100_matmul" / "report1.sqlite"
NCU_DETAILS = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
               "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]


def _planted_everywhere() -> dict[str, str]:
    """One secret of each new shape per input, so that a leak names its input and its place."""
    planted = {}
    for where, seed in (("kineto", 60), ("nsys", 70), ("ncu", 80)):
        planted |= {
            f"{where}_url_pw": rand(14, seed=seed), f"{where}_pypi": pypi_token(seed + 1),
            f"{where}_mysql_pw": rand(13, seed=seed + 2), f"{where}_stripe": "sk_live_" + rand(32, seed=seed + 3),
            f"{where}_google": google_key(seed + 4), f"{where}_gitlab": "glpat-" + rand(20, ALNUM + "_-", seed + 5),
            f"{where}_npm": npm_token(seed + 6), f"{where}_ghp": "ghp_" + rand(36, seed=seed + 7),
            f"{where}_hf": hf_token(seed + 8),
        }
    return planted


def _kineto_with_secrets(planted: dict[str, str]) -> dict[str, Any]:
    p = {k.removeprefix("kineto_"): v for k, v in planted.items() if k.startswith("kineto_")}
    base = {"ph": "X", "pid": 1, "tid": 1, "dur": 10.0}
    events = [
        {**base, "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "args": {"External id": 5}},
        {**base, "cat": "user_annotation", "name": f"connect(postgres://app:{p['url_pw']}@db:5432/x)", "ts": 20.0},
        {**base, "cat": "user_annotation", "name": f"mysql -h db -u root -p{p['mysql_pw']} prod", "ts": 30.0},
        {**base, "cat": "python_function", "name": f"upload(https://__token__:{p['pypi']}@upload.pypi.org)",
         "ts": 40.0},
        {**base, "cat": "cpu_op", "name": "fetch", "ts": 50.0,
         "args": {"External id": 6, "cmd": ["/usr/bin/mysqldump", "-uroot", f"-p{p['mysql_pw']}"],
                  "charge": f"STRIPE_{p['stripe']}", "maps": f"key={p['google']}", "npm": f"NPM{p['npm']}"}},
        {**base, "cat": f"custom_{p['gitlab']}", "name": "marker", "ts": 60.0, "tid": f"thread FOO_{p['ghp']}"},
        {**base, "cat": "kernel", "name": "mask_live_kernel", "ts": 80.0, "tid": 7,
         "args": {"correlation": 9, "stream": 7, "device": 0, "External id": 5}},
    ]
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1},
            "hostname": f"gpu-node-7.x_{p['hf']}", "deviceProperties": [
                {"id": 0, "name": f"NVIDIA H100 {p['google']}", "computeMajor": 9, "computeMinor": 0}],
            "traceEvents": events}


def _nsys_with_secrets(path: Any, planted: dict[str, str]) -> None:
    """Plant secrets in a copy of a real nsys export: StringIds (kernel and runtime names), NVTX
    text and a domain, TARGET_INFO_GPU, TARGET_INFO_SYSTEM_ENV (host, OS) and META_DATA_EXPORT."""
    import sqlite3

    p = {k.removeprefix("nsys_"): v for k, v in planted.items() if k.startswith("nsys_")}
    con = sqlite3.connect(path)
    try:
        kernel_name = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
        con.execute("UPDATE StringIds SET value = value || ? WHERE id = ?", (f" /*FOO_{p['ghp']}*/", kernel_name))
        runtime_name = con.execute("SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()[0]
        con.execute("UPDATE StringIds SET value = value || ? WHERE id = ?", (f" x_{p['hf']}", runtime_name))
        (rowid,) = con.execute("SELECT rowid FROM NVTX_EVENTS WHERE eventType = 59 AND text IS NOT NULL "
                               "LIMIT 1").fetchone()
        con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?",
                    (f"mysql -u root -p{p['mysql_pw']} && curl https://__token__:{p['pypi']}@upload.pypi.org", rowid))
        con.execute("UPDATE NVTX_EVENTS SET domainId = 4242 WHERE rowid = ?", (rowid,))
        con.execute("INSERT INTO NVTX_EVENTS (start, eventType, domainId, text) VALUES (0, 75, 4242, ?)",
                    (f"domain postgres://u:{p['url_pw']}@db/x",))
        con.execute("UPDATE TARGET_INFO_GPU SET name = name || ?, chipName = ?",
                    (f" {p['google']}", f"GH100 STRIPE_{p['stripe']}"))
        con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'Hostname'", (f"node-{p['npm']}",))
        con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'OsDescription'",
                    (f"Ubuntu GL_{p['gitlab']}",))
        con.execute("UPDATE META_DATA_EXPORT SET value = value || ? WHERE name = 'EXPORT_PRODUCT_VERSION'",
                    (f" redis://:{p['url_pw']}@cache",))
        con.commit()
    finally:
        con.close()


def _ncu_csv_with_secrets(path: Any, planted: dict[str, str]) -> None:
    """An ``ncu --csv --page details`` export (the layout tests/formats/test_ncu_csv.py builds)."""
    import csv
    import io

    p = {k.removeprefix("ncu_"): v for k, v in planted.items() if k.startswith("ncu_")}
    ids = ["0", "4242", f"mysql -u root -p{p['mysql_pw']}", f"host-x_{p['hf']}",
           f"void gemm_kernel<FOO_{p['ghp']}>(int)", "1", "7", "(128, 1, 1)", "(64, 1, 1)", "0", "9.0"]
    rows = [
        ids + ["GPU Speed Of Light Throughput", "Duration", "usecond", "12.5", "", "", "", "", ""],
        ids + ["GPU Speed Of Light Throughput", "DRAM Throughput", "%", "41.2", "", "", "", "", ""],
        ids + ["Device Attributes", "device__attribute_display_name", "", f"NVIDIA H100 {p['google']}",
               "", "", "", "", ""],
        ids + [f"Custom STRIPE_{p['stripe']}", "note", f"npm{p['npm']}", f"https://__token__:{p['pypi']}@up",
               "", "", "", "", ""],
        ids + ["GPU Speed Of Light Throughput", "", "", "", "SOLBottleneck", "OPT",
               f"see postgres://u:{p['url_pw']}@h GL_{p['gitlab']}", "global", "42.5"],
    ]
    buf = io.StringIO()
    buf.write("==PROF== Disconnected from process 4242\n")
    writer = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(NCU_DETAILS)
    writer.writerows(rows)
    path.write_text(buf.getvalue())


def handle_rows(db: Any, query: str) -> list[tuple[Any, ...]]:
    import trace_report as tr

    with tr.open(db) as handle:
        return handle.con.execute(query).fetchall()


def _every_value(con: Any) -> list[str]:
    """Every value of every column of every table and view a connection shows (temporary ones
    included), as text: one ``string_agg`` per column."""
    texts = []
    columns = con.execute("SELECT database_name, schema_name, table_name, column_name FROM duckdb_columns() "
                          "WHERE NOT internal ORDER BY ALL").fetchall()
    assert len(columns) > 100
    for db, schema, table, column in columns:
        (value,) = con.execute(f'SELECT string_agg(CAST("{column}" AS VARCHAR), chr(10)) '
                               f'FROM "{db}"."{schema}"."{table}"').fetchone()
        texts.append(value or "")
    return texts


def test_end_to_end_every_stored_string_is_screened(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Secrets planted in a Kineto trace's host and device names, events' cat/tid/name/
    args, an nsys export's StringIds, NVTX text and domains, TARGET_INFO and META_DATA, and an ncu
    CSV's names, sections, units and values: after ingest, no column of any table or view and no
    exported file holds one, and the traces rows say what was redacted where."""
    import shutil

    import pyarrow.parquet as pq
    from conftest import run_cli

    import trace_report as tr

    if not NSYS_SAMPLE.is_file():
        pytest.skip(f"{NSYS_SAMPLE} is absent")
    planted = _planted_everywhere()
    src = tmp_path / "in"
    src.mkdir()
    (src / "hostile.json").write_text(json.dumps(_kineto_with_secrets(planted)))
    shutil.copy(NSYS_SAMPLE, src / "report1.sqlite")
    (src / "report1.sqlite").chmod(0o644)
    _nsys_with_secrets(src / "report1.sqlite", planted)
    _ncu_csv_with_secrets(src / "profile.ncu.csv", planted)
    assert all(v.encode() in b"".join(f.read_bytes() for f in src.iterdir()) for v in planted.values())
    db = tmp_path / "out" / "all.duckdb"
    db.parent.mkdir()
    code, _, err = run_cli(["ingest", str(src / "hostile.json"), str(src / "report1.sqlite"),
                            str(src / "profile.ncu.csv"), "-o", str(db)], capsys)
    assert code == 0, err
    assert "2 trace(s) ingested, 1 Nsight Compute report(s)" in err
    assert not any(v in err for v in planted.values())
    assert "report1.sqlite: redacted" in err  # the nsys export's redactions are said, as a trace's are
    assert "profile.ncu.csv: redacted secrets in the report's strings: " in err  # and the ncu report's
    code, _, err = run_cli(["export", str(db), "-o", str(tmp_path / "out" / "export")], capsys)
    assert code == 0, err

    with tr.open(db) as handle:
        texts = _every_value(handle.con)
        tables = {t for (t,) in handle.con.execute("SELECT DISTINCT table_name FROM duckdb_columns()").fetchall()}
        keys = dict(handle.con.execute("SELECT path, redacted_keys FROM traces").fetchall())
        traces = handle.con.execute("SELECT path, host, device_name FROM traces ORDER BY trace_id").fetchall()
        ncu = handle.con.execute("SELECT process_name, host, kernel, device_name FROM ncu_kernels").fetchall()
    assert {"traces", "events", "kernel_names", "ncu_kernels", "ncu_metrics", "kernels"} <= tables
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" and "export" in p.parts for p in written)
    texts += [p.read_bytes().decode("utf-8", "replace") for p in written]
    texts += [json.dumps(pq.read_table(p).to_pylist(), default=str) for p in written if p.suffix == ".parquet"]
    leaks = sorted(name for name, value in planted.items() if any(value in t for t in texts))
    assert leaks == []

    kineto, nsys = (keys[str(src / name)] for name in ("hostile.json", "report1.sqlite"))
    assert traces[0][1:] == ("gpu-node-7.x_<redacted:hf_token>", "NVIDIA H100 <redacted:google_api_key>")
    assert traces[1][1].startswith("node-<redacted:npm_token>")
    assert {"hf_token@hostname", "google_api_key@deviceProperties[0].name", "google_api_key@traces.device_name",
            "url_password@events.name (1 events)", "cli_flag@events.name (1 events)",
            "pypi_token@events.name (1 events)", "gitlab_token@events.cat (1 events)",
            "github_token@events.tid (1 events)", "cli_flag@events.args (1 events)",
            "stripe_key@events.args (1 events)", "google_api_key@events.args (1 events)",
            "npm_token@events.args (1 events)"} <= set(kineto)
    assert {"npm_token@host", "google_api_key@device_name", "google_api_key@gpus[0].name",
            "stripe_key@gpus[0].chipName", "gitlab_token@system.OsDescription", "url_password@nsys_version",
            "cli_flag@events.name (1 events)", "pypi_token@events.name (1 events)",
            "url_password@events.args (1 events)"} <= set(nsys), nsys
    n_launches = len(handle_rows(db, "SELECT 1 FROM events WHERE cat = 'kernel' AND name LIKE '%<redacted:%'"))
    assert f"github_token@events.name ({n_launches} events)" in nsys and n_launches >= 1
    assert any(k.startswith("hf_token@events.name (") for k in nsys)
    assert not any(v in " ".join(kineto + nsys) for v in planted.values())
    assert ncu == [("mysql -u root -p<redacted:cli_flag>", "host-x_<redacted:hf_token>",
                    "void gemm_kernel<FOO_<redacted:github_token>>(int)", "NVIDIA H100 <redacted:google_api_key>")]


def test_run_folder_csv_strings_are_screened(tmp_path: Any) -> None:
    """The text cells of a run folder's metrics/steps/results CSV go through the
    same screen as every other stored string (run_metrics, run_steps, run_results)."""
    import trace_report as tr

    hf, gh = hf_token(21), "ghp_" + rand(36, seed=21)
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r1", "schema": "trace-report/run/1"}))
    (tmp_path / "metrics.csv").write_text(f"epoch,loss,note\n0,1.5,token {hf}\n1,1.2,ok\n")
    (tmp_path / "results.csv").write_text(f"variant,url\na,https://user:{gh}@example.com/x\n")
    with tr.open(tmp_path) as db:
        values = [str(v) for t in ("run_metrics", "run_results")
                  for row in db.con.execute(f"SELECT * FROM {t}").fetchall() for v in row]
    assert not any(hf in v or gh in v for v in values), values
    assert "token <redacted:hf_token>" in values and "ok" in values
    assert any(v.startswith("https://user:<redacted") and "example.com/x" in v for v in values), values
