"""Notebook methods keep unrelated runs apart as the command line does: on hta_trace_diff (an
A100 run and a V100 run in one folder) every table method returns one set of rows per run with a
``run`` column, each run's rows are those of ``run=LABEL`` alone, and ``merge_runs=True`` sums
them as ``--merge-runs`` does."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import KERNEL_CATS, TRACES, complete_events, invoke, shared_or_skip

import trace_report as tr

METHODS = ("top_kernels", "breakdown", "flags", "advise", "overlap", "queue_length", "memory", "ops", "launches",
           "sequences", "modules", "collectives", "stragglers", "kernel_variance")


@pytest.fixture(scope="module")
def diff():
    shared_or_skip()
    with tr.open(TRACES / "hta_trace_diff") as db:
        yield db


def _records(frame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))


@pytest.mark.parametrize("method", METHODS)
def test_each_run_gets_its_own_rows(diff, method: str) -> None:
    frame = getattr(diff, method)()
    labels = [r.label for r in diff.runs()]
    assert len(labels) == 2
    if frame.empty:
        return
    assert list(frame.columns)[0] == "run" and set(frame["run"]) <= set(labels)
    for label in set(frame["run"]):
        alone = getattr(diff, method)(run=label)
        assert "run" not in alone.columns
        assert _records(frame[frame["run"] == label].drop(columns=["run"])) == _records(alone)


def test_top_kernels_per_run_is_the_plain_pass_of_each_file(diff) -> None:
    frame = diff.top_kernels(limit=None, kernels_only=True)
    for label in ("control", "test"):
        want = Counter()
        for e in complete_events(TRACES / "hta_trace_diff" / f"{label}.json.gz"):
            if e.get("cat") in KERNEL_CATS:
                want[e["name"]] += 1
        rows = frame[frame["run"] == label]
        assert sum(rows["count"]) == sum(want.values())


def test_the_method_is_the_command(diff) -> None:
    done = invoke(["top-kernels", str(TRACES / "hta_trace_diff"), "-f", "json", "-n", "5"])
    assert done.exit_code == 0, done.stderr
    cli = json.loads(done.stdout)
    frame = diff.top_kernels(limit=5)
    assert [(r["run"], r["name"], r["count"]) for r in cli] == \
        [(r["run"], r["name"], r["count"]) for r in _records(frame)]


def test_merge_runs_sums_as_the_command_does(diff) -> None:
    merged = diff.top_kernels(limit=None, merge_runs=True)
    apart = diff.top_kernels(limit=None)
    assert "run" not in merged.columns
    assert merged["count"].sum() == apart["count"].sum()
    assert any("merge" in n for n in merged.attrs["notes"])
