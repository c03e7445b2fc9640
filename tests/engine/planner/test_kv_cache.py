"""KV cache sizes: the formula by hand, and against what llama.cpp itself allocated."""

from __future__ import annotations

import pytest

from engine.planner import Config, estimate
from engine.planner.backends import BACKENDS
from engine.planner.kv_cache import cells, layer_bytes, row_bytes, type_fits_width
from engine.planner.profile import KVLayer
from engine.planner.tables import kv_tables
from tests.engine.planner.conftest import MIB

CPU, CUDA = BACKENDS["cpu"], BACKENDS["cuda"]


@pytest.mark.parametrize(
    ("kv_type", "width", "expected"),
    [
        ("f16", 1024, 2048),
        ("q8_0", 1024, 1024 // 32 * 34),
        ("q4_0", 1024, 1024 // 32 * 18),
        ("q8_0", 32, 34),
        ("q4_0", 256, 144),
    ],
)
def test_row_bytes(kv_type: str, width: int, expected: int) -> None:
    assert row_bytes(kv_type, width) == expected


def test_quantized_rows_need_whole_blocks() -> None:
    assert type_fits_width("q8_0", 192) and not type_fits_width("q8_0", 200)
    assert type_fits_width("f16", 200)


@pytest.mark.parametrize(
    ("n_ctx", "window", "ubatch", "swa_full", "expected"),
    [
        (4096, 0, 512, False, (4096, 4096)),
        (4000, 0, 512, False, (4096, 4096)),  # padded to 256
        (4096, 1024, 512, False, (4096, 1536)),  # window + ubatch
        (4096, 1000, 512, False, (4096, 1536)),  # padded to 256
        (1024, 1024, 512, False, (1024, 1024)),  # never more than the context
        (4096, 1024, 512, True, (4096, 4096)),  # swa_full: llama.cpp's default
        (4096, 512, 128, False, (4096, 768)),
    ],
)
def test_cells(n_ctx, window, ubatch, swa_full, expected) -> None:
    assert cells(n_ctx, window, ubatch, swa_full) == expected


def test_llama3_8b_per_token_cost(synthetic_profile) -> None:
    """32 layers x 8 KV heads x 128 x (K + V): 128 KiB per token in f16."""
    profile = synthetic_profile("llama3-8b", "Q4_K_M")
    for kv_type, per_token in (("f16", 131072), ("q8_0", 69632), ("q4_0", 36864)):
        est = estimate(profile, Config(n_ctx=8192, type_k=kv_type, type_v=kv_type), [])
        assert est.host.kv == 8192 * per_token


def test_cuda_pads_quantized_rows_that_are_not_multiples_of_512() -> None:
    layer = KVLayer(has_kv=True, swa=False, k_width=256, v_width=256)
    plain = layer_bytes(layer, (1024, 1024), "q8_0", "q8_0", None, CPU)
    padded = layer_bytes(layer, (1024, 1024), "q8_0", "q8_0", None, CUDA)
    # one extra row of 512 - 256 values per tensor, rounded up to the 128-byte alignment
    assert padded - plain == 2 * 384
    assert layer_bytes(layer, (1024, 1024), "f16", "f16", None, CUDA) == plain * 2 * 32 // 34


def test_transposed_v_uses_the_widest_v(synthetic_profile) -> None:
    layer = KVLayer(has_kv=True, swa=False, k_width=512, v_width=256)
    assert layer_bytes(layer, (256, 256), "f16", "f16", 1024, CPU) == 256 * (1024 + 2048)


def test_mla_layers_have_no_v() -> None:
    layer = KVLayer(has_kv=True, swa=False, k_width=576, v_width=0)
    assert layer_bytes(layer, (256, 256), "f16", "f16", None, CPU) == 256 * 576 * 2


def test_recurrent_state_is_per_sequence_not_per_token() -> None:
    layer = KVLayer(has_kv=False, swa=False, k_width=0, v_width=0, state_bytes=12345)
    assert layer_bytes(layer, (256, 256), "f16", "f16", None, CPU) == 12345
    assert layer_bytes(layer, (65536, 65536), "f16", "f16", None, CPU) == 12345


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
@pytest.mark.parametrize("shape", ["llama3-8b", "gemma3-12b", "qwen3-30b-a3b"])
def test_prefix_tables_agree_with_the_per_layer_formula(synthetic_profile, shape, backend):
    profile = synthetic_profile(shape, "Q4_K_M")
    b = BACKENDS[backend]
    for kv_type, v_trans in (("f16", False), ("q8_0", False), ("f16", True)):
        n_cells = cells(10240, profile.swa_window, 512, False)
        v_max = max(layer.v_width for layer in profile.kv_layers) if v_trans else None
        direct = [
            layer_bytes(lay, n_cells, kv_type, kv_type, v_max, b) for lay in profile.kv_layers
        ]
        tables = kv_tables(profile, kv_type, kv_type, v_trans, b)
        for lo, hi in ((0, profile.n_layer), (3, 17), (profile.n_layer - 1, profile.n_layer)):
            assert tables.bytes(lo, hi, n_cells) == sum(direct[lo:hi])


def _rows(measurements, shapes):
    for shape in shapes:
        for row in measurements[shape]:
            if row["ok"]:
                yield shape, row


def test_kv_bytes_match_llama_cpp_exactly(synthetic_profile, measurements) -> None:
    """llama_kv_cache logs K+V size per cache; the sum over caches must match to the byte
    (the log has two decimals of MiB)."""
    checked = 0
    shapes = ("llama3-8b", "gemma3-12b", "qwen3-30b-a3b", "mistral-7b", "mixtral-8x7b")
    for shape, row in _rows(measurements, shapes):
        profile = synthetic_profile(shape, "Q4_K_M")
        config = Config(
            n_ctx=row["n_ctx"],
            type_k=row["kv_type"],
            type_v=row["kv_type"],
            flash_attn=row["flash_attn"] == "on",
            n_ubatch=row["n_ubatch"],
        )
        predicted = estimate(profile, config, []).host.kv / MIB
        logged = sum(cache["mib"] for cache in row["kv_caches"])
        assert predicted == pytest.approx(logged, abs=0.01), (shape, row)
        checked += 1
    assert checked >= 100


def test_sliding_window_cache_cells_match_llama_cpp(synthetic_profile, measurements) -> None:
    profile = synthetic_profile("gemma3-12b", "Q4_K_M")
    for row in measurements["gemma3-12b"]:
        full, swa = cells(row["n_ctx"], profile.swa_window, row["n_ubatch"], False)
        assert [cache["cells"] for cache in row["kv_caches"]] == [full, swa]
        assert [cache["layers"] for cache in row["kv_caches"]] == [8, 40]
