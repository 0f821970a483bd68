"""SHA-256 digests of plain input files, computed ahead of their decoding.

A trace's SHA-256 (``traces.sha256``: what the duplicate and changed-file rules compare,
:mod:`trace_report.ingest.versions`) costs CPU in proportion to the plain JSON. Computed beside
the decoding, it was a third busy thread on two decoding workers. ``trace-report ingest`` calls
:func:`start_hashing` before it imports pyarrow and DuckDB (a time during which only one core
works; hashlib and file reads release the GIL), and the decoding takes each digest
with :func:`claim` (:class:`~trace_report.ingest.files.FileReader`). A gzip trace's digest is
computed while it is inflated (cheap: its compressed bytes), so only plain files are queued.

Standard library imports only (and :mod:`trace_report.storage`, which loads pyarrow only for a
URL): this module loads before the heavy ones.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from trace_report import storage

PREHASH_MIN_BYTES = 16 << 20
"""Smallest plain file hashed ahead (smaller ones take under 10 ms beside their decoding)."""
BLOCK_BYTES = 16 << 20
"""Bytes read and hashed per block. Both calls release the GIL, and taking it back after each
waits for the thread holding it to yield (``sys.getswitchinterval()``, 5 ms): while the main
thread imports pyarrow and DuckDB, small blocks made the hashing many times slower."""

_Key = tuple[str, int, int]
"""A file as it was seen: real path, size, modification time (ns). A changed file is a new key."""


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of the bytes of ``path``, read in :data:`BLOCK_BYTES` blocks (at most the
    file's size) into one buffer. Raises OSError when the file cannot be read."""
    digest = hashlib.sha256()
    with storage.open_input(path, buffering=0) as fh:
        buf = bytearray(max(1, min(BLOCK_BYTES, os.fstat(fh.fileno()).st_size)))
        view = memoryview(buf)
        while n := fh.readinto(buf):
            digest.update(view[:n])
    return digest.hexdigest()


def _key(path: Path) -> _Key | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), st.st_size, st.st_mtime_ns


def _is_plain_json(path: Path, size: int) -> bool:
    """At least :data:`PREHASH_MIN_BYTES` and starting (after blanks) with ``{`` or ``[``."""
    if size < PREHASH_MIN_BYTES:
        return False
    try:
        head = storage.read_head(path, 256).lstrip()
    except OSError:
        return False
    return head[:1] in (b"{", b"[")


def _plain_files(targets: Iterable[Path]) -> Iterator[tuple[Path, _Key]]:
    """The plain JSON files among ``targets`` (folders searched recursively), in order."""
    for target in targets:
        if target.is_dir():
            for root, dirs, files in os.walk(target):
                dirs.sort()
                for name in sorted(files):
                    yield from _if_plain(Path(root) / name)
        else:
            yield from _if_plain(target)


def _if_plain(path: Path) -> Iterator[tuple[Path, _Key]]:
    key = _key(path)
    if key is not None and os.path.isfile(path) and _is_plain_json(path, key[1]):
        yield path, key


class _Hasher:
    """One background thread hashing queued files in order; results kept by key until claimed."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.done: dict[_Key, str | None] = {}
        self.running: _Key | None = None
        self.claimed: set[_Key] = set()
        self.stopped = False

    def run(self, targets: list[Path]) -> None:
        for path, key in _plain_files(targets):
            with self.cond:
                if self.stopped:
                    return
                if key in self.claimed:  # the decoding got there first and hashes it itself
                    continue
                self.running = key
            digest: str | None = None
            try:
                digest = sha256_file(path)
                if _key(path) != key:  # changed while read: let the decoding hash what it reads
                    digest = None
            except OSError:
                pass
            finally:  # whoever waits for this file is answered, whatever happened (None: hash it yourself)
                with self.cond:
                    self.done[key] = digest
                    self.running = None
                    self.cond.notify_all()

    def claim(self, path: Path) -> Callable[[], str] | None:
        key = _key(path)
        if key is None:
            return None
        with self.cond:
            self.claimed.add(key)
            if key in self.done:
                digest = self.done.pop(key)
                return None if digest is None else (lambda: digest)
            if key != self.running:
                return None

        def wait() -> str:
            with self.cond:
                self.cond.wait_for(lambda: key in self.done)
                digest = self.done.pop(key)
            return digest if digest is not None else sha256_file(path)

        return wait


_hasher: _Hasher | None = None


def start_hashing(targets: Iterable[Path]) -> None:
    """Hash the plain JSON files of at least :data:`PREHASH_MIN_BYTES` among ``targets``
    (folders searched recursively, in sorted order) in a daemon thread, one after the other.
    Replaces hashing started earlier (:func:`stop_hashing`)."""
    global _hasher
    stop_hashing()
    _hasher = _Hasher()
    threading.Thread(target=_hasher.run, args=([Path(t) for t in targets],), daemon=True,
                     name="trace-report-sha256").start()


def stop_hashing() -> None:
    """Hash no further file (the one being read is finished, for whoever waits on it)."""
    global _hasher
    if _hasher is not None:
        with _hasher.cond:
            _hasher.stopped = True
        _hasher = None


def claim(path: Path) -> Callable[[], str] | None:
    """For a file :func:`start_hashing` queued and that has not changed since: a function that
    returns its SHA-256 (hex), waiting while the background thread reads it. None when the file
    was not queued, changed, or is still waiting its turn (it is then not hashed in the
    background): the caller hashes it itself."""
    return _hasher.claim(path) if _hasher is not None else None
