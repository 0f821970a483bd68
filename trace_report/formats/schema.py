"""The Arrow schema every reader produces and the ``events`` relation exposes (``docs/schema.md``).

Times are microseconds as DOUBLE on the trace's own clock; ``args`` is the event's remaining
fields as JSON text. ``trace_id``/``event_id`` are filled by the ingest.
"""

from __future__ import annotations

import pyarrow as pa

EVENTS_SCHEMA = pa.schema(
    [
        ("trace_id", pa.int32()),
        ("event_id", pa.int64()),
        ("cat", pa.string()),
        ("name", pa.string()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("ts_us", pa.float64()),
        ("dur_us", pa.float64()),
        ("stream", pa.int64()),
        ("device", pa.int64()),
        ("correlation", pa.int64()),
        ("external_id", pa.int64()),
        ("args", pa.string()),
    ]
)
"""Columns of the ``events`` relation, in order."""
