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
from conftest import TRACES, shared_or_skip

from trace_report.errors import InputError
from trace_report.redact import (
    PRECHECK_PATTERN,
    Redaction,
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


def rand(n: int, alphabet: str = ALNUM, seed: int = 0) -> str:
    rng = random.Random(f"{seed}-{n}-{alphabet[:3]}")
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(obj: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def hf_token(seed: int = 0) -> str:
    return "hf_" + rand(34, seed=seed)


def aws_key_id(seed: int = 0) -> str:
    return "AKIA" + rand(16, UPPER, seed)


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
