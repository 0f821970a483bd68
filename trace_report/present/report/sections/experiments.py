"""The report's experiments section: each experiment's own chart (worker sweep, optimizers per
epoch, speed-ups, AMP sweep, eager against compile) and its ``results.csv``."""

from __future__ import annotations

import html
import json
from typing import Any

import duckdb
import pandas as pd

from trace_report.present import charts
from trace_report.present.charts import html as chart_html
from trace_report.present.report.context import ReportContext
from trace_report.present.report.parts import Section, attempt, table_html

EXPERIMENT_CHARTS = {"workers": "worker_sweep_chart", "amp": "amp_sweep_chart", "compile": "compile_chart",
                     "devices": "speedup_chart", "optimized": "speedup_chart", "no-bn": "speedup_chart"}


def _experiment_chart(con: duckdb.DuckDBPyConnection, run_key: str, experiment: str) -> Any:
    results = con.execute("SELECT * FROM run_results WHERE run_key = ?", [run_key]).df().dropna(axis=1, how="all")
    if experiment == "optimizers":
        metrics = con.execute(
            "SELECT r.run_key, r.optimizer, m.* EXCLUDE (run_key) FROM run_metrics m JOIN runs r USING (run_key) "
            "WHERE r.kind = 'run' AND starts_with(r.run_key, ? || '/') ORDER BY r.run_key, m.epoch", [run_key]).df()
        if metrics.empty:
            return None
        return charts.optimizer_epochs_chart(metrics.assign(run=run_lines(metrics)), by="run")
    builder = EXPERIMENT_CHARTS.get(experiment)
    if builder is None or results.empty:
        return None
    return getattr(charts, builder)(results)


def run_lines(metrics: pd.DataFrame) -> list[str]:
    """One line label per run: its optimizer, or ``optimizer (run)`` where several runs share an
    optimizer, so that no line joins the epochs of two runs."""
    shared = metrics.groupby("optimizer")["run_key"].nunique()
    return [f"{o} ({str(k).rsplit('/', 1)[-1]})" if shared.get(o, 1) > 1 or pd.isna(o) else str(o)
            for o, k in zip(metrics["optimizer"], metrics["run_key"], strict=True)]


def _json_list(text: str | None) -> list[Any]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return [text]
    return value if isinstance(value, list) else [value]


def experiments_section(con: duckdb.DuckDBPyConnection) -> Section | None:
    """The experiments' own charts and result tables (``results.csv``)."""
    try:
        exps = con.execute("SELECT run_key, experiment, manifest->>'notes' AS notes FROM runs "
                           "WHERE kind = 'experiment' OR run_key IN (SELECT run_key FROM run_results) "
                           "ORDER BY run_key").fetchall()
    except duckdb.CatalogException:
        return None
    sec = Section("Experiments")
    for run_key, experiment, notes in exps:
        chart = attempt(sec, str(run_key), lambda k=run_key, e=experiment: _experiment_chart(con, k, str(e)))
        results = con.execute("SELECT * FROM run_results WHERE run_key = ?", [run_key]).df().drop(columns="run_key")
        if chart is None and results.empty:
            continue
        sec.body += f"<h3>{html.escape(str(run_key))} ({html.escape(str(experiment))})</h3>"
        if chart is not None:
            sec.body += sec.inline_chart(f"experiment-{run_key}", chart)
        for note in _json_list(notes):
            sec.body += f'<p class="note">{chart_html.linkify(str(note))}</p>'
        if len(results):
            table = table_html(results.dropna(axis=1, how="all"), name_columns=("run_dir",))
            sec.body += f"<details><summary>results.csv ({len(results)} rows)</summary>{table}</details>"
    return sec if sec.charts or sec.body else None


# ---------------------------------------------------------------- assembling


def build(ctx: ReportContext) -> Section | None:
    """:func:`experiments_section`, where the report shows the experiments (not per run)."""
    return experiments_section(ctx.con) if ctx.experiments else None
