"""Find trace files in the paths a user gives: files, directories of ranks, tar archives."""

from __future__ import annotations

import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trace_report.errors import InputError

TRACE_SUFFIXES = (".json", ".json.gz")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")
DB_SUFFIXES = (".duckdb", ".db", ".ddb")
NOT_TRACES = {"run.json", "results.json", "metrics.json", "manifest.json", "package.json"}
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class TraceSource:
    """One input file. ``label`` is what the user sees and ``traces.path`` stores; ``kind`` is
    ``chrome`` (Kineto trace), ``ncu`` (Nsight Compute report or CSV) or ``nsys`` (SQLite)."""

    path: Path
    label: str
    run_dir: Path | None = None
    kind: str = "chrome"


def nsight_kind(path: Path) -> str | None:
    """``ncu`` for an ``.ncu-rep`` or ncu CSV export, ``nsys`` for an nsys SQLite export."""
    from trace_report.analyze import ncu, nsys

    if ncu.is_ncu_input(path):
        return "ncu"
    if path.suffix.lower() in (".sqlite", ".sqlite3") and nsys.is_nsys_sqlite(path):
        return "nsys"
    return None


def rank_from_name(name: str) -> int | None:
    """Rank encoded in a file name (``rank-3.…``, ``worker3_step_12.…``, ``rank_3``), else None."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def is_trace_name(name: str) -> bool:
    """Whether a file name looks like a Chrome/Kineto trace (``*.json`` or ``*.json.gz``)."""
    low = name.lower()
    return low.endswith(TRACE_SUFFIXES) and low not in NOT_TRACES


def is_archive_name(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def is_database_path(path: Path) -> bool:
    """True for an existing DuckDB file (by suffix or by DuckDB's magic bytes)."""
    if not path.is_file():
        return False
    if path.name.lower().endswith(DB_SUFFIXES):
        return True
    with open(path, "rb") as fh:
        head = fh.read(16)
    return head[8:12] == b"DUCK"


def _dir_sources(folder: Path, scratch: list[tempfile.TemporaryDirectory[str]]) -> list[TraceSource]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    traces = [p for p in files if is_trace_name(p.name)]
    preferred = [p for p in traces if ".pt.trace." in p.name]
    chosen = preferred or traces
    out = [TraceSource(p, str(p), _run_dir_of(p)) for p in chosen]
    for p in files:  # Nsight outputs beside the traces (capture --ncu / --nsys) come along
        if p.suffix.lower() in (".ncu-rep", ".csv", ".sqlite", ".sqlite3") and (kind := nsight_kind(p)):
            out.append(TraceSource(p, str(p), _run_dir_of(p), kind))
    for archive in (p for p in files if is_archive_name(p.name)):
        out.extend(_archive_sources(archive, scratch))
    if not out:
        raise InputError(f"{folder}: no trace files (*.json, *.json.gz, *.tar.gz, ncu/nsys exports) here")
    return out


def _run_dir_of(path: Path) -> Path | None:
    return path.parent if (path.parent / "run.json").is_file() else None


def _archive_sources(
    archive: Path, scratch: list[tempfile.TemporaryDirectory[str]]
) -> list[TraceSource]:
    tmp = tempfile.TemporaryDirectory(prefix="trace-report-")
    scratch.append(tmp)
    out = []
    try:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if not member.isfile() or not is_trace_name(Path(member.name).name):
                    continue
                target = Path(tmp.name) / f"{len(out):05d}-{Path(member.name).name}"
                src = tar.extractfile(member)
                if src is None:
                    continue
                with src, open(target, "wb") as dst:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                out.append(TraceSource(target, f"{archive}!{member.name}"))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(f"{archive}: cannot read tar archive ({exc})") from exc
    if not out:
        raise InputError(f"{archive}: no trace files (*.json, *.json.gz) in this archive")
    return out


def find_sources(
    paths: list[Path], scratch: list[tempfile.TemporaryDirectory[str]]
) -> list[TraceSource]:
    """Expand ``paths`` into trace files, in a stable order.

    Directories are searched recursively (``*.pt.trace.json[.gz]`` preferred, else any
    ``*.json[.gz]`` but run/results files); tar archives are extracted into temporary
    directories appended to ``scratch`` (the caller cleans them up). Raises
    :class:`InputError` for a missing path or a directory/archive without traces.
    """
    if not paths:
        raise InputError("no trace paths given")
    out: list[TraceSource] = []
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file or directory")
        if path.is_dir():
            out.extend(_dir_sources(path, scratch))
        elif is_archive_name(path.name):
            out.extend(_archive_sources(path, scratch))
        else:
            out.append(TraceSource(path, str(path), _run_dir_of(path), nsight_kind(path) or "chrome"))
    return out
