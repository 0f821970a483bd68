"""The notebook handle's errors: an empty or bytes path, a closed handle, a negative limit, an
unknown trace id in a scope, and queries from several threads (docs/report.md)."""

from __future__ import annotations

import gc
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import complete_events, shared_or_skip, trace_file

import trace_report as tr
from trace_report.errors import InputError, UsageError


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7, "ts": 10.0 * i, "dur": 2.0,
               "args": {"correlation": i, "stream": 7}} for i in range(30)]
    events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "tid": 1, "ts": 10.0 * i, "dur": 1.0,
                "args": {}} for i in range(5)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    return path


def test_empty_path_is_an_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: Path) -> None:
    monkeypatch.chdir(small.parent)  # the working folder holds a trace: "" must not read it
    for paths in ("", b"", [""], [small, ""]):
        with pytest.raises(InputError, match="empty path"):
            tr.open(paths)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="not int"):
        tr.open(5)  # type: ignore[arg-type]


def test_bytes_paths_are_accepted(small: Path) -> None:
    with tr.open(os.fsencode(small)) as db, tr.open([os.fsencode(small)]) as again:
        assert db.scalar("select count(*) from events") == again.scalar("select count(*) from events") == 35


def test_a_closed_handle_says_so(small: Path) -> None:
    db = tr.open(small)
    db.close()
    db.close()  # twice: nothing
    assert repr(db).endswith("closed>")
    for use in (lambda: db.sql("select 1"), lambda: db.scalar("select 1"), db.top_kernels, db.ranks,
                lambda: db.con):
        with pytest.raises(UsageError, match="this TraceDB is closed"):
            use()


def test_negative_limit_is_a_usage_error(small: Path) -> None:
    with tr.open(small) as db:
        with pytest.raises(UsageError, match="limit -1"):
            db.top_kernels(limit=-1)
        with pytest.raises(UsageError, match="limit -3"):
            db.ops(limit=-3)
        assert len(db.top_kernels(limit=0)) == 0
        assert set(db.top_kernels(limit=None)["name"]) == {"k0", "k1", "k2"}  # GPU operations, never cpu_op


def test_scope_names_unknown_trace_ids(small: Path) -> None:
    with tr.open(small) as db:
        with pytest.raises(UsageError, match=r"no trace with id 999, 1000 \(trace ids: 1\)"), db.scope([999, 1000]):
            pass
        with db.scope([1]) as part:
            assert part.scalar("select count(*) from events") == 35


def test_sql_from_threads_answers_every_call() -> None:
    """Six threads, 180 queries on a real trace: each answer equals a plain count of its JSON."""
    shared_or_skip()
    path = trace_file("hta_amd_mi250")
    expected = sum(1 for e in complete_events(path) if e.get("cat", "").lower() == "kernel")
    with tr.open(path) as db:
        def count(_: int) -> int:
            return int(db.sql("select count(*) from events where cat = 'kernel'").fetchall()[0][0])

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(count, range(180)))
        assert answers == [expected] * 180
        with ThreadPoolExecutor(1) as pool:
            rel = pool.submit(db.sql, "select name from events where cat = 'kernel'").result()
        gc.collect()
        assert len(rel.fetchall()) == expected  # the relation outlives the thread that made it
