"""The report's headline: advise's verdict with its top findings (saving and what to do: the
answer, on the page's first screen), then traces, ranks, steps, step time, GPU time,
utilisation, top GPU operation, and the table of traces."""

from __future__ import annotations

import html
import math
from typing import Any

import duckdb
import pandas as pd

from trace_report.analyses.advise import AdviceResult
from trace_report.analyses.advise.checks import PER_TIME
from trace_report.analyses.common.iterations import INFERRED
from trace_report.analyses.common.utilization import gpu_utilization, step_overlap_note
from trace_report.analyses.top_kernels import TopKernelsOptions, top_kernels
from trace_report.errors import TraceReportError
from trace_report.present.charts.html import linkify
from trace_report.present.charts.traces import short_name
from trace_report.present.report.context import ReportContext, ReportOptions
from trace_report.present.report.parts import TOP_ROWS, Section, table_html
from trace_report.store.tracedb import TraceDB

TOP_FINDINGS = 3
"""Findings the headline lists (the Advice section lists them all)."""


def _headline_html(items: list[tuple[str, str]]) -> str:
    cells = "".join(f"<div><b>{html.escape(v)}</b>{html.escape(k)}</div>" for k, v in items)
    return f'<div class="headline">{cells}</div>'


def _saving(row: pd.Series) -> str:
    ms, pct = row.get("est_saving_ms_per_step"), row.get("saving_pct_of_step")
    if ms is None or pd.isna(ms):
        return ""
    per = str(row.get("per") or "step")  # step, iteration or trace, as advise's verdict says
    share = "" if pct is None or pd.isna(pct) else f" ({pct:.1f}% of {PER_TIME.get(per, PER_TIME['step'])})"
    return f"saves about {ms:,.2f} ms per {per}{share}"


def _on_ranks(frame: pd.DataFrame, row: pd.Series) -> str:
    """`` on N ranks`` when the finding holds on several (a ``ranks`` list, or one row per ``rank``)."""
    if "ranks" in frame.columns and isinstance(row["ranks"], (list, tuple)):
        n = len(row["ranks"])
    elif "rank" in frame.columns:
        n = frame.loc[frame["finding"] == row["finding"], "rank"].nunique()
    else:
        n = 1
    return f" on {n} ranks" if n > 1 else ""


def verdict_html(advice: AdviceResult) -> str:
    """advise's verdict, then its top :data:`TOP_FINDINGS` findings (one per ``finding``, the
    rank of the largest saving: advise's frame is sorted by ``est_saving_ms_per_step``) with
    their title, saving and ``recommendation`` as "Do:"; escaped, URLs as links."""
    frame = advice.frame
    items = []
    if len(frame):
        for _, row in frame.drop_duplicates("finding").head(TOP_FINDINGS).iterrows():
            on = _on_ranks(frame, row)
            saving = _saving(row)
            items.append(f'<li><b>{html.escape(str(row["title"]))}</b> <code>{html.escape(str(row["finding"]))}'
                         f'</code>{html.escape(on)}{": " + html.escape(saving) if saving else ""}'
                         f'<div class="do"><b>Do:</b> {linkify(str(row["recommendation"]))}</div></li>')
    more = len(frame.drop_duplicates("finding")) - len(items) if len(frame) else 0
    where = f"{more} more finding{'s' * (more > 1)}, and the" if more else "The"
    tail = f'<p class="note">{where} evidence and thresholds of each: the Advice section below.</p>'
    tail = tail if len(frame) else ""
    listed = f'<ol class="todo">{"".join(items)}</ol>' if items else ""
    return f'<div class="verdict"><p class="verdict-line">{html.escape(advice.verdict)}</p>{listed}{tail}</div>'


def _dur(us: float | None) -> str:
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "n/a"
    return f"{us:,.1f} µs" if abs(us) < 1000 else (f"{us / 1e3:,.2f} ms" if abs(us) < 1e6 else f"{us / 1e6:,.2f} s")


