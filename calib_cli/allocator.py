"""The C allocator's settings for a command's large arrays (glibc only; elsewhere nothing).

glibc serves a block below its *mmap threshold* from a heap of the thread that asks, and keeps
what is freed there for that thread; it raises the threshold after each large block freed
(up to 32 MB). A streaming pass frees tens of thousands of NumPy temporaries of a few MB in
its worker threads, so the threshold climbs and arrays of 4-32 MB (a summary's columns, a
figure's atoms) stay in per-thread heaps that the main thread cannot reuse: the resident set
grows by what the workers once held. A fixed threshold of 4 MB keeps batch temporaries (2 MB)
in the heaps, where reusing them is fast, and gives every larger array back to the system
when it is freed. Measured: ``reliability`` at 1e7 rows 430-480 -> about 420 MB, at 1e8 rows
about 510 -> 400-440 MB, the same time (bench/RESULTS.md).

Two more settings keep those temporaries' pages: glibc gives the free top of a heap back to
the system past its *trim threshold* (128 kB), so each batch's 2 MB temporaries were faulted
in again (about 700,000 page faults, 1.5 s of system time at 1e8 rows); a trim threshold of
64 MB, and one heap for all threads (one arena: the workers' blocks are reused by whichever
thread asks next), bring that to about 170,000 faults and 0.6 s, 0.6 s less time at 1e8 rows.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["ARENAS", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_allocator"]

#: Blocks from this size on come from (and go back to) the system directly.
MMAP_THRESHOLD = 4 << 20
#: Free memory a heap keeps at its top before giving it back to the system.
TRIM_THRESHOLD = 64 << 20
#: Heaps (arenas) the threads share.
ARENAS = 1
#: glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def tune_allocator(threshold: int = MMAP_THRESHOLD) -> bool:
    """Set glibc's mmap threshold to ``threshold`` bytes for this process, its trim threshold
    to :data:`TRIM_THRESHOLD` and its arenas to :data:`ARENAS`; False (and no change) where
    the C library is not glibc or refuses.

    >>> tune_allocator() in (True, False)
    True
    """
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if not mallopt(_M_MMAP_THRESHOLD, int(threshold)):
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) and mallopt(_M_ARENA_MAX, ARENAS))
