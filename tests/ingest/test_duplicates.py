"""Exact duplicates: the per-row keys computed where pieces are decoded find the same rows as a
plain-Python comparison of the events, on real traces and on rows that differ only in one field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import events_of, load_json, trace_file

from trace_report.ingest import start
from trace_report.ingest.normalize import DUPLICATE_COLUMNS, count_duplicates, row_keys
from trace_report.ingest.pipeline import IngestOptions, ingest_to_database


def python_duplicates(events: list[dict]) -> int:
    """Events equal to an earlier one in cat, name, pid, tid, ts, dur and args (a plain pass)."""
    seen: set[tuple] = set()
    n = 0
    for e in events:
        key = (e.get("cat"), e.get("name"), str(e.get("pid")), str(e.get("tid")), float(e["ts"]),
               float(e["dur"]), json.dumps(e.get("args"), sort_keys=True))
        n += key in seen
        seen.add(key)
    return n


def note_count(notes: list[str]) -> int:
    found = [n for n in notes if "exact duplicates" in n]
    return int(found[0].split(": ")[1].split(" event")[0]) if found else 0


@pytest.mark.parametrize("name", ["hta_a100_ddp_nccl", "kineto_rn50_nw4_2021jun"])
def test_duplicates_of_real_traces_match_a_plain_count(name: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A real trace (no duplicates of its own) with every 40th complete event written again at
    the end, so that copies land in other pieces than their originals."""
    doc = load_json(trace_file(name))
    events = events_of(doc)
    complete = [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]
    assert python_duplicates(complete) == 0
    extra = complete[::40]
    path = tmp_path / "dups.json"
    path.write_text(json.dumps({**doc, "traceEvents": events + extra} if isinstance(doc, dict) else events + extra))
    expected = python_duplicates(complete + extra)
    assert expected == len(extra) > 100
    assert note_count(ingest_to_database([path], tmp_path / "one.duckdb").notes) == expected
    monkeypatch.setattr(start, "PARALLEL_MIN_BYTES", 0)  # decoding workers send their keys
    opts = IngestOptions(workers=2, piece_bytes=1 << 20)
    assert note_count(ingest_to_database([path], tmp_path / "two.duckdb", opts).notes) == expected


def table(rows: list[tuple]) -> pa.Table:
    """Rows of DUPLICATE_COLUMNS; ``correlation`` and ``external_id`` taken from ``args`` as the
    decoder takes them."""
    cols = list(zip(*rows, strict=True))
    args = [json.loads(a) for a in cols[-1]]
    ids = {"correlation": pa.array([a.get("correlation") for a in args], pa.int64()),
           "external_id": pa.array([a.get("External id") for a in args], pa.int64())}
    return pa.table({**{c: pa.array(v) for c, v in zip(DUPLICATE_COLUMNS, cols, strict=True)}, **ids})


def test_rows_differing_in_one_field_are_not_duplicates() -> None:
    base = ("kernel", "k", "0", "7", 5.0, 1.0, '{"correlation": 1}')
    variants = [base[:i] + (v,) + base[i + 1:] for i, v in
                enumerate(["cpu_op", "j", "1", "8", 6.0, 2.0, '{"correlation": 2}'])]
    same_length = base[:6] + ('{"correlation": 1, "x": 2}',)  # args differ, same ids, same length
    same_length2 = base[:6] + ('{"correlation": 1, "x": 3}',)
    t = table([base, *variants, base, base, same_length, same_length2])
    keys = row_keys(t)
    # every field variant gets its own key, the correlation variant (row 7) included: args'
    # correlation is in the key, though its args text has the base row's length
    assert len(set(keys[:8].tolist())) == 8
    assert keys[0] == keys[8] == keys[9]
    assert keys[10] == keys[11] != keys[0]  # args that differ only in text share a key: compared exactly
    for given in (None, [keys]):
        assert count_duplicates(lambda columns: [t.select(columns)], given) == 2
    halves = [t.slice(0, 5), t.slice(5)]  # keys of separate pieces, as workers send them
    assert count_duplicates(lambda columns: [h.select(columns) for h in halves], [row_keys(h) for h in halves]) == 2
    assert np.array_equal(np.concatenate([row_keys(h) for h in halves]), keys)


def test_keys_made_while_finalizing_equal_keys_made_from_the_stored_rows() -> None:
    """finalize hashes cat and name from its own dictionaries (after category spellings are made
    one, names demangled and redacted, rows with bad numbers dropped); row_keys of the rows as
    stored must give the same keys, or duplicates across pieces would be missed."""
    from trace_report.formats.kineto import decode_piece
    from trace_report.ingest.normalize import finalize

    token = "hf_" + "z" * 34
    events = [{"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 2, "ts": ts, "dur": dur,
               "args": {"correlation": 3}}
              for cat in ("Kernel", "kernel", "cpu_op", None) for name in ("_Z3fooi", f"run --hf-token {token}", "k")
              for ts, dur in ((1.0, 2.0), (5.0, -1.0))]
    piece = decode_piece(json.dumps(events).encode())
    out, stats = finalize(piece.table, 1, 0, piece.n_events, piece.n_missing_time, args_suspects=piece.args_suspects)
    assert stats.n_bad_numbers == 12 and out.num_rows == 12
    assert "foo(int)" in out.column("name").to_pylist() and token not in str(out.column("name").to_pylist())
    (given,) = stats.dup_keys
    assert np.array_equal(given, np.sort(row_keys(out)))
    assert count_duplicates(lambda columns: [out.select(columns)], stats.dup_keys) == 3  # Kernel = kernel
