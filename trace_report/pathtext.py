"""File names as text that can be stored and printed.

On POSIX a file name is bytes; Python decodes the bytes that are not UTF-8 to lone surrogates
(``os.fsdecode``, PEP 383 ``surrogateescape``), which open the file fine but cannot be encoded
as UTF-8: DuckDB refuses them (``traces.path``) and a UTF-8 stdout raises on them. Every path
that is stored or printed goes through :func:`printable` first.
"""

from __future__ import annotations

import os


def printable(path: str | os.PathLike[str]) -> str:
    """``path`` as valid Unicode text: each byte of its name that is not UTF-8 written as a
    backslash escape (``b"t\\xff.json"`` -> ``"t\\\\xff.json"``, the ``backslashreplace`` of
    Python's codecs); names that are valid UTF-8 are returned unchanged."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return os.fsencode(text).decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that no file name decodes to (U+D800..U+DC7F)
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
