"""Read an Nsight Compute report: ``.ncu-rep`` through NVIDIA's ``ncu_report``, or an
``ncu --csv`` export (``--page details`` or ``--page raw``), into :class:`NcuData`."""

from __future__ import annotations

from pathlib import Path

from trace_report import storage
from trace_report.errors import InputError
from trace_report.formats.ncu_csv import read_ncu_csv
from trace_report.formats.ncu_rep import read_ncu_rep
from trace_report.formats.ncu_types import NcuData


def read_ncu(path: Path) -> NcuData:
    """Parse an ncu report: ``.ncu-rep`` through ``ncu_report``, anything else as ncu CSV.

    Raises :class:`InputError` for a missing, empty or foreign file.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if storage.stat(path).size == 0:
        raise InputError(f"{path}: empty file")
    if path.suffix.lower() == ".ncu-rep" or not _looks_text(path):
        return read_ncu_rep(path)
    return read_ncu_csv(path)


def _looks_text(path: Path) -> bool:
    """Whether the file's first block is text (a CSV), as opposed to a binary report."""
    head = storage.read_head(path, 4096)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(head) - 4  # a multi-byte character cut at the block's end
    return b"\x00" not in head
