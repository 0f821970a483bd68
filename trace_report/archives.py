"""Unpacking tar archives (``.tar``, ``.tar.gz``, ``.tgz``) into a scratch folder, with limits.

Members are read in one pass (tarfile's stream mode: the archive is never
read twice, a compressed one never decompressed twice) and each regular member is copied to a
file of the scratch folder through a byte counter, so a decompression bomb stops after a bounded
number of bytes are written, not after the bomb is on disk:

- a member may unpack to at most :data:`MAX_MEMBER_BYTES`, the archive to :data:`MAX_TOTAL_BYTES`,
  and no member to more than the scratch folder's free space;
- the bytes unpacked may be at most ``max_ratio`` times the archive's bytes read so far (the
  ``--max-ratio`` of ``trace-report ingest``, default :data:`MAX_RATIO`, the rule of a gzip trace in
  :mod:`trace_report.formats.kineto`), once more than :data:`RATIO_CHECK_AFTER` bytes are unpacked.
  A member whose size in its header already breaks the rule against the whole archive's size is
  refused before a byte is written; the counter catches the rest within one block.

Hard links and long names follow GNU tar: a hard link to a regular member read before it is that
member's content under the link's name (the same extracted file: no copy, no bytes counted);
a member's name is kept whole in its label (``archive!member``) however long, while its file in
the scratch folder gets a short name of its own. Symbolic links, devices, FIFOs and hard links to
nothing read are listed as skipped with the reason, never dropped silently.

Scratch folders are named ``trace-report-<pid>-XXXXXXXX`` and hold a lock (``flock``) for the
life of the process that made them; a folder whose process is gone (``kill -9``) is removed by
the next one made (:func:`remove_orphans`).
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import tarfile
import tempfile
import weakref
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from trace_report import storage
from trace_report.errors import InputError
from trace_report.formats.magic import GZIP_MAGIC
from trace_report.pathtext import printable

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: owners are found by process id alone
    fcntl = None  # type: ignore[assignment]

MAX_RATIO = 300
"""Largest accepted ratio of unpacked bytes to archive bytes read: the value and the reason of
:data:`trace_report.formats.kineto.MAX_RATIO` (real traces compress 10-30:1), kept here so that
sniffing inputs does not load the trace decoder (tests/test_hostile_inputs.py checks they agree)."""

RATIO_CHECK_AFTER = 8 << 20
"""Unpacked bytes after which the ratio is enforced, as for a gzip trace (small archives pass)."""

MAX_MEMBER_BYTES = 16 << 30
"""Largest member unpacked (16 GiB, a Kineto trace of some 50 M events); larger: unpack the
archive yourself and give the folder."""

MAX_TOTAL_BYTES = 64 << 30
"""Largest sum of the members unpacked from one archive (64 GiB)."""

COPY_BYTES = 1 << 20
"""Bytes copied (and counted) at a time, and the most inflated at a time from a gzip archive."""

TAR_BLOCK = 20 * 512
"""Bytes tarfile reads at a time (its default record size): what a plain archive is read ahead of
the bytes counted."""

SCRATCH_PREFIX = "trace-report-"
LOCK_NAME = ".owner.lock"
_SCRATCH_NAME = re.compile(r"trace-report-(\d+)-[A-Za-z0-9_]{8}")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_COMPRESSED = {b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}


@dataclass(frozen=True)
class ArchiveLimits:
    """Limits on unpacking one archive, in bytes; 0 turns a limit off. ``max_ratio``: see
    :data:`MAX_RATIO` (``--max-ratio``); ``ratio_after``: :data:`RATIO_CHECK_AFTER`."""

    member_bytes: int = MAX_MEMBER_BYTES
    total_bytes: int = MAX_TOTAL_BYTES
    max_ratio: float = MAX_RATIO
    ratio_after: int = RATIO_CHECK_AFTER


@dataclass(frozen=True)
class Member:
    """One member of an archive: ``name`` as stored (text; bytes that are not UTF-8 as lone
    surrogates), ``path`` its extracted file, or None with ``reason`` when it is skipped."""

    name: str
    path: Path | None
    reason: str = ""


# ------------------------------------------------------------------ scratch folders


class Scratch:
    """A scratch folder ``<tempdir>/trace-report-<pid>-XXXXXXXX``, locked while this process lives.

    Made after :func:`remove_orphans` cleared the folders of processes that are gone. Removed by
    :meth:`cleanup`, or at exit of the process that made it (never by a forked child)."""

    def __init__(self, parent: Path | None = None) -> None:
        parent = Path(parent if parent is not None else tempfile.gettempdir())
        remove_orphans(parent)
        self.path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=parent))
        self._lock = _hold_lock(self.path / LOCK_NAME)
        self._finalizer = weakref.finalize(self, _remove_own, self.path, os.getpid(), self._lock)

    def cleanup(self) -> None:
        """Remove the folder and everything in it (idempotent)."""
        self._finalizer()


def _remove_own(path: Path, owner: int, lock: IO[bytes] | None) -> None:
    if os.getpid() != owner:  # a forked decoding process exiting: the folder is its parent's
        return
    shutil.rmtree(path, ignore_errors=True)
    if lock is not None:
        lock.close()


def _hold_lock(path: Path) -> IO[bytes] | None:
    """An open, exclusively ``flock``-ed file (released by the kernel when its process dies)."""
    if fcntl is None:  # pragma: no cover
        return None
    fh = open(path, "wb")  # noqa: SIM115 - held open for the folder's life
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a filesystem without flock: the process id alone tells
        fh.close()
        return None
    return fh


def remove_orphans(parent: Path) -> list[Path]:
    """Remove the scratch folders in ``parent`` whose process is gone; return them.

    A folder is removed only when its name is :data:`SCRATCH_PREFIX` ``<pid>-XXXXXXXX``, it is
    this user's, no process ``pid`` exists (``kill(pid, 0)``) and its lock file is not held
    (a live process of another PID namespace sharing the folder keeps its lock)."""
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    uid = getattr(os, "getuid", lambda: None)()
    for entry in entries:
        match = _SCRATCH_NAME.fullmatch(entry.name)
        if match is None or not _owned_folder(entry, uid) or _alive(int(match[1])):
            continue
        path = Path(entry.path)
        if _lock_held(path / LOCK_NAME):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _owned_folder(entry: os.DirEntry[str], uid: int | None) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False) and (uid is None or entry.stat(follow_symlinks=False).st_uid == uid)
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts; pid 0 and below never tested)."""
    if pid <= 0 or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, another user's
        return True
    return True


