"""Hypothesis fuzzing: mutated valid headers either parse or raise GGUFError, quickly, in
bounded memory, and never any other exception (the reader's own defects surface as
GGUFInternalError, which fails these tests)."""

from __future__ import annotations

import time
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.gguf import BytesSource, GGUFError, GGUFInternalError, ModelInfo, read_model_info
from tests.engine.gguf.craft import valid_model

FUZZ_EXAMPLES = 300
RANDOM_EXAMPLES = 150
TIME_LIMIT_S = 1.0
MEMORY_LIMIT = 2 * 1024 * 1024  # bytes at peak, for inputs of a few KiB

SEEDS = [valid_model(), valid_model(">"), valid_model(alignment=64), valid_model(alignment=1)]

U64_VALUES = [
    0,
    1,
    4,
    5,
    13,
    63,
    64,
    2**31 - 1,
    2**32 - 1,
    2**32,
    2**40,
    2**62,
    2**63 - 1,
    2**63,
    2**64 - 1,
]
U32_VALUES = [0, 1, 2, 3, 4, 5, 8, 9, 12, 13, 42, 43, 2**31 - 1, 2**31, 2**32 - 1]

position = st.integers(min_value=0, max_value=1 << 20)
mutation = st.one_of(
    st.tuples(st.just("flip"), position, st.integers(0, 7)),
    st.tuples(st.just("byte"), position, st.integers(0, 255)),
    st.tuples(st.just("u32"), position, st.sampled_from(U32_VALUES)),
    st.tuples(st.just("u64"), position, st.sampled_from(U64_VALUES)),
    st.tuples(st.just("insert"), position, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), position, st.integers(1, 16)),
    st.tuples(st.just("truncate"), position, st.just(0)),
)


def mutate(seed_index: int, mutations: list[tuple[str, int, object]]) -> bytes:
    seed = SEEDS[seed_index]
    data = bytearray(seed.bytes())
    header_end = seed.marks["header_end"]
    for kind, pos, arg in mutations:
        if not data:
            break
        # most mutations land in the header, where the parser looks; some anywhere
        at = pos % (header_end if pos % 8 else len(data)) % len(data)
        if kind == "flip":
            data[at] ^= 1 << arg
        elif kind == "byte":
            data[at] = arg
        elif kind in ("u32", "u64"):
            size = 4 if kind == "u32" else 8
            order = "big" if seed.order == ">" else "little"
            data[at : at + size] = arg.to_bytes(size, order)
        elif kind == "insert":
            data[at:at] = arg
        elif kind == "delete":
            del data[at : at + arg]
        else:
            del data[at:]
    return bytes(data)


def check_bounded(data: bytes) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = read_model_info(BytesSource(data), deadline_s=2.0)
    except GGUFInternalError:
        raise
    except GGUFError as err:
        assert err.field and 0 <= err.offset <= max(len(data), 24), str(err)
        result = None
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < TIME_LIMIT_S, elapsed
    assert peak < MEMORY_LIMIT, peak
    if result is not None:
        assert isinstance(result, ModelInfo)
        assert result.data_offset <= len(data)
        assert all(result.data_offset + t.offset + t.n_bytes <= len(data) for t in result.tensors)


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,  # the time bound is asserted inside, without Hypothesis's own overhead
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.integers(0, len(SEEDS) - 1), st.lists(mutation, min_size=1, max_size=6))
def test_mutated_headers_parse_or_fail_cleanly(seed_index: int, mutations) -> None:
    check_bounded(mutate(seed_index, mutations))


@settings(max_examples=RANDOM_EXAMPLES, deadline=None, derandomize=True, database=None)
@given(st.binary(max_size=20), st.binary(max_size=600))
def test_random_bytes_after_a_valid_prefix(counts: bytes, rest: bytes) -> None:
    check_bounded(b"GGUF\x03\x00\x00\x00" + counts + rest)


def test_seeds_are_valid() -> None:
    # the fuzzing starts from files that parse; otherwise it would only test the first check
    for seed in SEEDS:
        info = read_model_info(BytesSource(seed.bytes()))
        assert info.block_count == 2 and len(info.tensors) == 3
