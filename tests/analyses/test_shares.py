"""No share exceeds 100%: every table command's JSON (``-f json``) on shared traces, every column
named ``pct*``, ``*_pct``, ``*share`` or ``*_pct_of_*`` is at most 100 (+1e-6). A "% of step time" divides by step
time as the GPU sees it (view ``step_time``), which a CPU running ahead of its GPU (a deep launch
queue) cannot make shorter than the work it measures. The default run covers a deep launch queue;
``slow``: every other trace of ``../shared/data/traces`` under 2 MB (the MI300 DDP training trace,
an MI300 step, NCCL and 8 ranks among them) and the deep queue's GPU made 3x slower."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from conftest import TRACES, invoke, shared_or_skip
from gpu_steps_plain import load, stretch_gpu

COMMANDS = [["top-kernels"], ["top-kernels", "--by-rank"], ["breakdown"], ["breakdown", "--by-step"],
            ["breakdown", "--by-rank"], ["flags"], ["flags", "--summary"], ["advise", "--all"], ["ops"], ["overlap"],
            ["queue"], ["launches"], ["sequences"], ["modules"], ["critical-path"], ["collectives"], ["memory"],
            ["kernel-variance"], ["roofline"]]
SUBSET = ["hta_ns_resolution"]
MAX_BYTES = 2 << 20


NOT_SHARES = {"pct_of_roof"}


def _is_share(column: str) -> bool:
    return column not in NOT_SHARES and (column.startswith("pct") or column.endswith(("_pct", "share"))
                                         or "_pct_of_" in column)  # advise's saving_pct_of_step


def _over(rows: list[dict]) -> list[tuple[str, float]]:
    return [(k, v) for row in rows for k, v in row.items()
            if _is_share(k) and isinstance(v, (int, float)) and not math.isnan(v) and v > 100 + 1e-6]


def _folders() -> list[str]:
    if not TRACES.is_dir():
        return []
    return sorted(p.name for p in TRACES.iterdir()
                  if p.is_dir() and sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) < MAX_BYTES)


@pytest.fixture(scope="module")
def databases(tmp_path_factory) -> dict[str, Path]:
    shared_or_skip()
    return {}


def _database(databases: dict[str, Path], folder: str, tmp: Path) -> Path:
    if folder not in databases:
        db = tmp / f"{folder}.duckdb"
        res = invoke(["ingest", TRACES / folder, "-o", db])
        assert res.exit_code == 0, res.output
        databases[folder] = db
    return databases[folder]


def _check(db: Path) -> None:
    for argv in COMMANDS:
        res = invoke([*argv, db, "-f", "json"])
        assert "Traceback" not in res.output, (argv, res.output)
        if res.exit_code != 0 or not res.stdout.strip():
            continue  # e.g. no memory events: an Error: line, nothing to check
        rows = json.loads(res.stdout)
        rows = rows if isinstance(rows, list) else [rows]
        assert not _over(rows), (argv, db.name, _over(rows)[:5])


@pytest.mark.parametrize("folder", SUBSET)
def test_no_share_exceeds_100(databases, folder, tmp_path_factory):
    _check(_database(databases, folder, tmp_path_factory.getbasetemp()))


@pytest.mark.slow
@pytest.mark.parametrize("folder", [f for f in _folders() if f not in SUBSET])
def test_no_share_exceeds_100_on_every_small_trace(databases, folder, tmp_path_factory):
    _check(_database(databases, folder, tmp_path_factory.getbasetemp()))


@pytest.mark.slow
def test_no_share_exceeds_100_when_the_gpu_falls_far_behind(tmp_path):
    shared_or_skip()
    slow = tmp_path / "slow_gpu.json.gz"
    with gzip.open(slow, "wt") as fh:
        json.dump(stretch_gpu(load(next((TRACES / "hta_ns_resolution").glob("*.json.gz"))), 3.0), fh)
    db = tmp_path / "slow_gpu.duckdb"
    assert invoke(["ingest", slow, "-o", db]).exit_code == 0
    _check(db)


def test_shares_are_found():
    """The columns the sweep checks exist: a renamed column would pass silently."""
    assert _is_share("pct_of_gpu_time") and _is_share("saving_pct_of_step") and not _is_share("pct_of_roof")
    assert _is_share("wall_pct") and _is_share("gpu_share") and not _is_share("wall_us")
