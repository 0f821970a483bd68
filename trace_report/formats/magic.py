"""Recognising gzip by its first bytes, with nothing heavier than the standard library and
:mod:`trace_report.storage` (so that :mod:`trace_report.inputs` can sniff files without loading
the trace decoder)."""

from __future__ import annotations

from trace_report import storage

GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of every gzip member (RFC 1952)."""


def is_gzip(path: storage.Location) -> bool:
    """Whether the file or object starts with gzip's magic bytes (the one gzip sniffer)."""
    return storage.read_head(path, 2) == GZIP_MAGIC
