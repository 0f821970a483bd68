"""Nsight Systems inputs: SQLite exports (``nsys export --type sqlite``) as rows of the
``events`` schema, and ``nsys stats`` kernel-summary CSVs as top-kernels frames.

SQLite tables used (schema documented by NVIDIA, "Nsight Systems User Guide, Exporter SQLite
Schema", https://docs.nvidia.com/nsight-systems/UserGuide/index.html#exporter-sqlite-schema):
``CUPTI_ACTIVITY_KIND_KERNEL`` (-> ``kernel``, name from ``StringIds`` via ``demangledName``),
``CUPTI_ACTIVITY_KIND_RUNTIME`` (-> ``cuda_runtime`` / ``cuda_driver`` by ``eventClass``),
``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``_MEMSET`` (-> ``gpu_memcpy`` / ``gpu_memset``),
``NVTX_EVENTS`` push/pop and start/end ranges (-> ``user_annotation``). Timestamps are ns on
the export's clock and become µs (``ts_us = start / 1000``). GPU rows get ``pid`` = device
id and ``tid`` = stream id (as Kineto writes them); CPU rows get the process and thread ids
decoded from nsys' serialized ``globalTid`` (``pid = (gtid >> 24) & 0xFFFFFF``,
``tid = gtid & 0xFFFFFF``). Environment variables (``TARGET_INFO_SYSTEM_ENV.DeviceEnvironment``)
are never read into the metadata.

Every string read (``StringIds`` names, NVTX text and domains, ``TARGET_INFO_*`` and
``META_DATA_EXPORT`` values, the host name) goes through the secret screen of
:mod:`trace_report.redact`, as a Kineto trace's do: each distinct string once
(:class:`~trace_report.redact.StringScreen`), the events changed counted as
``kind@events.<column> (N events)`` and the metadata's as ``kind@<path>`` in ``redacted_keys``.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from trace_report import storage
from trace_report.errors import InputError
from trace_report.redact import StringScreen, redact_text, redact_value, summarize

if TYPE_CHECKING:
    import pandas as pd

EVENT_SCHEMA = pa.schema([
    ("cat", pa.string()), ("name", pa.string()), ("pid", pa.string()), ("tid", pa.string()),
    ("ts_us", pa.float64()), ("dur_us", pa.float64()), ("stream", pa.int64()), ("device", pa.int64()),
    ("correlation", pa.int64()), ("external_id", pa.int64()), ("args", pa.string()),
])
"""The ``events`` columns without ``trace_id``/``event_id`` (see ``schema.sql``)."""

NVTX_RANGES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange, Nvtxt* (ENUM_NSYS_EVENT_TYPE)
COPY_KIND = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
             8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}
MEM_KIND = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
            6: "Managed Static", 7: "Unknown"}
_API_VERSION = re.compile(r"_v\d{4,5}$")


def _connect(path: Path) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    try:
        con = storage.sqlite_readonly(path, immutable=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: not an SQLite database (expected an 'nsys export --type sqlite' file: "
                         f"{exc})") from exc
    return con


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _gtid(value: int | None) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    return str((value >> 24) & 0xFFFFFF), str(value & 0xFFFFFF)


def _row(cat: str, name: str | None, pid: str | None, tid: str | None, start: int, end: int | None,
         stream: int | None = None, device: int | None = None, correlation: int | None = None,
         args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"cat": cat, "name": name, "pid": pid, "tid": tid, "ts_us": start / 1000.0,
            "dur_us": (end - start) / 1000.0 if end is not None else None, "stream": stream,
            "device": device, "correlation": correlation, "external_id": None,
            "args": json.dumps(args or {}, separators=(",", ":"))}


def _kernels(con: sqlite3.Connection, screen: StringScreen) -> list[dict[str, Any]]:
    cols = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    extra = [c for c in ("graphNodeId", "globalPid", "launchType") if c in cols]
    sql = ("SELECT k.start, k.end, k.deviceId, k.contextId, k.streamId, k.correlationId, d.value, s.value, "
           "k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.registersPerThread, "
           "k.staticSharedMemory, k.dynamicSharedMemory" + "".join(f", k.{c}" for c in extra) +
           " FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds d ON d.id = k.demangledName "
           "LEFT JOIN StringIds s ON s.id = k.shortName")
    rows = []
    for r in con.execute(sql):
        (start, end, dev, ctx, stream, corr, demangled, short, gx, gy, gz, bx, by, bz, regs, ssm, dsm) = r[:17]
        name = screen(demangled or short, "events.name")
        short = screen(short, "events.args")
        more = dict(zip(extra, r[17:], strict=True))
        args = {"device": dev, "context": ctx, "stream": stream, "correlation": corr, "grid": [gx, gy, gz],
                "block": [bx, by, bz], "registers per thread": regs, "shared memory": ssm + dsm,
                "short name": short}
        if more.get("globalPid") is not None:
            args["process id"] = int(_gtid(more["globalPid"])[0])
        if more.get("graphNodeId") is not None:
            args["graph node id"] = more["graphNodeId"]
        rows.append(_row("kernel", name, str(dev), str(stream), start, end, stream, dev, corr, args))
    return rows


def _runtime(con: sqlite3.Connection, screen: StringScreen) -> list[dict[str, Any]]:
    classes = {0: "cuda_runtime", 1: "cuda_driver"}
    if "ENUM_NSYS_EVENT_CLASS" in _tables(con):
        for cid, label in con.execute("SELECT id, label FROM ENUM_NSYS_EVENT_CLASS"):
            if label == "CUDA runtime":
                classes[cid] = "cuda_runtime"
            elif label == "CUDA driver":
                classes[cid] = "cuda_driver"
    rows = []
    sql = ("SELECT r.start, r.end, r.eventClass, r.globalTid, r.correlationId, s.value, r.returnValue "
           "FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId")
    for start, end, cls, gtid, corr, raw, ret in con.execute(sql):
        pid, tid = _gtid(gtid)
        name = screen(raw, "events.name")
        name = _API_VERSION.sub("", name) if name else name
        raw = screen(raw, "events.args")
        rows.append(_row(classes.get(cls, "cuda_runtime"), name, pid, tid, start, end, correlation=corr,
                         args={"correlation": corr, "api name": raw, "return value": ret}))
    return rows


def _memory(con: sqlite3.Connection, tables: set[str]) -> list[dict[str, Any]]:
    rows = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        sql = ("SELECT start, end, deviceId, contextId, streamId, correlationId, bytes, copyKind, srcKind, dstKind "
               "FROM CUPTI_ACTIVITY_KIND_MEMCPY")
        for start, end, dev, ctx, stream, corr, nbytes, kind, src, dst in con.execute(sql):
            name = f"Memcpy {COPY_KIND.get(kind, 'Unknown')} ({MEM_KIND.get(src, '?')} -> {MEM_KIND.get(dst, '?')})"
            rows.append(_row("gpu_memcpy", name, str(dev), str(stream), start, end, stream, dev, corr,
                             {"device": dev, "context": ctx, "stream": stream, "correlation": corr, "bytes": nbytes}))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        sql = "SELECT start, end, deviceId, contextId, streamId, correlationId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET"
        for start, end, dev, ctx, stream, corr, nbytes in con.execute(sql):
            rows.append(_row("gpu_memset", "Memset (Device)", str(dev), str(stream), start, end, stream, dev, corr,
                             {"device": dev, "context": ctx, "stream": stream, "correlation": corr, "bytes": nbytes}))
    return rows


def _nvtx(con: sqlite3.Connection, screen: StringScreen) -> list[dict[str, Any]]:
    domains = dict(con.execute("SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75 AND text IS NOT NULL"))
    marks = ",".join(map(str, NVTX_RANGES))
    sql = ("SELECT n.start, n.end, n.globalTid, coalesce(n.text, s.value), n.domainId, n.eventType, n.category "
           "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
           f"WHERE n.eventType IN ({marks}) AND n.end IS NOT NULL")
    rows = []
    for start, end, gtid, text, domain, etype, category in con.execute(sql):
        pid, tid = _gtid(gtid)
        args = {"nvtx event type": etype}
        if domain:
            args["domain"] = screen(domains.get(domain, domain), "events.args")
        if category:
            args["category"] = category
        rows.append(_row("user_annotation", screen(text, "events.name"), pid, tid, start, end, args=args))
    return rows


def _meta(con: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    if "META_DATA_EXPORT" not in tables:
        return {}
    return {k: v for k, v in con.execute("SELECT name, value FROM META_DATA_EXPORT")}


def _gpus(con: sqlite3.Connection, tables: set[str]) -> list[dict[str, Any]]:
    if "TARGET_INFO_GPU" not in tables:
        return []
    cur = con.execute("SELECT * FROM TARGET_INFO_GPU")
    names = [d[0] for d in cur.description]
    keep = ("id", "name", "computeMajor", "computeMinor", "smCount", "clockRate", "memoryBandwidth",
            "totalMemory", "chipName", "busLocation")
    return [{k: v for k, v in zip(names, row, strict=True) if k in keep} for row in cur]


def _system(con: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    if "TARGET_INFO_SYSTEM_ENV" not in tables:
        return {}
    wanted = ("Hostname", "CudaDriverVersion", "NvDriverVersion", "OsDescription", "CpuDescription")
    marks = ",".join("?" * len(wanted))
    return {k: v for k, v in con.execute(
        f"SELECT name, value FROM TARGET_INFO_SYSTEM_ENV WHERE name IN ({marks})", wanted)}


def _facts(con: sqlite3.Connection, tables: set[str], rows: list[dict[str, Any]],
           screen: StringScreen) -> dict[str, Any]:
    meta, gpus, system = _meta(con, tables), _gpus(con, tables), _system(con, tables)
    used = Counter(r["device"] for r in rows if r["cat"] == "kernel" and r["device"] is not None).most_common(1)
    gpu = next((g for g in gpus if used and g.get("id") == int(used[0][0])), gpus[0] if gpus else {})
    cc = (f"{gpu['computeMajor']}.{gpu['computeMinor']}"
          if gpu.get("computeMajor") is not None and gpu.get("computeMinor") is not None else None)
    metadata = {
        "format": "nsys-sqlite", "nsys_version": meta.get("EXPORT_PRODUCT_VERSION"),
        "export_schema_version": meta.get("EXPORT_SCHEMA_VERSION"), "gpus": gpus,
        "system": {k: v for k, v in system.items() if k != "Hostname"},
        "omitted": ["TARGET_INFO_SYSTEM_ENV.DeviceEnvironment (environment variables)"],
    }
    if "TARGET_INFO_SESSION_START_TIME" in tables:
        start = con.execute("SELECT utcTime FROM TARGET_INFO_SESSION_START_TIME").fetchall()
        metadata["session_start_utc"] = start[0][0] if start else None
    metadata, found = redact_value(metadata)
    host, device = system.get("Hostname"), gpu.get("name")
    if isinstance(host, str):
        host, in_host = redact_text(host, "host")
        found += in_host
    if isinstance(device, str):
        device, in_device = redact_text(device, "device_name")
        found += in_device
    return {
        "rank": None, "rank_source": None, "world_size": None, "host": host,
        "device_name": device, "compute_capability": cc,
        "schema_version": f"nsys-sqlite {meta.get('EXPORT_SCHEMA_VERSION', '?')}", "torch_version": None,
        "n_events": len(rows), "n_complete_events": len(rows),
        "n_kernels": sum(1 for r in rows if r["cat"] == "kernel"),
        "metadata": json.dumps(metadata, default=str), "redacted_keys": summarize(found) + screen.summary(),
    }


def read_nsys_sqlite(path: Path | str) -> tuple[dict[str, Any], pa.Table]:
    """Read an nsys SQLite export: (trace facts for the ``traces`` row, events table).

    The table has exactly :data:`EVENT_SCHEMA` (the ``events`` columns without ``trace_id`` and
    ``event_id``), sorted by start time. Facts keys: ``rank``, ``rank_source``, ``world_size``
    (None: nsys records none), ``host``, ``device_name``, ``compute_capability`` (of the GPU
    that ran most kernels), ``schema_version``, ``torch_version``, ``n_events``,
    ``n_complete_events``, ``n_kernels``, ``metadata`` (JSON), ``redacted_keys`` (what the secret
    screen replaced: ``kind@path`` in the metadata, ``kind@host``, ``kind@events.name (N events)``...).
    Raises :class:`InputError` for a missing, non-SQLite or non-nsys file.
    """
    path = Path(path)
    con = _connect(path)
    try:
        tables = _tables(con)
        if "StringIds" not in tables or not tables & {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                                        "NVTX_EVENTS"}:
            raise InputError(f"{path}: an SQLite database, but not an nsys export "
                             "(no StringIds / CUPTI_ACTIVITY_KIND_* / NVTX_EVENTS tables)")
        rows: list[dict[str, Any]] = []
        screen = StringScreen()
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            rows += _kernels(con, screen)
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            rows += _runtime(con, screen)
        rows += _memory(con, tables)
        if "NVTX_EVENTS" in tables:
            rows += _nvtx(con, screen)
        facts = _facts(con, tables, rows, screen)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: unreadable nsys export ({exc})") from exc
    finally:
        con.close()
    rows.sort(key=lambda r: (r["ts_us"], r["cat"]))
    return facts, pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)


# ------------------------------------------------------------------ nsys stats CSV

KERNEL_COLUMNS = ["name", "count", "total_us", "mean_us", "min_us", "max_us", "pct_of_kernel_time", "kind"]
_UNIT_US = {"ns": 1e-3, "us": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6}
_HEADERS = {"time(%)": "pct", "timepercent": "pct", "totaltime": "total", "instances": "count",
            "avg": "mean", "average": "mean", "mean": "mean", "min": "min", "minimum": "min",
            "max": "max", "maximum": "max", "name": "name"}


def _header_key(text: str) -> tuple[str | None, float | None]:
    unit = re.search(r"\((ns|us|μs|ms|s)\)", text)
    key = re.sub(r"\s+", "", re.sub(r"\((ns|us|μs|ms|s)\)", "", text)).lower()
    return _HEADERS.get(key), (_UNIT_US[unit.group(1)] if unit else None)


def read_kernsum_csv(path: Path | str) -> pd.DataFrame:
    """Read ``nsys stats --report cuda_gpu_kern_sum --format csv`` output (also the older
    ``gpukernsum``) into the top-kernels columns (:data:`KERNEL_COLUMNS`; times in µs, ``pct_of_kernel_time``
    as nsys printed it, ``kind = 'kernel'``), sorted by total time. Lines before the CSV header
    (``Processing ...``) are skipped. Raises :class:`InputError` for other files."""
    import pandas as pd  # only this reader needs it: ingesting an nsys export does not

    path = Path(path)
    try:
        lines = storage.read_text(path, encoding="utf-8-sig").splitlines()  # -sig: a BOM is no text
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    start = next((i for i, line in enumerate(lines) if "Total Time" in line and "Name" in line), None)
    if start is None:
        raise InputError(f"{path}: not an 'nsys stats' kernel summary CSV (no 'Total Time ... Name' header)")
    reader = csv.reader(io.StringIO("\n".join(lines[start:])))
    header = [_header_key(h) for h in next(reader)]
    keys = [k for k, _ in header]
    if not {"name", "total", "count"} <= set(keys):
        raise InputError(f"{path}: not an 'nsys stats' kernel summary CSV (columns: {', '.join(map(str, keys))})")
    default_unit = next((u for k, u in header if k == "total" and u), 1e-3)
    records = []
    for raw in reader:
        if len(raw) != len(header):
            continue
        rec: dict[str, Any] = {}
        for (key, unit), cell in zip(header, raw, strict=True):
            if key == "name":
                rec["name"] = cell
            elif key is not None and cell.strip():
                value = float(cell.replace(",", ""))
                rec[key] = value * (unit or default_unit) if key in ("total", "mean", "min", "max") else value
        records.append(rec)
    frame = pd.DataFrame(records)
    if frame.empty:
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    out = pd.DataFrame({
        "name": frame["name"], "count": frame["count"].astype("int64"), "total_us": frame["total"],
        "mean_us": frame.get("mean", frame["total"] / frame["count"]), "min_us": frame.get("min"),
        "max_us": frame.get("max"),
        "pct_of_kernel_time": frame["pct"] if "pct" in frame else 100.0 * frame["total"] / frame["total"].sum(),
        "kind": "kernel",
    })
    return out.sort_values(["total_us", "name"], ascending=[False, True]).reset_index(drop=True)