def _lock_held(path: Path) -> bool:
    if fcntl is None:  # pragma: no cover
        return False
    try:
        with open(path, "rb") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:
                return False
    except OSError:  # no lock file (killed before it was made)
        return False
    return False


# ------------------------------------------------------------------ unpacking


def unpack(archive: storage.Location, into: Path, limits: ArchiveLimits | None = None,
           label: str | None = None) -> list[Member]:
    """Unpack the members of the tar archive ``archive`` (plain or gzip; a local file or an object,
    read as one forward stream either way: :func:`trace_report.storage.open_input`) into the
    folder ``into``; errors name it as ``label`` (default: its path or URL).

    Returns every member but folders, in archive order. Raises :class:`InputError` (naming
    ``archive!member``) when a limit of ``limits`` is passed, for a damaged archive, a
    compression other than gzip, or a write that fails (a full disk); what was written stays in
    ``into`` for the caller to remove (:class:`Scratch`)."""
    limits = limits or ArchiveLimits()
    label = label or (storage.shown(archive) if storage.is_url(archive) else printable(archive))
    try:
        with storage.open_input(archive) as opened:
            raw = _Rewound(opened)
            guard = _Guard(label, raw, storage.stat(archive).size, into, limits)
            stream: _Inflated | _Rewound = _Inflated(raw, guard) if _is_gzip(raw, label) else raw
            with tarfile.open(fileobj=stream, mode="r|", bufsize=TAR_BLOCK) as tar:
                members = list(_members(tar, into, guard))
            while stream.read(COPY_BYTES):  # to the end of the gzip stream: zlib checks its CRC
                pass
            return members
    except (tarfile.TarError, EOFError, zlib.error, UnicodeError) as exc:
        raise InputError(f"{label}: cannot read tar archive ({exc})") from exc
    except OSError as exc:
        where = printable(exc.filename) if exc.filename else label
        raise InputError(f"{label}: cannot unpack the tar archive ({exc.strerror or exc}: {where})") from exc


