"""Load Nsight Compute reports into the ``ncu_kernels``/``ncu_metrics`` tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from trace_report.errors import InputError
from trace_report.formats.ncu import read_ncu
from trace_report.ingest.digests import sha256_file
from trace_report.pathtext import printable
from trace_report.redact import StringScreen
from trace_report.store.views import ensure_ncu_tables


def load_ncu(con: duckdb.DuckDBPyConnection, path: Path | str, label: str | None = None,
             warnings: list[str] | None = None) -> int:
    """Load one Nsight Compute report into ``ncu_kernels``/``ncu_metrics``; return the number
    of profiled kernel launches in it.

    ``label``: what ``ncu_kernels.path`` holds (the input's label: its absolute path, or
    ``archive!member`` for a member read from a temporary file), default ``path``; stored as
    printable text (:func:`trace_report.pathtext.printable`) through the secret screen, as
    ``traces.path`` is; what the screen replaced in the report's strings is added to ``warnings``
    (``<label>: redacted ...``, as for a trace). A file already loaded (same label and SHA-256) is not loaded twice.
    Raises :class:`InputError` for unreadable or foreign files.
    """
    path = Path(path).absolute()
    stored = StringScreen()(printable(label if label is not None else str(path)), "ncu_kernels.path")
    data = read_ncu(path)
    if warnings is not None and data.redactions:
        warnings.append(f"{label if label is not None else path}: redacted secrets in the report's strings: "
                        f"{', '.join(data.redactions[:5])}")
    if not data.kernels:
        raise InputError(f"{path}: no profiled kernel launches in the report")
    ensure_ncu_tables(con)
    sha = sha256_file(path)
    old = con.execute("SELECT count(*) FROM ncu_kernels WHERE path = ? AND sha256 = ?",
                      [stored, sha]).fetchall()[0][0]
    if old:
        return int(old)
    report_id = con.execute("SELECT coalesce(max(report_id) + 1, 0) FROM ncu_kernels").fetchall()[0][0]
    kernels = pa.Table.from_pylist(
        [{"report_id": report_id, "path": stored, "sha256": sha, "format": data.fmt, **row}
         for row in data.kernels],
        schema=_KERNEL_SCHEMA,
    )
    metrics = pa.table({"report_id": pa.array([report_id] * len(data.metrics["metric"]), pa.int32()),
                        **{k: pa.array(v, _METRIC_SCHEMA.field(k).type) for k, v in data.metrics.items()}})
    con.register("_ncu_kernels_in", kernels)
    con.register("_ncu_metrics_in", metrics)
    try:
        con.execute(f"INSERT INTO ncu_kernels BY NAME SELECT {', '.join(_KERNEL_SCHEMA.names)} FROM _ncu_kernels_in")
        con.execute(f"INSERT INTO ncu_metrics BY NAME SELECT {', '.join(_METRIC_SCHEMA.names)} FROM _ncu_metrics_in")
    finally:
        con.unregister("_ncu_kernels_in")
        con.unregister("_ncu_metrics_in")
    return len(data.kernels)


_KERNEL_SCHEMA = pa.schema([
    ("report_id", pa.int32()), ("launch_id", pa.int64()), ("path", pa.string()),
    ("sha256", pa.string()), ("format", pa.string()), ("kernel", pa.string()),
    ("function", pa.string()), ("process_id", pa.int64()), ("process_name", pa.string()),
    ("host", pa.string()), ("context", pa.int64()), ("stream", pa.int64()), ("device", pa.int64()),
    ("device_name", pa.string()), ("compute_capability", pa.string()), ("block_size", pa.string()),
    ("grid_size", pa.string()),
])
_METRIC_SCHEMA = pa.schema([
    ("report_id", pa.int32()), ("launch_id", pa.int64()), ("section", pa.string()),
    ("metric", pa.string()), ("label", pa.string()), ("instance", pa.string()),
    ("unit", pa.string()), ("value", pa.float64()), ("text", pa.string()),
])
