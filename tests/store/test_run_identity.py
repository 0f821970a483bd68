"""Which traces are one run (store/run_identity.py), and every analysis kept apart
per run: the rows of a run in a folder of unrelated traces equal the analysis of that trace alone."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import TRACES, invoke, shared_or_skip

import trace_report as tr
from trace_report.analyses.advise import advise
from trace_report.analyses.breakdown import BreakdownOptions, breakdown
from trace_report.analyses.flags import FlagsOptions, flags
from trace_report.analyses.ops import OpsOptions, ops
from trace_report.analyses.overlap import OverlapOptions, overlap
from trace_report.analyses.queue import QueueOptions, queue_length
from trace_report.analyses.top_kernels import TopKernelsOptions, top_kernels
from trace_report.cli.runs import per_run, stacked


def kineto(path: Path, *, rank: int | None = None, world: int | None = None, gpu: str = "NVIDIA A100-SXM4-80GB",
           t0: float = 1_000_000.0, kernels: int = 3) -> Path:
    """A small Kineto trace: ``kernels`` kernels of 10 us from ``t0``, with their launches."""
    events: list[dict[str, object]] = []
    for i in range(kernels):
        ts = t0 + 100.0 * i
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": ts, "dur": 5.0, "args": {"correlation": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{i % 2}", "pid": 0, "tid": 7, "ts": ts + 20,
                       "dur": 10.0, "args": {"correlation": i + 1, "stream": 7, "device": 0}})
    doc: dict[str, object] = {"traceEvents": events, "displayTimeUnit": str(path),  # distinct bytes: no duplicate
                              "deviceProperties": [{"id": 0, "name": gpu, "computeMajor": 8, "computeMinor": 0}]}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": world or 1, "backend": "nccl"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def runs_of(*paths: Path) -> list[tuple[str, str, int]]:
    with tr.open(list(paths)) as db:
        return [(r.label, r.source, len(r.trace_ids)) for r in db.runs()]


def test_unrelated_files_are_runs_of_their_own(tmp_path: Path) -> None:
    kineto(tmp_path / "x" / "a.json")
    kineto(tmp_path / "x" / "b.pt.trace.json")
    assert runs_of(tmp_path / "x") == [("a", "file", 1), ("b", "file", 1)]


def test_rank_files_of_one_folder_are_one_run(tmp_path: Path) -> None:
    kineto(tmp_path / "job" / "rank0.json")
    kineto(tmp_path / "job" / "rank1.json")
    kineto(tmp_path / "other.json")
    assert runs_of(tmp_path / "job", tmp_path / "other.json") == [("job", "folder", 2), ("other", "file", 1)]


def test_distributed_ranks_join_by_folder_or_overlapping_time(tmp_path: Path) -> None:
    kineto(tmp_path / "h0" / "t.json", rank=0, world=2)
    kineto(tmp_path / "h1" / "t.json", rank=1, world=2, t0=1_000_150.0)  # overlaps rank 0's span
    kineto(tmp_path / "late" / "t.json", rank=1, world=2, t0=9_000_000.0)  # another job, hours later
    kineto(tmp_path / "v100" / "t.json", rank=0, world=2, gpu="Tesla V100-SXM2-32GB")
    got = runs_of(tmp_path / "h0", tmp_path / "h1", tmp_path / "late", tmp_path / "v100")
    assert [(src, n) for _, src, n in got] == [("distributedInfo", 2), ("file", 1), ("file", 1)]
    assert [label for label, _, _ in got] == [str(tmp_path.name), "late/t", "v100/t"]


def test_two_traces_claiming_one_rank_are_split_with_a_warning(tmp_path: Path) -> None:
    kineto(tmp_path / "job" / "a.json", rank=0, world=2)
    kineto(tmp_path / "job" / "b.json", rank=0, world=2)
    with tr.open(tmp_path / "job") as db:
        runs = db.runs()
        assert [(r.label, r.source) for r in runs] == [("a", "file"), ("b", "file")]
        assert "claim the same rank (0" in runs[0].warnings[0]
    result = invoke(["top-kernels", tmp_path / "job", "-f", "csv"])
    assert result.exit_code == 0 and "claim the same rank" in result.stderr


def test_labels_are_unique(tmp_path: Path) -> None:
    kineto(tmp_path / "a" / "trace.json")
    kineto(tmp_path / "b" / "trace.json")
    assert [r[0] for r in runs_of(tmp_path / "a", tmp_path / "b")] == ["a/trace", "b/trace"]


def test_scope_narrows_every_view_and_restores_them(tmp_path: Path) -> None:
    kineto(tmp_path / "a.json", kernels=3)
    kineto(tmp_path / "b.json", kernels=5)
    with tr.open(tmp_path) as db:
        a, b = db.runs()
        with db.scope(b.trace_ids):
            assert db.scalar("SELECT count(*) FROM kernels") == 5
            assert db.scalar("SELECT count(*) FROM traces") == 1
        assert db.scalar("SELECT count(*) FROM kernels") == 8
        assert db.scalar("SELECT count(*) FROM traces") == 2
        assert db.scalar("SELECT count(DISTINCT run) FROM trace_runs") == 2


def test_commands_print_a_run_column_and_never_sum_runs(tmp_path: Path) -> None:
    kineto(tmp_path / "a.json", kernels=3)
    kineto(tmp_path / "b.json", kernels=5)
    rows = json.loads(invoke(["top-kernels", tmp_path, "-f", "json"]).stdout)
    counts = {(r["run"], r["name"]): r["count"] for r in rows}
    assert counts == {("a", "kernel_0"): 2, ("a", "kernel_1"): 1, ("b", "kernel_0"): 3, ("b", "kernel_1"): 2}
    merged = invoke(["top-kernels", tmp_path, "-f", "json", "--merge-runs"])
    assert {r["name"]: r["count"] for r in json.loads(merged.stdout)} == {"kernel_0": 5, "kernel_1": 3}
    assert "--merge-runs: 2 runs analysed as one: a, b" in merged.stderr
    one = json.loads(invoke(["top-kernels", tmp_path, "-f", "json", "--run", "b"]).stdout)
    assert {r["name"]: r["count"] for r in one} == {"kernel_0": 3, "kernel_1": 2}
    bad = invoke(["compare", tmp_path, tmp_path / "a.json"])
    assert bad.exit_code == 2 and "A holds 2 runs (a, b): choose one with --run-a" in bad.stderr


# ------------------------------------------------------------------ real traces

SMALL = {  # run label in the folder -> the trace (small, different GPUs and vendors)
    "step_based_trace_2543932": "hta_step_based_trace_gp100/step_based_trace_2543932.json.gz",
    "gaunernst_bert-small-uncased__1016001": "tracelens_h100_bert_small/gaunernst_bert-small-uncased__1016001.json.gz",
    "mi250_minitoy_train_ROCm6_2_kineto": "hta_amd_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
}
ANALYSES = {
    "top-kernels": lambda db: top_kernels(db, TopKernelsOptions(limit=None)).rows,
    "breakdown": lambda db: breakdown(db, BreakdownOptions(by_step=True)).frame,
    "ops": lambda db: ops(db, OpsOptions(limit=None)).frame,
    "flags": lambda db: flags(db, FlagsOptions()).summary,
    "overlap": lambda db: overlap(db, OverlapOptions()).frame,
    "queue": lambda db: queue_length(db, QueueOptions()).frame,
    "advise": lambda db: advise(db, all_findings=True).frame,
}


def _records(table: object) -> list[dict[str, object]]:
    records = table.records() if hasattr(table, "records") else table.to_dict("records")  # type: ignore[union-attr]
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in records]


def _same(a: list[dict[str, object]], b: list[dict[str, object]]) -> bool:
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        if any(ra[k] is not None for k in ra.keys() - rb.keys()):  # stacked runs: another run's columns, empty
            return False
        for k in rb:
            va, vb = ra.get(k), rb[k]
            if isinstance(va, float) and isinstance(vb, float):
                if not math.isclose(va, vb, rel_tol=1e-9, abs_tol=1e-9):
                    return False
            elif va != vb:
                return False
    return True


def _diff(a: list[dict[str, object]], b: list[dict[str, object]]) -> list[str]:
    if len(a) != len(b):
        return [f"{len(a)} rows vs {len(b)}"]
    pairs = enumerate(zip(a, b, strict=True))
    return [f"row {i} {k}: {str(ra.get(k))[-200:]!r} vs {str(rb.get(k))[-200:]!r}" for i, (ra, rb) in pairs
            for k in ra.keys() | rb.keys() if not _same([{k: ra.get(k)}], [{k: rb.get(k)}])]


def _check_runs_apart(folder: Path, alone: dict[str, Path]) -> None:
    with tr.open(folder) as db:
        assert {r.label for r in db.runs()} >= set(alone)
        together = {name: _records(stacked(per_run(db, fn), lambda t: t)) for name, fn in ANALYSES.items()}
    for label, path in alone.items():
        with tr.open(path) as one:
            for name, fn in ANALYSES.items():
                expected = _records(fn(one))
                got = [{k: v for k, v in r.items() if k != "run"} for r in together[name] if r["run"] == label]
                assert _same(got, expected), (label, name, _diff(got, expected))


def test_each_run_of_a_folder_equals_that_trace_alone(tmp_path: Path) -> None:
    shared_or_skip()
    for rel in SMALL.values():
        (tmp_path / Path(rel).name).symlink_to(TRACES / rel)
    _check_runs_apart(tmp_path, {label: TRACES / rel for label, rel in SMALL.items()})


@pytest.mark.slow
def test_every_shared_trace_as_one_folder_keeps_runs_apart() -> None:
    """The issue's "done when": ../shared/data/traces as one folder, each run's rows equal that
    trace (or the DLRM job's 8 ranks) alone."""
    shared_or_skip()
    with tr.open(TRACES) as db:
        runs = db.runs()
        dlrm = [r for r in runs if r.label == "dlrm_kineto"]
        assert len(dlrm) == 1 and len(dlrm[0].trace_ids) == 8 and dlrm[0].source == "distributedInfo"
        assert len(runs) == len(list(TRACES.glob("*/*.json*"))) + len(list(TRACES.glob("*/*.tar.gz"))) - 0
        alone = {r.label: Path(str(db.scalar("SELECT path FROM traces WHERE trace_id = ?", [r.trace_ids[0]])))
                 for r in runs if r.label != "dlrm_kineto"}
    alone = {k: Path(str(v).split("!")[0]) for k, v in alone.items()}
    alone["dlrm_kineto"] = TRACES / "param_dlrm_kineto_v100x8"
    _check_runs_apart(TRACES, alone)


def test_stacked_rows_keep_each_runs_columns() -> None:
    """A CPU-only run ranks operators (pct_of_cpu_self_time) where a GPU run ranks kernels
    (pct_of_gpu_time): each value stays under its own column, the other column empty."""
    from trace_report.cli.runs import PerRun
    from trace_report.store.rows import Rows

    gpu = Rows(["name", "pct_of_gpu_time"], ["VARCHAR", "DOUBLE"], [("k", 60.0)])
    cpu = Rows(["name", "pct_of_cpu_self_time"], ["VARCHAR", "DOUBLE"], [("aten::mm", 100.0)])
    out = stacked(PerRun([("a", gpu), ("b", cpu)]), lambda t: t)
    assert out.columns == ["run", "name", "pct_of_gpu_time", "pct_of_cpu_self_time"]
    assert out.data == [("a", "k", 60.0, None), ("b", "aten::mm", None, 100.0)]


def _components_by_pairs(traces: list, spans: dict) -> list[set[int]]:
    """Components by testing every pair (the rule as stated: same folder or overlapping spans)."""
    parent = {t.trace_id: t.trace_id for t in traces}

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for a in traces:
        for b in traces:
            sa, sb = spans.get(a.trace_id), spans.get(b.trace_id)
            if a.folder == b.folder or (sa and sb and sa[0] < sb[1] and sb[0] < sa[1]):
                parent[root(a.trace_id)] = root(b.trace_id)
    out: dict[int, set[int]] = {}
    for t in traces:
        out.setdefault(root(t.trace_id), set()).add(t.trace_id)
    return sorted(out.values(), key=min)


@pytest.mark.parametrize("seed", range(40))
def test_components_equal_every_pair_tested(seed: int) -> None:
    """The sweep over sorted spans joins exactly what testing every pair joins, zero-length spans,
    spans that touch and spans that start together included."""
    import random

    from trace_report.store.run_identity import _components, _Trace

    rnd = random.Random(seed)
    traces = [_Trace(i, f"/r/d{rnd.randrange(8)}/t{i}.json", None, i, "distributedInfo", 4, "A")
              for i in range(rnd.randrange(1, 30))]
    spans = {}
    for t in traces:
        if rnd.random() < 0.9:
            lo = float(rnd.randrange(0, 40))
            spans[t.trace_id] = (lo, lo + rnd.choice([0, 0, 1, 2, 3, 7, 15]))
    got = sorted(({t.trace_id for t in g} for g in _components(traces, spans)), key=min)
    assert got == _components_by_pairs(traces, spans)
