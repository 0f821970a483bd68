"""The report's run configuration: one row per run folder (table ``runs``)."""

from __future__ import annotations

import duckdb

from trace_report.present.report.context import ReportContext
from trace_report.present.report.parts import Section, table_html

CONFIG_COLUMNS = ["run_key", "experiment", "variant", "model", "batch_size", "epochs", "steps", "optimizer", "lr",
                  "workers", "amp", "compile", "device", "device_name", "torch_version", "final_loss",
                  "test_accuracy"]
def config_section(con: duckdb.DuckDBPyConnection) -> Section | None:
    """The runs' configuration and results, one row per run folder."""
    try:
        runs = con.execute("SELECT * EXCLUDE (manifest, config) FROM runs ORDER BY run_key").df()
    except duckdb.CatalogException:
        return None
    if runs.empty:
        return None
    cols = [c for c in CONFIG_COLUMNS if c in runs.columns and runs[c].notna().any()]
    sec = Section("Run configuration", table_html(runs[cols]))
    sec.notes.append("full configuration and environment of each run: SELECT config, manifest FROM runs")
    return sec


def build(ctx: ReportContext) -> Section | None:
    """:func:`config_section` of the report's runs."""
    return config_section(ctx.con)
