"""Our kernel numbers, restricted to the steps HTA keeps, equal HTA's get_gpu_kernel_breakdown.

HTA (traceinsight) drops the last ProfilerStep and GPU kernels not launched before it, and it
rounds nanosecond-resolution events to whole microseconds (ts up, end down). The expected
values below apply those two rules to our rows; HTA computes its own from the JSON.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from conftest import trace_file

import trace_report as tr

HTA_TRACES = ["hta_a100_ddp_nccl", "hta_amd_mi250", "hta_ns_resolution"]

OURS_IN_HTA_STEPS = """
WITH cutoff AS (
    SELECT max(ts_us) AS c FROM events
    WHERE starts_with(name, 'ProfilerStep#') AND cat IN ('cpu_op', 'user_annotation')
)
SELECT coalesce(kn.raw_name, k.name) AS name, count(*) AS n,
       sum(floor(k.ts_us + k.dur_us) - ceil(k.ts_us)) AS hta_rounded_us,
       sum(k.dur_us) AS total_us
FROM kernels k JOIN runtime_calls r ON r.trace_id = k.trace_id AND r.correlation = k.correlation
LEFT JOIN kernel_names kn ON kn.name = k.name  -- HTA shows names as the trace has them
WHERE r.ts_us < (SELECT c FROM cutoff)
GROUP BY 1
"""


@pytest.mark.parametrize("name", HTA_TRACES)
def test_kernel_breakdown_equals_hta(name: str, tmp_path: Path) -> None:
    hta_analysis = pytest.importorskip("hta.trace_analysis")
    path = trace_file(name)
    shutil.copy(path, tmp_path / path.name)
    logging.disable(logging.WARNING)
    try:
        ta = hta_analysis.TraceAnalysis(trace_dir=str(tmp_path))
        _, per_kernel = ta.get_gpu_kernel_breakdown(
            visualize=False, num_kernels=1_000_000, duration_ratio=1.0, include_memory_kernels=False)
    finally:
        logging.disable(logging.NOTSET)
    hta = per_kernel.groupby("name")["sum (us)"].sum()
    with tr.open(path) as db:
        ours = db.con.execute(OURS_IN_HTA_STEPS).df().set_index("name")
    assert len(ours) > 0
    assert set(ours.index) == set(hta.index)
    for kernel, row in ours.iterrows():
        assert row["hta_rounded_us"] == pytest.approx(hta[kernel], abs=1e-6), kernel
    # the unrounded time differs from HTA's by less than 2 µs per kernel (its rounding)
    assert abs(ours["total_us"].sum() - hta.sum()) < 2 * ours["n"].sum()
