"""The streaming reader gives the same rows wherever pieces are cut, serial or parallel."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
import pytest
from conftest import events_of, kernel_stats, load_json, trace_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_report.ingest import pipeline as ingest_mod
from trace_report.ingest import start
from trace_report.ingest.pipeline import IngestOptions, open_in_memory
from trace_report.inputs import resolve

Q = "SELECT count(*), sum(dur_us), sum(ts_us), count(DISTINCT name), sum(correlation) FROM events"


def rows_of(path: Path, **opts: object) -> tuple:
    con, _ = open_paths([path], IngestOptions(**opts))  # type: ignore[arg-type]
    try:
        return con.execute(Q).fetchone()
    finally:
        con.close()


@pytest.mark.parametrize("name", ["kineto_gpu_metrics_input", "zoology_a100_no_kernels",
                                  pytest.param("hta_a100_ddp_nccl", marks=pytest.mark.slow)])  # 15 s of 4 kB pieces
def test_tiny_pieces_and_workers_give_the_same_rows(name: str, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    path = trace_file(name)
    plain = tmp_path / "plain.json"  # exercise the byte-range planner on an uncompressed copy
    plain.write_bytes(gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes())
    reference = rows_of(path)
    assert rows_of(path, piece_bytes=4096) == pytest.approx(reference)
    monkeypatch.setattr(start, "PARALLEL_MIN_BYTES", 0)
    assert rows_of(plain, workers=2, piece_bytes=8192) == pytest.approx(reference)
    assert rows_of(path, workers=2, piece_bytes=8192) == pytest.approx(reference)


def test_top_level_array_form(tmp_path: Path) -> None:
    path = trace_file("hta_amd_mi250")
    events = events_of(load_json(path))
    array_file = tmp_path / "array.json"
    array_file.write_text(json.dumps(events))
    open_ended = tmp_path / "open.json"  # Chrome allows the closing ']' to be missing
    open_ended.write_text(json.dumps(events)[:-1])
    n, total = kernel_stats(events)
    for p in (array_file, open_ended):
        con, _ = open_paths([p])
        assert con.execute("SELECT count(*), sum(dur_us) FROM kernels").fetchone() == (n, pytest.approx(total))
        con.close()


names = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
nested = st.recursive(st.integers(-5, 5) | names | st.none(),
                      lambda kids: st.lists(kids, max_size=3) | st.dictionaries(names, kids, max_size=3),
                      max_leaves=6)
event = st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "X", "X", "i", "s", "f"]),
    "cat": st.sampled_from(["kernel", "Kernel", "cpu_op", "cuda_runtime", "user_annotation"]),
    "name": names,
    "pid": st.integers(0, 3) | st.just("Spans"),
    "tid": st.integers(0, 9) | st.just("stream 7"),
    # within a day of each other: farther apart, an event lies outside its trace's plausible span
    # and is left out with a note (ingest/normalize.misplaced_events)
    "ts": st.floats(0, 1e10, allow_nan=False) | st.integers(0, 10**10),
    "dur": st.floats(0, 1e6, allow_nan=False) | st.integers(0, 10**6),
    "args": st.dictionaries(names, nested, max_size=3) | st.just({"correlation": 3, "items": [{"a": 1}, {"b": 2}]}),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(event, min_size=1, max_size=40), indent=st.sampled_from([None, 1, 2]),
       piece=st.sampled_from([64, 256, 4096]))
def test_property_ingest_preserves_kernel_time(events: list[dict], indent: int | None, piece: int,
                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("prop") / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "tail": [{"x": 1}, {"y": [2]}]},
                               indent=indent))
    con, _ = open_paths([path], IngestOptions(piece_bytes=piece))
    try:
        count, total = con.execute("SELECT count(*), coalesce(sum(dur_us), 0) FROM kernels").fetchone()
        n_events = con.execute("SELECT n_events FROM traces").fetchone()[0]
    finally:
        con.close()
    n, expected = kernel_stats(events)
    assert count == n and total == pytest.approx(expected)
    assert n_events == len(events)


def open_paths(paths, options=None):
    """An in-memory database of ``paths`` through the one resolver (as ``trace_report.open``)."""
    with resolve(paths) as found:
        return open_in_memory(found, options)


def test_several_traces_go_whole_to_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """With several inputs, each trace of a few pieces is one job read and decoded by a worker
    (the main process reads none of its bytes), with the rows of the serial ingest."""
    folder = trace_file("hta_trace_diff").parent  # two traces of 31 and 33 MB
    per_trace = Q + " GROUP BY trace_id ORDER BY trace_id"
    con, _ = open_paths([folder], IngestOptions(workers=1))
    reference = con.execute(per_trace).fetchall()
    con.close()
    kinds: list[str] = []
    real_job = start.Job

    def spy(kind: str, *args: object, **kwargs: object) -> object:
        kinds.append(kind)
        return real_job(kind, *args, **kwargs)

    monkeypatch.setattr(start, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(start, "Job", spy)
    con, _ = open_paths([folder], IngestOptions(workers=2))
    got = con.execute(per_trace).fetchall()
    assert len(got) == len(reference) == 2
    for row, want in zip(got, reference, strict=True):
        assert row == pytest.approx(want)
    con.close()
    assert kinds == ["file", "file"]


@pytest.mark.parametrize("trailer", [{"traceName": "t"}, {"tail": [{"x": 1}, {"y": [2]}], "z": {"w": [{"v": 1}]}}])
@pytest.mark.parametrize("workers", [1, 2])
def test_streamed_end_cut_before_the_last_event(trailer: dict, workers: int, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of a streamed file goes out as a piece of its events but the last and a small tail;
    where the trailer's own metadata holds ``}, {`` (a cut there is invalid) the rows and the
    metadata are still those of a plain JSON read."""
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7, "ts": i, "dur": 1 + i % 5,
               "args": {"correlation": i}} for i in range(3000)]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"schemaVersion": 1, "traceEvents": events, **trailer}).encode()))
    monkeypatch.setattr(start, "PARALLEL_MIN_BYTES", 0)
    con, _ = open_paths([path], IngestOptions(workers=workers, piece_bytes=100_000))
    try:
        rows = con.execute("SELECT count(*), sum(dur_us), sum(correlation) FROM events").fetchone()
        meta = json.loads(con.execute("SELECT metadata FROM traces").fetchone()[0])
    finally:
        con.close()
    assert rows == (len(events), sum(e["dur"] for e in events), sum(range(3000)))
    assert all(meta.get(k) == v for k, v in trailer.items()), meta


@pytest.mark.parametrize("small", [True, False])
def test_small_ingests_are_cut_into_small_pieces(small: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest of under SMALL_INPUT_BYTES is cut into 4 MB pieces (a lower peak beside the
    process's fixed memory), a larger one into 8 MB pieces (fewer event files to query)."""
    path = trace_file("hta_trace_diff").parent / "control.json.gz"  # 31 MB of JSON
    decoded = len(gzip.decompress(path.read_bytes()))
    if not small:
        monkeypatch.setattr(start, "SMALL_INPUT_BYTES", 0)
    ingest_mod.ingest_to_database([path], tmp_path / "p.duckdb")
    con = duckdb.connect(str(tmp_path / "p.duckdb"), read_only=True)
    (files,) = con.execute("SELECT count(*) FROM event_files").fetchone()
    con.close()
    piece = start.SMALL_PIECE_BYTES if small else ingest_mod.PIECE_BYTES
    assert decoded // piece <= files <= decoded // piece + 2  # + the piece before the tail, the tail
