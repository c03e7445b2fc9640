"""engine/hearth/host_pages.py: huge pages asked for where ggml streams its experts."""

from __future__ import annotations

import ctypes
import mmap
import sys
from pathlib import Path

import pytest

from engine.hearth.host_pages import (
    HUGE_PAGE,
    collapse_to_huge_pages,
    huge_page_span,
    prefer_huge_pages,
)

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("address", "nbytes", "span"),
    [
        (0, 2 * MIB, (0, 2 * MIB)),
        (64, 4 * MIB, (2 * MIB, 2 * MIB)),  # ggml's 64-byte aligned base: the first page partial
        (2 * MIB - 64, 4 * MIB + 64, (2 * MIB, 4 * MIB)),
        (64, 2 * MIB, None),  # one partial page at each end, no whole one
        (4 * MIB, 0, None),
        (10 * MIB + 1, 7 * MIB, (12 * MIB, 4 * MIB)),
    ],
)
def test_the_span_is_the_whole_huge_pages_inside(address, nbytes, span):
    assert huge_page_span(address, nbytes) == span


def _thp_setting() -> str | None:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    return text.split("[")[1].split("]")[0] if "[" in text else None


def _smaps_entry(start: int) -> dict[str, str]:
    """This process's /proc/self/smaps fields of the mapping that holds `start`."""
    fields: dict[str, str] = {}
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= start < hi
        elif inside:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise is Linux's here")
def test_a_buffer_asked_for_huge_pages_becomes_eligible_for_them():
    """Under `madvise` (this host's setting, and the H200 hosts'), a range becomes eligible
    only once asked for; under `always` it is anyway, under `never` never."""
    setting = _thp_setting()
    if setting not in ("madvise", "always"):
        pytest.skip(f"transparent huge pages are {setting!r} here")
    region = mmap.mmap(-1, 8 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    start, _ = huge_page_span(address, 8 * MIB)
    before = _smaps_entry(start).get("THPeligible")
    if before is None:
        pytest.skip("this kernel's smaps has no THPeligible field")
    assert prefer_huge_pages(address, 8 * MIB)
    after = _smaps_entry(start)
    assert after["THPeligible"] == "1"
    if setting == "madvise":
        assert before == "0"
    del after
    region.close()


def test_a_range_without_a_whole_huge_page_is_left_alone():
    assert not prefer_huge_pages(HUGE_PAGE + 64, HUGE_PAGE - 128)
    assert not collapse_to_huge_pages(HUGE_PAGE + 64, HUGE_PAGE - 128)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise is Linux's here")
def test_a_written_range_on_small_pages_is_collapsed_onto_huge_ones():
    """A range written on small pages (never asked for huge ones) is on huge pages once the
    kernel takes the collapse; a kernel before 6.1 refuses it (EINVAL), and one with no huge
    page to give says so (EAGAIN, ENOMEM): each is a False, nothing raised."""
    import errno

    if _thp_setting() == "never":
        pytest.skip("transparent huge pages are off here")
    region = mmap.mmap(-1, 8 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    region.write(b"\x01" * (8 * MIB))  # small pages: the range was not asked for huge ones
    start, length = huge_page_span(address, 8 * MIB)
    if _thp_setting() == "madvise":
        assert _smaps_entry(start).get("AnonHugePages", "0 kB") == "0 kB"
    collapsed = collapse_to_huge_pages(address, 8 * MIB)
    if collapsed:
        huge_kb = int(_smaps_entry(start)["AnonHugePages"].split()[0])
        assert huge_kb >= length // 1024
        assert region[:4] == b"\x01" * 4 and region[-4:] == b"\x01" * 4
    else:
        assert ctypes.get_errno() in (errno.EINVAL, errno.EAGAIN, errno.ENOMEM)
    region.close()
