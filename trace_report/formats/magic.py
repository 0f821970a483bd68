"""Recognising gzip by its first bytes, with nothing heavier than the standard library (so that
:mod:`trace_report.inputs` can sniff files without loading the trace decoder)."""

from __future__ import annotations

from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of every gzip member (RFC 1952)."""


def is_gzip(path: Path) -> bool:
    """Whether the file starts with gzip's magic bytes (the one gzip sniffer)."""
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC
