"""Reading a header over HTTP Range requests, against a local server (127.0.0.1 only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.gguf import GGUFError, GGUFInternalError, GGUFSourceError, read_model_info
from engine.gguf.remote import HTTPRangeSource, HubFileSource
from engine.gguf.summary import to_dict
from engine.gguf.values import ValueType
from tests.engine.gguf.craft import Builder
from tests.engine.gguf.range_server import RangeServer

KIB = 1024
RESOLVE = "/org/model/resolve/main/model.gguf"


def big_model(n_tokens: int = 20_000, data_bytes: int = 4 << 20) -> tuple[bytes, int]:
    """A header of a few hundred KiB (a vocabulary) followed by `data_bytes` of weights."""
    b = Builder().header(1, 3)
    b.kv("general.architecture", ValueType.STRING, "llama")
    b.kv("llama.block_count", ValueType.UINT32, 1)
    b.kv_array("tokenizer.ggml.tokens", ValueType.STRING, [f"token-{i}" for i in range(n_tokens)])
    b.tensor("blk.0.ffn_up.weight", (data_bytes // 4,), "F32", 0)
    header_end = len(b.buf)
    b.pad().raw(bytes(data_bytes))
    return b.bytes(), header_end


def hub_source(server: RangeServer, **kwargs) -> HubFileSource:
    return HubFileSource("org/model", "model.gguf", endpoint=server.url, token=False, **kwargs)


def test_remote_header_fetches_only_the_header_plus_one_chunk(
    range_server: RangeServer, tmp_path: Path
) -> None:
    data, header_end = big_model()
    local = tmp_path / "local.gguf"
    local.write_bytes(data)
    range_server.serve(RESOLVE, data)
    source = hub_source(range_server, first_read=8 * KIB, max_read=32 * KIB)
    info = read_model_info(source)

    assert info.header_bytes == header_end
    assert info.vocab_size == 20_000 and info.file_size == len(data)
    assert to_dict(info) == {**to_dict(read_model_info(local)), "source": source.name}
    # the bytes fetched stay within the header plus one read chunk, far from the whole file
    assert range_server.bytes_sent == source.bytes_fetched
    assert source.bytes_fetched <= header_end + source.max_read
    assert source.bytes_fetched < len(data) // 10
    offsets = [offset for offset, _ in source.requests]
    assert offsets[0] == 0 and all(o < header_end for o in offsets)  # none starts past it
    assert range_server.requests[0][1] == f"bytes=0-{8 * KIB - 1}"  # started small
    assert len(source.requests) > 3  # and grew as the header needed


def test_hf_endpoint_environment_variable_is_honoured(
    range_server: RangeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _ = big_model(n_tokens=10, data_bytes=1024)
    range_server.serve("/org/model/resolve/v1.0/sub/model.gguf", data)
    monkeypatch.setenv("HF_ENDPOINT", range_server.url)
    source = HubFileSource("org/model", "sub/model.gguf", revision="v1.0", token=False)
    assert source.url == range_server.url + "/org/model/resolve/v1.0/sub/model.gguf"
    assert source.name == "hf://org/model/sub/model.gguf@v1.0"
    assert read_model_info(source).vocab_size == 10


def test_redirect_to_storage_keeps_the_range(range_server: RangeServer) -> None:
    data, header_end = big_model(n_tokens=5000)
    range_server.serve("/storage/abc123", data)
    range_server.redirects[RESOLVE] = range_server.url + "/storage/abc123"
    source = hub_source(range_server, first_read=4 * KIB, max_read=16 * KIB)
    assert read_model_info(source).vocab_size == 5000
    assert source.bytes_fetched <= header_end + 16 * KIB
    storage = [r for r in range_server.requests if r[0] == "/storage/abc123"]
    assert storage and all(status == 206 for _, _, status in storage)


def test_missing_file_is_a_source_error(range_server: RangeServer) -> None:
    with pytest.raises(GGUFSourceError, match=r"HTTP 404.*not found"):
        read_model_info(hub_source(range_server))


def test_server_without_range_support(range_server: RangeServer) -> None:
    range_server.honour_range = False
    small, _ = big_model(n_tokens=10, data_bytes=1 << 20)
    range_server.serve(RESOLVE, small)
    source = hub_source(range_server, first_read=64 * KIB)
    assert read_model_info(source).vocab_size == 10  # the header came in the first read
    assert source.bytes_fetched == 64 * KIB  # and the reader hung up after it

    large, _ = big_model(n_tokens=20_000)
    range_server.serve(RESOLVE, large)
    with pytest.raises(GGUFSourceError, match="does not support ranges"):
        read_model_info(hub_source(range_server, first_read=8 * KIB))


def test_remote_file_truncated_inside_the_header(range_server: RangeServer) -> None:
    data, header_end = big_model()
    range_server.serve(RESOLVE, data[: header_end // 2])
    with pytest.raises(GGUFError) as caught:
        read_model_info(hub_source(range_server, first_read=8 * KIB, max_read=32 * KIB))
    assert not isinstance(caught.value, GGUFInternalError)
    assert caught.value.offset < header_end // 2  # found inside what the file holds
    assert "are left" in caught.value.detail or "ends at byte" in caught.value.detail


def test_unreachable_server_is_a_source_error() -> None:
    server = RangeServer()
    url = server.url
    server.close()
    source = HTTPRangeSource(url + "/gone.gguf")
    with pytest.raises(GGUFSourceError, match=r"GET .* failed"):
        read_model_info(source, deadline_s=5)


def test_starter_model_over_http_reads_only_its_header(
    range_server: RangeServer, starter_model: Path
) -> None:
    range_server.serve(RESOLVE, starter_model)
    source = hub_source(range_server)  # the default chunk sizes
    info = read_model_info(source)
    local = read_model_info(starter_model)
    assert to_dict(info, tensors=True) == {**to_dict(local, tensors=True), "source": source.name}
    assert source.bytes_fetched <= local.header_bytes + source.max_read
    assert range_server.bytes_sent < starter_model.stat().st_size // 20
