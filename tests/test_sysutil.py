"""The allocator settings of the command line (:func:`trace_report.sysutil.tune_allocator`),
checked on glibc's own account of its heaps (``malloc_info(3)``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

# Four threads each allocate and hold 1 MB through libc, then glibc writes its heaps (arenas) as
# XML; the script prints how many it has. With `tune` it first calls tune_allocator().
SCRIPT = r"""
import ctypes, sys, threading
from trace_report.sysutil import _libc, tune_allocator
tuned = tune_allocator() if sys.argv[1] == "tune" else None
libc = _libc()
libc.malloc.restype = ctypes.c_void_p
libc.fopen.restype = ctypes.c_void_p
held, ready = [], threading.Barrier(5)
def work():
    held.append(libc.malloc(1 << 20))
    ready.wait()
    ready.wait()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
ready.wait()
fh = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(fh))
libc.fclose(ctypes.c_void_p(fh))
ready.wait()
for t in threads:
    t.join()
print(tuned, open(sys.argv[2]).read().count("<heap nr="))
"""


def _heaps(tmp_path, mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(tmp_path / "info.xml")],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], int(out[1])


def test_tune_allocator_keeps_the_threads_on_two_heaps(tmp_path):
    tuned, heaps = _heaps(tmp_path, "tune")
    assert tuned == "True"
    assert heaps == 2  # the main thread's and one that the four threads share


def test_without_it_each_thread_gets_a_heap(tmp_path):
    """The control: glibc's default gives the allocating threads heaps of their own (up to 8 per
    core), so the count above is the setting's doing."""
    _, heaps = _heaps(tmp_path, "default")
    assert heaps >= 3
