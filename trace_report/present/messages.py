"""Warnings for people: one line per distinct message, with the number of files it applies to.

The ingest words a per-file warning as ``<file label>: <message>`` (``formats/kineto_metadata``,
``ingest/pipeline``). Nine traces without ``distributedInfo`` used to print nine identical
lines; :func:`group_warnings` prints the message once with the count and the first file.
"""

from __future__ import annotations

import re

# "<label>: <message>" where the label is a path or archive!member; the message starts with a
# lower-case word (no rank..., redacted ..., replaced ...). Paths may hold ": " only rarely.
_PER_FILE = re.compile(r"^(?P<label>\S(?:.*?\S)?): (?P<message>[a-z].*)$")


def group_warnings(messages: list[str]) -> list[str]:
    """``messages`` with per-file warnings of identical text merged, in first-seen order:
    ``"<message> (3 files: a.json, b.json, ...)"`` for several files, unchanged for one file or a
    message without a file label."""
    order: list[str] = []
    files: dict[str, list[str]] = {}
    for text in messages:
        m = _PER_FILE.match(text)
        key = m.group("message") if m else text
        if key not in files:
            files[key] = []
            order.append(key)
        if m:
            files[key].append(m.group("label"))
    out = []
    for key in order:
        labels = files[key]
        if len(labels) <= 1:
            out.append(f"{labels[0]}: {key}" if labels else key)
            continue
        names = [label.rsplit("/", 1)[-1] for label in labels]
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        out.append(f"{key} ({len(labels)} files: {shown})")
    return out
