"""The multi-sequence page accounting (engine/hearth/page_pool.py), by tables."""

from __future__ import annotations

import pytest

from engine.hearth.page_pool import PagePool, PagesExhausted, pages_for


@pytest.mark.parametrize(
    ("positions", "page_size", "pages"),
    [(0, 64, 0), (1, 64, 1), (64, 64, 1), (65, 64, 2), (130, 64, 3), (7, 4, 2)],
)
def test_pages_for(positions, page_size, pages):
    assert pages_for(positions, page_size) == pages


# Each case: a list of (operation, sequence name, argument) and the pages each sequence holds
# after, in table order, with the free count.
CASES = {
    "grows a page at a time": (
        [("open", "a", 0), ("grow", "a", 3), ("grow", "a", 1), ("grow", "a", 1)],
        {"a": [0, 1]},
        6,
    ),
    "sequences take pages as they grow, interleaved": (
        [("open", "a", 0), ("open", "b", 0), ("grow", "a", 4), ("grow", "b", 5), ("grow", "a", 1)],
        {"a": [0, 3], "b": [1, 2]},
        4,
    ),
    "closing frees every page at once, reused next": (
        [("open", "a", 0), ("open", "b", 0), ("grow", "a", 8), ("close", "a", 0), ("grow", "b", 4)],
        {"b": [0]},
        7,
    ),
    "truncate gives back the pages past the kept positions": (
        [("open", "a", 0), ("grow", "a", 12), ("truncate", "a", 5), ("grow", "a", 1)],
        {"a": [0, 1]},
        6,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_pool_tables(case):
    operations, held, free = CASES[case]
    pool = PagePool(n_pages=8, page_size=4, max_sequences=4)
    ids = {}
    for op, name, arg in operations:
        if op == "open":
            ids[name] = pool.open()
        elif op == "close":
            pool.close(ids.pop(name))
        else:
            getattr(pool, op)(ids[name], arg)
    assert {name: list(pool.pages(seq)) for name, seq in ids.items()} == held
    assert pool.free_pages == free


def test_slots_follow_the_table():
    pool = PagePool(n_pages=8, page_size=4)
    a, b = pool.open(), pool.open()
    pool.grow(a, 2)
    pool.grow(b, 2)
    pool.grow(a, 4)  # a's second page comes after b's first
    assert [pool.slot(a, p) for p in (0, 3, 4, 5)] == [(0, 0), (0, 3), (2, 0), (2, 1)]
    assert pool.slot(b, 1) == (1, 1)
    with pytest.raises(IndexError):
        pool.slot(b, 4)


def test_running_out_changes_nothing_and_says_what_to_do():
    pool = PagePool(n_pages=4, page_size=4)
    a, b = pool.open(), pool.open()
    pool.grow(a, 10)  # 3 pages
    pool.grow(b, 3)  # 1 page: the pool is full
    before = (pool.pages(a), pool.pages(b), pool.length(a), pool.length(b))
    with pytest.raises(PagesExhausted, match=r"KV cache is full.*Retry when others finish"):
        pool.grow(b, 2)
    assert (pool.pages(a), pool.pages(b), pool.length(a), pool.length(b)) == before
    pool.grow(b, 1)  # the room left in b's own page is still there
    pool.close(a)
    assert pool.free_pages == 3
    pool.grow(b, 2)
    assert pool.length(b) == 6


def test_sequence_ids_are_bounded_and_reused():
    pool = PagePool(n_pages=4, page_size=4, max_sequences=2)
    a, b = pool.open(), pool.open()
    assert (a, b) == (0, 1)
    with pytest.raises(PagesExhausted, match="All 2 sequences"):
        pool.open()
    pool.close(a)
    assert pool.open() == 0
    assert pool.sequences == (0, 1)


def test_grow_returns_the_first_new_position():
    pool = PagePool(n_pages=4, page_size=4)
    a = pool.open()
    assert (pool.grow(a, 3), pool.grow(a, 2), pool.length(a), pool.capacity(a)) == (0, 3, 5, 8)
    with pytest.raises(ValueError):
        pool.truncate(a, 6)


@pytest.mark.parametrize(
    ("n_rows", "max_rows", "bucket"),
    [(1, 64, 1), (3, 64, 4), (16, 64, 16), (17, 64, 32), (64, 64, 64), (5, 6, 6), (6, 6, 6)],
)
def test_a_batch_takes_the_smallest_graph_bucket_that_holds_it(n_rows, max_rows, bucket):
    from engine.hearth.batch_graph import bucket_for, buckets_up_to

    assert bucket_for(n_rows, buckets_up_to(max_rows)) == bucket
    assert buckets_up_to(max_rows)[-1] == max_rows


# Shared prefixes: pages of 4 positions, 8 pages. Each case runs steps on named sequences and
# checks each one's pages and length, the refcounts of some pages, the copies made and the
# free count. "A" is a prompt of 10 tokens: two full pages and two tokens of a third.
A = list(range(100, 110))


def _run(steps, n_pages=8):
    pool = PagePool(n_pages=n_pages, page_size=4, max_sequences=4)
    ids, copies = {}, []
    for op, name, arg in steps:
        if op == "open":
            ids[name] = pool.open(*arg)
        elif op == "grow":
            pool.grow(ids[name], arg)
            copies += pool.take_copies()
        elif op == "publish":
            pool.publish(ids[name], arg)
        elif op == "truncate":
            pool.truncate(ids[name], arg)
        elif op == "close":
            pool.close(ids.pop(name))
    return pool, ids, copies


SHARING = {
    "a prefix published, then opened by reference: full pages shared, nothing copied": (
        [("open", "a", ()), ("grow", "a", 10), ("publish", "a", A), ("open", "b", ([*A, 7],))],
        {"a": ([0, 1, 2], 10), "b": ([0, 1], 8)},
        {0: 3, 1: 3, 2: 1},  # a, b and the index; a's partial page 2 is neither indexed nor shared
        [],
        5,
    ),
    "the match ends inside a page: that page is shared, then copied on the first write": (
        [("open", "a", ()), ("grow", "a", 12), ("publish", "a", [*A, 1, 2]),
         ("open", "b", ([*A[:9], 55, 56],)), ("grow", "b", 2)],
        {"a": ([0, 1, 2], 12), "b": ([0, 1, 3], 11)},
        {0: 3, 1: 3, 2: 2, 3: 1},
        [(2, 3)],
        4,
    ),
    "the last prompt token is always computed (limit)": (
        [("open", "a", ()), ("grow", "a", 8), ("publish", "a", A[:8]), ("open", "b", (A[:8], 7))],
        {"a": ([0, 1], 8), "b": ([0, 1], 7)},
        {0: 3, 1: 3},
        [],
        6,
    ),
    "a closed sequence's full pages stay indexed (and count as free), the rest are freed": (
        [("open", "a", ()), ("grow", "a", 10), ("publish", "a", A), ("close", "a", None)],
        {},
        {0: 1, 1: 1, 2: 0},
        [],
        8,
    ),
    "one sharer closing leaves the other's pages; only its own unshared page is freed": (
        [("open", "a", ()), ("grow", "a", 10), ("publish", "a", A), ("open", "b", (A,)),
         ("grow", "b", 2), ("close", "a", None)],
        {"b": ([0, 1, 3], 10)},
        {0: 2, 1: 2, 2: 0, 3: 1},
        [],
        5,
    ),
    "a truncate into a published page: the next write copies it": (
        [("open", "a", ()), ("grow", "a", 8), ("publish", "a", A[:8]), ("truncate", "a", 6),
         ("grow", "a", 1)],
        {"a": ([0, 2], 7)},
        {0: 2, 1: 1, 2: 1},
        [(1, 2)],
        6,
    ),
    "indexed pages nobody holds are evicted, least recently used first, when pages run short": (
        [("open", "a", ()), ("grow", "a", 8), ("publish", "a", A[:8]), ("close", "a", None),
         ("open", "c", ()), ("grow", "c", 28)],
        {"c": ([1, 2, 3, 4, 5, 6, 7], 28)},  # the chain's last page went first; its first stays
        {0: 1, 1: 1},
        [],
        1,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SHARING))
def test_shared_prefix_tables(case):
    steps, held, refs, copies, free = SHARING[case]
    pool, ids, got_copies = _run(steps)
    got = {name: (list(pool.pages(s)), pool.length(s)) for name, s in ids.items()}
    assert got == held
    assert {page: pool.refs(page) for page in refs} == refs
    assert got_copies == copies
    assert pool.free_pages == free


def test_a_later_page_is_matched_only_after_the_same_earlier_pages():
    pool, _ids, _ = _run([("open", "a", ()), ("grow", "a", 8), ("publish", "a", A[:8])])
    # the same second page after a different first page: the chained key does not match
    assert pool.match([9, 9, 9, 9, *A[4:8]]) == ([], 0)
    assert pool.match(A[:8]) == ([0, 1], 8)
    assert pool.match(A[:6]) == ([0, 1], 6)  # the second page holds the last two only in part


def test_running_out_with_shared_pages_changes_nothing():
    pool, ids, _ = _run(
        [("open", "a", ()), ("grow", "a", 10), ("publish", "a", A), ("open", "b", ([*A[:9], 1],))],
        n_pages=3,
    )
    b = ids["b"]
    before = (pool.pages(b), pool.length(b), [pool.refs(i) for i in range(3)])
    with pytest.raises(PagesExhausted, match="KV cache is full"):
        pool.grow(b, 1)  # its partial page must be copied, and no page is free
    assert (pool.pages(b), pool.length(b), [pool.refs(i) for i in range(3)]) == before
    assert pool.take_copies() == []