class _Rewound:
    """A forward stream whose first bytes, once looked at (:meth:`peek`), are read again."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw, self.head = raw, b""

    def peek(self, n: int) -> bytes:
        if len(self.head) < n:
            self.head += self.raw.read(n - len(self.head))
        return self.head[:n]

    def read(self, n: int = -1) -> bytes:
        if not self.head:
            return self.raw.read(n)
        out, self.head = (self.head, b"") if n < 0 or n >= len(self.head) else (self.head[:n], self.head[n:])
        return out + self.raw.read(n - len(out)) if n > len(out) else out

    def tell(self) -> int:
        return self.raw.tell() - len(self.head)


def _is_gzip(raw: _Rewound, label: str) -> bool:
    """Whether the archive is gzip-compressed; refuses the other compressions tarfile knows."""
    head = raw.peek(6)
    for magic, name in _COMPRESSED.items():
        if head.startswith(magic):
            raise InputError(f"{label}: a {name}-compressed tar archive, which is not read; "
                             "unpack it, or give it as .tar or .tar.gz")
    return head.startswith(GZIP_MAGIC)


class _Inflated:
    """The decompressed bytes of a gzip file, at most ``n`` per :meth:`read` (whatever one
    compressed block expands to), with the compressed bytes used so far (:meth:`consumed`).
    zlib checks each member's CRC-32 and size at its end; concatenated members and zero padding
    after them are read as gzip allows. Everything inflated counts against ``max_ratio``
    (:meth:`_Guard.inflated`: tar headers and padding too), beside the files written."""

    def __init__(self, raw: _Rewound, guard: _Guard) -> None:
        self.raw, self.guard = raw, guard
        guard.consumed = self.consumed
        self.inflate = zlib.decompressobj(wbits=31)
        self.pending = b""  # compressed bytes read and not yet inflated
        self.raw_bytes = 0
        self.raw_eof = False
        self.out_bytes = 0

    def consumed(self) -> int:
        return self.raw_bytes - len(self.pending)

    def read(self, n: int = -1) -> bytes:
        n = n if n > 0 else COPY_BYTES
        while True:
            if not self.pending and not self.raw_eof:
                self.pending = self.raw.read(COPY_BYTES)
                self.raw_bytes += len(self.pending)
                self.raw_eof = not self.pending
            if not self.pending:
                if not self.inflate.eof:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
                return b""
            if self.inflate.eof:
                self.pending = self.pending.lstrip(b"\0")
                if not self.pending:
                    continue
                self.inflate = zlib.decompressobj(wbits=31)
            out = self.inflate.decompress(self.pending, n)
            self.pending = self.inflate.unused_data if self.inflate.eof else self.inflate.unconsumed_tail
            if out:
                self.out_bytes += len(out)
                self.guard.inflated(self.out_bytes)
                return out


def _members(tar: tarfile.TarFile, into: Path, guard: _Guard) -> Iterator[Member]:
    extracted: dict[str, Path] = {}
    for n, info in enumerate(tar):
        if info.isdir():
            continue
        if info.isfile():
            target = into / scratch_name(n, info.name)
            _copy(tar, info, target, guard)
            extracted[posixpath.normpath(info.name)] = target
            yield Member(info.name, target)
        elif info.islnk():
            target = extracted.get(posixpath.normpath(info.linkname))
            why = f"a hard link to {printable(info.linkname)}, which is not a regular file before it in the archive"
            yield Member(info.name, target, "" if target else why)
        elif info.issym():
            yield Member(info.name, None, f"a symbolic link (to {printable(info.linkname)}), not followed")
        else:
            yield Member(info.name, None, f"not a regular file ({_KINDS.get(info.type, 'a special member')})")


_KINDS = {tarfile.FIFOTYPE: "a FIFO", tarfile.CHRTYPE: "a character device", tarfile.BLKTYPE: "a block device"}


def scratch_name(n: int, name: str) -> str:
    """The file name of the ``n``-th member in the scratch folder: ``NNNNN-`` then the member's
    base name with every character but ASCII letters, digits, ``.``, ``_`` and ``-`` replaced by
    ``_``, cut to its last 100 characters (its suffixes, which tell formats apart, are kept); so
    never longer than a file system allows, whatever the member's name."""
    base = _SAFE.sub("_", posixpath.basename(name.rstrip("/")))
    return f"{n:05d}-{base[-100:]}"


