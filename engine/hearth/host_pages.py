"""Transparent huge pages for host memory that ggml streams through (Linux).

ggml's CPU kernels read a layer's experts once a token, front to back, at the memory's full
rate. On 4 KiB pages each page is a TLB entry of its own, and the cores' prefetchers stop at
every page boundary; on 2 MiB pages neither happens. Linux gives a process huge pages for its
anonymous memory where the system's setting is `always`, or `madvise` (common, and the H200
hosts') and the range asked for them with madvise(MADV_HUGEPAGE): ggml's own buffers do not
ask (ggml_aligned_malloc), so the repacked experts' buffers are asked for here, before anything
is written into them (the pages are made at the first write). Where the kernel had no huge
page free at that write (memory fragmented by earlier loads, pinned copies, the page cache),
the range is collapsed onto huge pages once written (MADV_COLLAPSE, Linux 6.1+: the kernel
compacts memory for them then); where that fails too, the range keeps small pages and nothing
fails.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

HUGE_PAGE = 2 * 1024 * 1024
MADV_HUGEPAGE = 14  # <sys/mman.h> on Linux
MADV_COLLAPSE = 25  # Linux 6.1+


def huge_page_span(address: int, nbytes: int) -> tuple[int, int] | None:
    """(start, length) of the whole huge pages inside [address, address + nbytes), or None
    when the range holds none."""
    start = -(-address // HUGE_PAGE) * HUGE_PAGE
    end = (address + nbytes) // HUGE_PAGE * HUGE_PAGE
    return (start, end - start) if end > start else None


@functools.cache
def _madvise():
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


def prefer_huge_pages(address: int, nbytes: int) -> bool:
    """Ask Linux for huge pages in [address, address + nbytes) (the whole 2 MiB pages inside);
    True if it took the request. Elsewhere, or for a range with no whole huge page, False."""
    span = huge_page_span(address, nbytes)
    madvise = _madvise()
    if span is None or madvise is None:
        return False
    return madvise(span[0], span[1], MADV_HUGEPAGE) == 0


def collapse_to_huge_pages(address: int, nbytes: int) -> bool:
    """Put the written range's whole 2 MiB pages on huge pages now (madvise MADV_COLLAPSE),
    where the first writes did not get them; True if the kernel did. False on kernels before
    6.1, where no huge page could be made for part of it, or for a range with none inside."""
    span = huge_page_span(address, nbytes)
    madvise = _madvise()
    if span is None or madvise is None:
        return False
    return madvise(span[0], span[1], MADV_COLLAPSE) == 0
