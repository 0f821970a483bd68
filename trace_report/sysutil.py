"""Process-level settings: allocator tuning for the command line (never applied when used as a
library) and tying decoding workers to their parent."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def tune_allocator(mmap_threshold: int = 256 << 20, trim_threshold: int = 512 << 20) -> bool:
    """Keep glibc from mapping and unmapping every large buffer (pieces of several MB).

    By default glibc serves allocations over 128 KiB (growing adaptively) with ``mmap`` and
    returns them with ``munmap``, so every piece's buffers are page-faulted in again: half the
    system time of a large ingest. Raising ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD``
    (``mallopt(3)``) lets the heap reuse them. Forked decoding workers inherit the setting.
    Returns False where there is no glibc (macOS, musl): nothing changes there.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))


PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """In a worker process: ask the kernel to SIGKILL this process when its parent dies
    (``prctl(PR_SET_PDEATHSIG)``, Linux), ignore Ctrl-C (the parent handles it and shuts the
    workers down), and exit at once if the parent is already gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(1)
