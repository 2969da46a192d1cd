"""Keep freed array memory in the process for the next step (glibc only).

A training step allocates and frees the same few hundred KiB to MiB arrays over and over.
glibc's malloc, left to itself, serves each of them from fresh pages: an array past its
mmap threshold is a new mapping, and a freed block at the heap's top past the trim threshold
goes back to the kernel; either way the next array of that size is faulted in page by page
(about 160 page faults for one 512 x 64 layer norm, which then took 5x as long). Fixed
thresholds keep those blocks in the heap for reuse, as a GPU framework's caching allocator
keeps freed device memory: arrays up to ``MMAP_ABOVE`` come from the heap, and up to
``TRIM_ABOVE`` of free heap top stays with the process.

Only on Linux with glibc (where ``mallopt`` exists); elsewhere, in Pyodide, or with
``WEBGRAD_KEEP_FREED_MEMORY=0`` in the environment, malloc is left as it is.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_ABOVE = 32 << 20   # bytes: larger arrays are still mappings of their own
TRIM_ABOVE = 256 << 20  # bytes of free heap top kept before any goes back

_done = False


def keep_freed_memory() -> bool:
    """Set malloc's thresholds once per process; whether they were set."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux") or os.environ.get("WEBGRAD_KEEP_FREED_MEMORY", "1") == "0":
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_ABOVE)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_ABOVE))
    return _done
