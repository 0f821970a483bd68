"""The secret screen of the compiled scanner (``_screen`` in trace_report/formats/_scan.pyx).

The scanner marks the rows whose ``args`` might hold a secret; ingest then runs the RE2 screen
(:data:`trace_report.redact.PRECHECK_PATTERN`) on those rows only. So the mark must be a
superset of that screen: checked here against RE2 itself (``pyarrow.compute``, as ingest runs
it) on random args built from the words the rules look for, on every piece of every real trace,
and end to end (secrets in args come out redacted, exactly as without the scanner)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import REPO, TRACES, shared_or_skip
from hypothesis import given, settings
from hypothesis import strategies as st

import trace_report as tr
import trace_report.ingest.decoding as decoding
from trace_report.formats import kineto
from trace_report.ingest.decoding import decode_file
from trace_report.redact import PRECHECK_PATTERN

pytestmark = pytest.mark.skipif(kineto._scan is None, reason="the compiled scanner is not built")

WORDS = ["hf_", "sk-", "AKIA", "asia", "ghp_", "github_pat_", "xoxb-", "eyJ", "-----BEGIN", "Bearer ", "bearer\t",
         "Authorization", "aws_secret", "--", "-", "TOKEN", "Key", "secret", "passw", "Credential", "auth", "author",
         "tokenizer", "=", ":", "\"", "'", " ", "k", "e", "y", "to", "ke", "_", "0", "1234567890", "abcdefghij",
         "é", "\u212aey", "ſecret", "\n", "\\"]
"""Pieces of text: the rules' words in mixed case, parts of them, separators, non-ASCII letters
that Unicode case folding maps to ASCII ones (the Kelvin sign, the long s), escapes."""

texts = st.lists(st.sampled_from(WORDS), max_size=8).map("".join)
keys = st.lists(st.sampled_from([w for w in WORDS if json.dumps(w, ensure_ascii=False)[1:-1] == w]),
                max_size=8).map("".join)
"""Keys of ``args`` itself: one with an escape makes the scanner decline the piece (msgspec
then decodes it and every row goes to RE2), so they are left to the nested objects."""
values = st.recursive(st.one_of(texts, st.integers(-5, 10**6), st.booleans(), st.none(), st.floats(allow_nan=False)),
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=3),
                      max_leaves=8)
args_objects = st.dictionaries(keys, values, max_size=5)


def _scan_rows(events: list[dict[str, object]]) -> tuple[list[str], list[bool]]:
    data = msgspec.json.encode(events)
    piece = kineto._scanned_piece(data)
    assert piece is not None, data
    assert piece.args_suspects is not None
    return piece.table.column("args").to_pylist(), piece.args_suspects.tolist()


def _re2(args: list[str | None]) -> list[bool]:
    return pc.fill_null(pc.match_substring_regex(pa.array(args, pa.string()), PRECHECK_PATTERN), False).to_pylist()


@settings(max_examples=200, deadline=None)
@given(st.lists(args_objects, min_size=1, max_size=6))
def test_every_row_re2_flags_is_marked(objects: list[dict[str, object]]) -> None:
    events = [{"ph": "X", "name": "k", "ts": i, "dur": 1, "args": a} for i, a in enumerate(objects)]
    args, marked = _scan_rows(events)
    for text, hit, mark in zip(args, _re2(args), marked, strict=True):
        assert mark or not hit, text


def test_kinetos_own_args_are_not_marked_and_secrets_are() -> None:
    clean = [
        {"External id": 9, "correlation": 5, "device": 0, "stream": 7, "queued": 0, "context": 1,
         "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2.0,
         "grid": [1, 2, 1], "block": [128, 1, 1], "est. achieved occupancy %": 0},
        {"External id": 3, "Record function id": 0, "Ev Idx": 2, "Sequence number": 11, "Fwd thread id": 0,
         "Input Dims": [[32, 3, 224, 224], []], "Input type": ["float", "Scalar"], "Concrete Inputs": ["", "1"],
         "Input Strides": [[1, 2]]},
    ]
    secret = [{"api_key": "abcdefgh12"}, {"cmd": ["train.py", "--hf-token", "x"]}, {"h": "Bearer abcdefghijkl"},
              {"nested": {"x": ["ok", {"PASSWORD": "hunter2hunter2"}]}}, {"s": "ghp_" + "a" * 36}, {"n": "café"}]
    events = [{"ph": "X", "name": "k", "ts": i, "dur": 1, "args": a} for i, a in enumerate(clean + secret)]
    _, marked = _scan_rows(events)
    assert marked == [False] * len(clean) + [True] * len(secret)


def test_real_traces_marked_rows_cover_re2(monkeypatch: pytest.MonkeyPatch) -> None:
    shared_or_skip()
    files = [f for root in (TRACES, REPO / "traces") for f in sorted(root.rglob("*"))
             if f.is_file() and (".pt.trace" in f.name  # our traces/ also hold run.json files
                                 or (root == TRACES and f.name.endswith((".json", ".json.gz"))))]
    pieces: list[kineto.Piece] = []

    def keep(data: bytes) -> kineto.Piece:
        piece = kineto.decode_piece(data)
        pieces.append(dataclasses.replace(piece))  # the ingest takes the table out of the one it gets
        return piece

    monkeypatch.setattr(decoding, "decode_piece", keep)
    for path in files:
        decode_file(path, str(path), 1)
    rows = marked = 0
    for piece in pieces:
        if piece.args_suspects is None:
            continue
        hits = _re2(piece.table.column("args").to_pylist())
        assert all(m or not h for h, m in zip(hits, piece.args_suspects.tolist(), strict=True))
        rows += len(hits)
        marked += int(piece.args_suspects.sum())
    assert rows > 100_000 and marked < rows // 10, (rows, marked)  # the screen leaves most rows to skip


def test_secrets_in_args_are_redacted_as_without_the_scanner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "hf_" + "Q" * 34
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i, "dur": 1,
               "args": {"External id": i, "Input type": ["float"]}} for i in range(50)]
    events[7]["args"] = {"External id": 7, "api_key": "abcdefgh12"}
    events[20]["args"] = {"External id": 20, "Concrete Inputs": [f"--hf-token {token}"]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))

    def ingest() -> list[str]:
        with tr.open(path) as db:
            return [r[0] for r in db.sql("select args from events order by ts_us").fetchall()]

    args = ingest()
    monkeypatch.setattr(kineto, "_scan", None)
    assert ingest() == args
    assert json.loads(args[7])["api_key"] == "<redacted:secret_key>"
    assert token not in args[20] and "<redacted:hf_token>" in args[20]
    assert sum("redacted" in a for a in args) == 2
