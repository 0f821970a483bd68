"""Where a database's files live and who may write them (standard library only: the ingest
takes the lock, cleans up and starts decoding before DuckDB is imported).

Locking: one exclusive ``flock`` per database, on ``.<name>.lock`` beside it (not the folder);
an ingest or ``sql --write`` holds it while it writes, a second writer gets a clear error at
once, readers never wait. A killed writer's lock dies with it; its temporary copy and orphan
event pieces are removed by the next writer, with a note (:func:`clean_leftovers`).
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from trace_report.errors import DatabaseError

DERIVED_FOLDER = "derived"
"""The folder, inside the events folder, of the tables a query keeps per trace
(:mod:`trace_report.store.cache`)."""


PIECE_NAME = re.compile(r"t\d{6,}-[0-9a-f]{8}-p\d{5,}\.parquet")
"""The name of an event piece an ingest writes (:meth:`~trace_report.store.pieces.ParquetStore.path_for`):
in object storage nothing else is ever deleted, nor read as a piece."""


def events_dir_for(db_path: Path) -> Path:
    """The folder holding a database's event files: ``<db file name>.events`` beside it (unless
    its pieces are in object storage: :mod:`trace_report.store.remote_pieces`)."""
    return db_path.with_name(db_path.name + ".events")


def piece_at(folder: Path | str, name: str) -> Path | str:
    """The piece ``name`` in ``folder``: a local folder, or an object-store prefix (a URL)."""
    return folder / name if isinstance(folder, Path) else folder.rstrip("/") + "/" + name


def is_database_file(path: Path) -> bool:
    """Whether ``path`` is a DuckDB file (its header), not a trace or a folder."""
    try:
        with open(path, "rb") as f:
            return f.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


def inside(path: Path, root: str) -> bool:
    """Whether ``path``, symbolic links followed, lies strictly inside the folder ``root`` (a real path)."""
    real = os.path.realpath(path)
    return os.path.commonpath([real, root]) == root and real != root


def own_subfolder(folder: Path, name: str) -> Path | None:
    """``folder / name`` when it is the database's own (not a symbolic link, nor resolving
    elsewhere), whether it exists or not; else None: nothing is written or deleted there."""
    sub = folder / name
    if sub.is_symlink():
        return None
    if sub.exists() and os.path.realpath(sub) != os.path.join(os.path.realpath(folder), name):
        return None
    return sub


def unlink_inside(path: Path, folder: Path) -> None:
    """Delete the file ``path`` when it lies (symbolic links followed) inside ``folder``; else, or
    when it is gone, nothing: a database's bookkeeping never deletes a file outside its folders."""
    if inside(path, os.path.realpath(folder)) and not path.is_dir():
        with suppress(FileNotFoundError):
            path.unlink()


def database_path(path: Path) -> Path:
    """The file a database path stands for: a symbolic link is followed, so that the database
    is written through to its target and its pieces live beside the target."""
    path = path.absolute()
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def lock_path(path: Path) -> Path:
    """``.<name>.lock`` beside the database: the lock covers this database only."""
    return path.with_name(f".{path.name}.lock")


_HELD_LOCKS: set[int] = set()
"""File descriptors of the database locks this process holds (closed in forked workers)."""


def close_inherited_locks() -> None:
    """In a forked worker: close the lock descriptors inherited from the parent, so that the
    lock dies with the parent even if a worker outlives it for a moment."""
    for fd in list(_HELD_LOCKS):
        with suppress(OSError):
            os.close(fd)
    _HELD_LOCKS.clear()


@contextmanager
def database_lock(path: Path, what: str = "writing") -> Iterator[None]:
    """Hold the exclusive lock of one database (``flock`` on :func:`lock_path`) or raise
    :class:`DatabaseError` at once when another process holds it. The kernel releases the
    lock when the holder dies, so a killed ingest never leaves a stale lock."""
    path = database_path(path)
    try:
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise DatabaseError(f"{path}: cannot create its lock file ({exc.strerror or exc})") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise DatabaseError(f"{path}: another trace-report process is {what} this database; "
                                "try again when it has finished") from exc
        _HELD_LOCKS.add(fd)
        yield
    finally:
        _HELD_LOCKS.discard(fd)
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_copies(path: Path) -> list[Path]:
    """The ``.<name>.tmp-<pid>`` copies beside the database whose writer process is gone."""
    return [p for p in path.parent.glob(f".{path.name}.tmp-*")
            if p.suffix != ".wal" and p.name.rsplit("-", 1)[-1].isdigit()
            and not _pid_alive(int(p.name.rsplit("-", 1)[-1]))]


def may_have_leftovers(path: Path) -> bool:
    """Whether :func:`~trace_report.store.database.clean_leftovers` may find anything to remove:
    a stale copy, or an events folder (checked there against the database's ``event_files``)."""
    return events_dir_for(path).is_dir() or bool(stale_copies(path))


def remove_database_file(path: Path) -> None:
    """Delete a database file and its ``.wal``, where they exist."""
    for p in (path, path.with_name(path.name + ".wal")):
        with suppress(FileNotFoundError):
            p.unlink()
