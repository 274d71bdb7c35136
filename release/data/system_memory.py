"""Memory freed by numpy given back to the system (glibc): large arrays come and go while a
registry is read (index blocks, key blocks, chunk buffers), and glibc's allocator, which raises
its mmap threshold each time a large block is freed, would otherwise serve the next ones from
its heap, where freed memory stays in the process's resident size. Elsewhere: nothing."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["large_arrays_mapped", "give_back"]

_M_MMAP_THRESHOLD = -3
#: arrays of at least this many bytes are mapped on their own (returned to the system when freed)
MAP_BYTES = 1 << 20


@functools.lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:     # pragma: no cover - no C library to load
        return None


def large_arrays_mapped() -> bool:
    """Fix glibc's mmap threshold at :data:`MAP_BYTES` (once a process; no effect elsewhere)."""
    libc = _libc()
    return bool(libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, MAP_BYTES))


def give_back() -> bool:
    """Return the heap's free memory to the system (``malloc_trim(0)``; glibc only)."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))