# ---------------------------------------------------------------- sections


def _trace_facts(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return con.execute("SELECT trace_id, path, run_id, rank, world_size, device_name, compute_capability, "
                       "torch_version, n_complete_events AS events, n_kernels AS kernels FROM traces "
                       "ORDER BY trace_id").df()


def headline_section(db: TraceDB, con: duckdb.DuckDBPyConnection, opts: ReportOptions,
                     advice: AdviceResult | TraceReportError | None = None) -> Section | None:
    """Headline numbers: advise's verdict and top findings with what to do (:func:`verdict_html`),
    traces, ranks, steps, step time, GPU time, utilisation, top GPU operation; the traces table
    (its first :data:`TOP_ROWS` rows, the rest folded)."""
    traces = _trace_facts(con)
    if traces.empty:
        return None
    steps = con.execute("SELECT rank, count(*) AS n, median(dur_us) AS median_us FROM steps JOIN traces USING "
                        "(trace_id) WHERE $rank IS NULL OR rank = $rank GROUP BY rank ORDER BY rank",
                        {"rank": opts.rank}).df()
    gpu = gpu_time(con, opts.rank)
    util = gpu_utilization(db, opts.rank)
    devices = _devices(con)
    items = [("traces", f"{len(traces)}"), ("ranks", f"{traces['rank'].nunique()}"), ("GPU", devices),
             ("ProfilerSteps", _per_rank(steps["n"].tolist(), len(steps))),
             *(inferred := _inferred_items(con, opts.rank)),
             *_median_item(con, opts.rank, "iteration" if inferred and steps.empty else "step"),
             ("GPU kernels", f"{int(traces['kernels'].sum()):,}"),
             ("GPU kernel time", _dur(gpu) if gpu else "n/a"),
             *_utilization_items(util)]
    top = top_kernels(db, TopKernelsOptions(limit=1, rank=opts.rank))
    if len(top.frame):
        row = top.frame.iloc[0]
        what = {"cpu_op": "top CPU operator (self time)", "kernel": "top kernel"}.get(
            row["kind"], f"top GPU operation ({row['kind']})")  # memcpy/memset rank with the kernels
        pct = row.get("pct_of_gpu_time", row.get("pct_of_cpu_self_time"))
        where = "CPU self time" if row["kind"] == "cpu_op" else "GPU time"
        items.append((what, f"{pct:.1f}% of {where}: {short_name(row['name'], 60, identity=True)}"))
    lead = verdict_html(advice) if isinstance(advice, AdviceResult) and advice.verdict else ""
    sec = Section("Headline numbers", lead + _headline_html(items))
    overlap_note = step_overlap_note(db, opts.rank)
    if overlap_note:
        sec.notes.append(overlap_note)
    sec.body += "<h3>Traces</h3>" + table_html(traces, name_columns=("path",), top=TOP_ROWS)
    return sec


def gpu_time(con: duckdb.DuckDBPyConnection, rank: int | None) -> float:
    """Summed kernel time (µs) of the selection (view ``gpu_time``)."""
    return float(_scalar_p(con, "SELECT coalesce(sum(kernel_us), 0) FROM gpu_time WHERE $rank IS NULL OR rank = $rank",
                           {"rank": rank}) or 0.0)


def _scalar_p(con: duckdb.DuckDBPyConnection, query: str, params: dict) -> Any:
    rows = con.execute(query, params).fetchall()
    return rows[0][0] if rows else None


def _per_rank(counts: list[int], ranks: int) -> str:
    """``3`` on one rank; ``1 per rank (8 ranks)`` or ``2-3 per rank (4 ranks)`` on several: ranks
    are never counted as steps."""
    if not counts:
        return "0"
    if ranks <= 1:
        return f"{counts[0]}"
    lo, hi = min(counts), max(counts)
    return f"{lo if lo == hi else f'{lo}-{hi}'} per rank ({ranks} ranks)"


def _inferred_items(con: duckdb.DuckDBPyConnection, rank: int | None) -> list[tuple[str, str]]:
    """``iterations``: how many were inferred, and from what, for the traces without ProfilerStep
    (view ``iterations``, basis ``inferred: <name>``); none when every trace has steps or none repeats."""
    rows = con.execute("SELECT count(*), list(DISTINCT substr(i.basis, $n)) FROM iterations i JOIN traces t "
                       "USING (trace_id) WHERE starts_with(i.basis, $p) AND ($rank IS NULL OR t.rank = $rank)",
                       {"rank": rank, "p": INFERRED, "n": len(INFERRED) + 1}).fetchone()
    if not rows or not rows[0]:
        return []
    return [("iterations (no ProfilerStep)", f"{rows[0]} inferred from {', '.join(sorted(rows[1]))}")]


def _utilization_items(util: pd.DataFrame) -> list[tuple[str, str]]:
    """The GPU utilisation headline (view ``gpu_utilization_by_rank``, the figure ``advise``
    checks): busy / step time, with the range over ranks when there are several."""
    util = util[util["gpu_util_pct"].notna()]
    if util.empty:
        return [("GPU busy (of step time)", "n/a")]
    kinds = {"step time" if b == "ProfilerStep" else "GPU span" if b == "gpu_span" else "iteration time"
             for b in util["basis"]}
    basis = "step time" if kinds == {"step time"} else " or ".join(sorted(kinds, reverse=True))
    total = 100.0 * util["busy_us"].sum() / util["wall_us"].sum()
    text = f"{total:.1f}%"
    if len(util) > 1:
        text += f" (ranks {util['gpu_util_pct'].min():.1f}-{util['gpu_util_pct'].max():.1f}%)"
    return [(f"GPU busy (of {basis})", text)]


def build(ctx: ReportContext) -> Section | None:
    """:func:`headline_section` of the report's traces, with advise's verdict."""
    return headline_section(ctx.db, ctx.con, ctx.opts, ctx.advice)


def _devices(con: duckdb.DuckDBPyConnection) -> str:
    """The GPUs of the traces (view ``device_arch``): the recorded device names, else the class the
    kernel names show (``V100-class (from 9,538 volta_* kernels)``); ``CPU only`` when neither."""
    rows = con.execute("SELECT DISTINCT CASE WHEN source = 'kernel names' THEN "
                       "regexp_replace(evidence, ', ', ' (', '') || ')' ELSE device_name END "
                       "FROM device_arch WHERE evidence IS NOT NULL").fetchall()
    return ", ".join(sorted(str(r[0]) for r in rows)) or "CPU only"


def _median_item(con: duckdb.DuckDBPyConnection, rank: int | None, word: str) -> list[tuple[str, str]]:
    """``median step`` (or ``median iteration`` for inferred ones) and :func:`_median_step`'s text."""
    return [(f"median {word}", _median_step(con, rank, word))]


def _median_step(con: duckdb.DuckDBPyConnection, rank: int | None, word: str = "step") -> str:
    """The median step time as the GPU sees it (view ``step_time``: the longer of the ProfilerStep's
    (or inferred iteration's) CPU span and the GPU's step period), with the CPU span's median and
    the GPU-bound steps when the two differ."""
    row = con.execute("SELECT median(step_us), median(cpu_us), count(*) FILTER (WHERE bound_by = 'gpu'), count(*) "
                      "FROM step_time WHERE $rank IS NULL OR rank = $rank", {"rank": rank}).fetchone()
    step, cpu, gpu_bound, n = row if row else (None, None, 0, 0)
    if not n or step is None:
        return _dur(None)
    if not gpu_bound:
        return _dur(step)
    return f"{_dur(step)} (CPU span {_dur(cpu)}; {gpu_bound} of {n} {word}s GPU-bound)"
