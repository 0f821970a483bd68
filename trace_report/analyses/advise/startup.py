"""One-time work inside the profiled window: start-up costs a steady step never pays again.

The rules are SQL (``store/sql/views_verdicts_startup.sql``, views ``startup_evidence``,
``startup_windows``, ``startup_in_windows``), each with its threshold and why: a CUDA/HIP runtime
call over 10 ms with an idle GPU before its name's steady cost appears (context creation, lazy
loading: ``runtime_outlier``), an operator's first call over 10x its later calls' median and by
10 ms (cuDNN/cuBLAS init, autotuning, DataLoader workers: ``first_call``), compiler annotations
(TorchDynamo/Inductor ``(dynamo_timed)`` phases, Triton, nvFuser ``compileFusion``/NVRTC:
``compilation``) and module loading (``cuModuleLoad*``/``cuLibraryLoad*``: ``module_load``).
A profile that starts with these measures start-up, not training: the fix is
``torch.profiler.schedule(wait=1, warmup=1, active=3)`` or a warm-up before profiling.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from trace_report.store.kept_views import materialized
from trace_report.store.tracedb import TraceDB

__all__ = ["StartupResult", "evidence_text", "startup"]

WINDOW_COLUMNS = ["trace_id", "window_start_us", "window_end_us", "startup_end_us", "one_time_us",
                  "evidence_rows"]
EVIDENCE_COLUMNS = ["trace_id", "rule", "event_id", "cat", "name", "ts_us", "dur_us", "end_us", "calls",
                    "typical_us"]


@dataclass
class StartupResult:
    """``windows``: one row per trace with one-time work of 10 ms or more (:data:`WINDOW_COLUMNS`;
    µs, trace clock); ``evidence``: the calls behind it (:data:`EVIDENCE_COLUMNS`), longest first."""

    windows: pd.DataFrame
    evidence: pd.DataFrame


def startup(db: TraceDB, trace_ids: list[int] | None = None) -> StartupResult:
    """The one-time work of the traces ``trace_ids`` (all when None)."""
    params = {"ids": trace_ids}
    where = "WHERE $ids IS NULL OR list_contains($ids, trace_id)"
    with materialized(db.con, ("startup_evidence",)):  # read three times below: computed once
        windows = db.con.execute(f"SELECT {', '.join(WINDOW_COLUMNS)} FROM startup_windows {where} "
                                 "ORDER BY trace_id", params).df()
        evidence = db.con.execute(
            f"SELECT {', '.join(EVIDENCE_COLUMNS)} FROM startup_evidence {where} "
            "AND list_contains($kept, trace_id) ORDER BY trace_id, dur_us DESC, event_id",
            {**params, "kept": [int(t) for t in windows["trace_id"]]}).df()
    return StartupResult(windows, evidence)


def evidence_text(evidence: pd.DataFrame, limit: int = 3) -> str:
    """The longest evidence rows as text: ``aten::linear first call 995.2 ms (later: median 156 us)``.
    Rows nested in an earlier-listed one of the same trace are skipped."""
    parts: list[str] = []
    kept: list[tuple[float, float]] = []
    for row in evidence.sort_values("dur_us", ascending=False).itertuples(index=False):
        if any(s <= row.ts_us and row.end_us <= e for s, e in kept):
            continue
        kept.append((row.ts_us, row.end_us))
        parts.append(_row_text(row))
        if len(parts) == limit:
            break
    return "; ".join(parts)


def _row_text(row: object) -> str:
    name, dur, typical, rule = row.name, float(row.dur_us), row.typical_us, row.rule  # type: ignore[attr-defined]
    what = {"first_call": "first call", "runtime_outlier": "call", "compilation": "compilation",
            "module_load": "module load"}.get(rule, rule)
    text = f"{name[:60]} {what} {_ms(dur)}"
    if typical is not None and not pd.isna(typical):
        text += f" (later: {'median' if rule == 'first_call' else 'down to'} {_ms(float(typical))})"
    return text


def _ms(us: float) -> str:
    return f"{us:.3g} us" if us < 1000 else f"{us / 1e3:,.1f} ms"