def _copy(tar: tarfile.TarFile, info: tarfile.TarInfo, target: Path, guard: _Guard) -> None:
    guard.begin(info.name, info.size)
    src = tar.extractfile(info)
    if src is None:  # pragma: no cover - a regular member always has a file object
        return
    with src, open(target, "xb") as dst:
        while chunk := src.read(COPY_BYTES):
            guard.count(len(chunk))
            dst.write(chunk)
    guard.end()


class _Guard:
    """Counts the bytes written (of the member, of the archive) against :class:`ArchiveLimits`
    and the archive's bytes used so far (``consumed``: exact for gzip, :class:`_Inflated`; for a
    plain tar its position, at most :data:`TAR_BLOCK` ahead)."""

    def __init__(self, label: str, raw: _Rewound, archive_bytes: int, into: Path, limits: ArchiveLimits) -> None:
        self.label, self.archive_bytes, self.into, self.limits = label, archive_bytes, into, limits
        self.consumed: Callable[[], int] = raw.tell  # replaced by :class:`_Inflated` for gzip
        self.total = 0
        self.member = 0
        self.member_label = label

    def begin(self, name: str, size: int) -> None:
        """Check a member's size from its header before anything of it is written."""
        self.member_label = f"{self.label}!{printable(name)}"
        self.member = 0
        self._check_sizes(size, self.total + size)
        ratio = (self.total + size) / max(1, self.archive_bytes)
        if self._over_ratio(self.total + size, ratio):
            raise InputError(self._bomb(ratio, f": {_size(size)} from an archive of {_size(self.archive_bytes)}"))
        free = shutil.disk_usage(self.into).free
        if size > free:
            raise InputError(f"{self.member_label}: unpacks to {_size(size)} and the temporary folder "
                             f"{printable(self.into.parent)} has {_size(free)} free; unpack the archive "
                             "elsewhere and give the folder, or set TMPDIR")

    def count(self, n: int) -> None:
        """Count ``n`` more bytes about to be written; raise before a limit would be passed."""
        self.member += n
        self.total += n
        self._check_sizes(self.member, self.total)
        self.inflated(self.total)

    def end(self) -> None:
        """The member is written: what is read next is the archive's."""
        self.member_label = self.label

    def inflated(self, unpacked: int) -> None:
        """Check the ratio of ``unpacked`` bytes (written, or inflated from gzip) to the bytes used."""
        ratio = unpacked / max(1, self.consumed())
        if self._over_ratio(unpacked, ratio):
            raise InputError(self._bomb(ratio, f" after {unpacked >> 20} MB"))

    def _check_sizes(self, member: int, total: int) -> None:
        lim = self.limits
        if lim.member_bytes and member > lim.member_bytes:
            raise InputError(f"{self.member_label}: unpacks to {_size(member)}, over the limit of "
                             f"{_size(lim.member_bytes)} per archive member; unpack the archive and "
                             "give the files")
        if lim.total_bytes and total > lim.total_bytes:
            raise InputError(f"{self.label}: unpacks to more than {_size(lim.total_bytes)}, the limit "
                             "per archive; unpack the archive and give the files")

    def _over_ratio(self, unpacked: int, ratio: float) -> bool:
        lim = self.limits
        return bool(lim.max_ratio) and unpacked > lim.ratio_after and ratio > lim.max_ratio

    def _bomb(self, ratio: float, how: str) -> str:
        return bomb_message(self.member_label, ratio, how, self.limits.max_ratio)


def bomb_message(label: str, ratio: float, how: str, limit: float) -> str:
    """The refusal of a decompression bomb, in the words of the gzip trace reader's
    (:mod:`trace_report.formats.kineto`)."""
    return (f"{label}: looks like a decompression bomb (ratio {ratio:.0f}:1{how}, limit {limit:g}:1); "
            "if the file is genuine, pass --max-ratio to `trace-report ingest` to override")


def _size(n: int) -> str:
    """Bytes for people: MB from 10 MB on, KB from 10 KB on, else bytes."""
    if n >= 10 << 20:
        return f"{n >> 20} MB"
    return f"{n >> 10} KB" if n >= 10 << 10 else f"{n} bytes"
