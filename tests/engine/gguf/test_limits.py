"""Bounds: time (a deadline per file), memory (tracemalloc), bytes fetched (the header cap),
and a 128k-entry vocabulary read quickly and correctly."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from gguf import GGUFWriter

from engine.gguf import (
    MAX_HEADER_BYTES,
    BytesSource,
    GGUFDeadlineError,
    GGUFError,
    GGUFSourceError,
    read_model_info,
)
from engine.gguf.cursor import Cursor, Deadline
from engine.gguf.header import HeaderParser
from engine.gguf.values import ValueType
from tests.engine.gguf.craft import Builder

N_TOKENS = 128_256  # Llama 3's vocabulary size
N_MERGES = 280_000


@pytest.fixture(scope="module")
def vocab_128k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("vocab") / "vocab-128k.gguf"
    w = GGUFWriter(path, "llama")
    w.add_block_count(32)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}" for i in range(N_TOKENS)])
    w.add_token_types([1] * N_TOKENS)
    w.add_token_merges([f"a{i} b{i}" for i in range(N_MERGES)])
    w.add_bos_token_id(128_000)
    w.add_eos_token_id(1025)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_128k_vocabulary_is_read_quickly_and_kept_small(vocab_128k: Path) -> None:
    read_model_info(vocab_128k)  # warm the page cache
    started = time.perf_counter()
    info = read_model_info(vocab_128k)
    elapsed = time.perf_counter() - started
    assert info.vocab_size == N_TOKENS
    assert (info.bos_token, info.eos_token) == ("tok128000", "tok1025")
    assert info.metadata["tokenizer.ggml.merges"].length == N_MERGES
    assert info.metadata["tokenizer.ggml.merges"].values is None
    # The benchmark (benchmarks/bench_gguf_header.py) shows the real figure; this bound only
    # catches a slide back to per-token Python objects on a slow, shared CI machine.
    assert elapsed < 1.0, elapsed


def test_memory_is_bounded_by_the_header(tmp_path: Path) -> None:
    # 32k tokens and 32k merges: small enough to trace quickly, large enough that keeping a
    # Python object per string (about 60 bytes each) would break the bound.
    path = tmp_path / "vocab-32k.gguf"
    w = GGUFWriter(path, "llama")
    w.add_token_list([f"tok{i}" for i in range(32_000)])
    w.add_token_merges([f"a{i} b{i}" for i in range(32_000)])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    header_bytes = read_model_info(path).header_bytes
    tracemalloc.start()
    try:
        read_model_info(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the header bytes, one read chunk (1 MiB for local files) in flight, a small constant
    assert peak < header_bytes + 2.5 * 1024 * 1024, (peak, header_bytes)


def test_hostile_counts_cost_no_memory() -> None:
    hostile = [
        Builder().header(0, 1).string("k").i32(ValueType.ARRAY).i32(ValueType.STRING).u64(1 << 62),
        Builder().header(0, 1).string("k").i32(ValueType.ARRAY).i32(ValueType.UINT8).u64(1 << 40),
        Builder().header(0, 1).string("k").i32(ValueType.STRING).u64(1 << 33),
        Builder().header(1 << 16, 1 << 16),
    ]
    for b in hostile:
        data = b.raw(bytes(64)).bytes()
        tracemalloc.start()
        try:
            with pytest.raises(GGUFError):
                read_model_info(BytesSource(data))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 256 * 1024, peak


def test_string_lookup_in_long_arrays(vocab_128k: Path) -> None:
    from engine.gguf.source import LocalFileSource

    with LocalFileSource(vocab_128k) as source:
        parser = HeaderParser(Cursor(source, Deadline(5)))
        raw = parser.parse()
        for i in (0, 1, 1023, 1024, 1025, 2047, 65_536, N_TOKENS - 1):
            assert parser.array_string(raw, "tokenizer.ggml.tokens", i) == f"tok{i}"
            assert parser.array_string(raw, "tokenizer.ggml.merges", i) == f"a{i} b{i}"
        assert parser.array_string(raw, "tokenizer.ggml.tokens", N_TOKENS) is None
        assert parser.array_string(raw, "tokenizer.ggml.tokens", -1) is None


def test_deadline_zero_stops_at_once() -> None:
    with pytest.raises(GGUFDeadlineError):
        read_model_info(BytesSource(Builder().header(0, 0).bytes()), deadline_s=0)


class SlowSource(BytesSource):
    """A source that takes 50 ms per request, like a bad network."""

    def read(self, offset: int, length: int, timeout: float | None = None) -> bytes:
        time.sleep(0.05)
        return super().read(offset, length, timeout)


def test_slow_source_hits_the_deadline() -> None:
    b = Builder().header(0, 1)
    b.kv_array("tokenizer.ggml.tokens", ValueType.STRING, [f"t{i}" for i in range(50_000)])
    source = SlowSource(b.bytes(), first_read=512, max_read=512)
    started = time.perf_counter()
    with pytest.raises(GGUFDeadlineError, match=r"longer than 0\.3 s"):
        read_model_info(source, deadline_s=0.3)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("n_strings", "text"),
    [
        (20_000, "tok{}"),  # the count alone cannot fit under the cap
        (3_000, "a-thirty-byte-long-token-{:05}"),  # the count fits, the strings do not
    ],
)
def test_header_cap_stops_fetching(n_strings: int, text: str) -> None:
    b = Builder().header(0, 1)
    b.kv_array(
        "tokenizer.ggml.tokens", ValueType.STRING, [text.format(i) for i in range(n_strings)]
    )
    source = BytesSource(b.bytes(), first_read=4096, max_read=4096)
    cap = 64 * 1024
    assert source.size > cap
    with pytest.raises(GGUFError, match="under the 64 KiB header cap"):
        HeaderParser(Cursor(source, Deadline(5), header_cap=cap)).parse()
    assert source.bytes_read <= cap
    assert MAX_HEADER_BYTES == 64 * 1024 * 1024


def test_missing_and_odd_paths_are_source_errors(tmp_path: Path) -> None:
    with pytest.raises(GGUFSourceError, match="does not exist"):
        read_model_info(tmp_path / "nope.gguf")
    with pytest.raises(GGUFSourceError, match="not a regular file"):
        read_model_info(tmp_path)


def test_reader_never_uses_the_gguf_package() -> None:
    # gguf 0.19.0's GGUFReader hangs on hostile files; the reader must stay independent of it
    import engine.gguf

    package = Path(engine.gguf.__file__).parent
    for module in package.glob("*.py"):
        text = module.read_text()
        assert "import gguf" not in text and "from gguf" not in text, module.name
