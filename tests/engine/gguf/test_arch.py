"""Which layers use sliding-window attention, per architecture, as llama.cpp decides it."""

from __future__ import annotations

import pytest

from engine.gguf.arch import pattern_layers, sliding_window


def swa(layers) -> list[int]:
    return [i for i, on in enumerate(layers) if on]


@pytest.mark.parametrize(
    ("n_layer", "n_pattern", "dense_first", "expected_swa"),
    [
        (12, 6, False, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]),  # gemma3: every 6th layer global
        (6, 2, False, [0, 2, 4]),  # gemma2: alternate, SWA first
        (8, 4, True, [1, 2, 3, 5, 6, 7]),  # cohere2moe/laguna: global first
        (3, 1, False, []),  # pattern 1: no SWA layer (phi3's "disabled")
        (3, 0, False, [0, 1, 2]),  # pattern 0: every layer
    ],
)
def test_set_swa_pattern(n_layer, n_pattern, dense_first, expected_swa) -> None:
    assert swa(pattern_layers(n_layer, n_pattern, dense_first)) == expected_swa


def test_gemma3_needs_a_window_and_defaults_to_pattern_6() -> None:
    assert sliding_window("gemma3", 26, None, None, (1,) * 26) is None
    assert sliding_window("gemma3", 26, 0, None, (1,) * 26) is None
    window = sliding_window("gemma3", 26, 512, None, (1,) * 26)
    assert window is not None and window.size == 512 and window.kind == "standard"
    assert [i for i in range(26) if not window.layers[i]] == [5, 11, 17, 23]
    assert "default pattern 6" in window.rule


def test_pattern_from_the_file_wins() -> None:
    window = sliding_window("gemma3", 8, 1024, 4, (1,) * 8)
    assert window is not None and swa(window.layers) == [0, 1, 2, 4, 5, 6]
    window = sliding_window("gemma3", 4, 1024, (True, False, 1, 0), (1,) * 4)
    assert window is not None and swa(window.layers) == [0, 2]
    window = sliding_window("gemma4", 4, 1024, (1, 1), (1,) * 4)  # short array: rest global
    assert window is not None and swa(window.layers) == [0, 1]


def test_gemma2_has_a_default_window() -> None:
    window = sliding_window("gemma2", 4, None, None, (1,) * 4)
    assert window is not None and window.size == 4096 and swa(window.layers) == [0, 2]


def test_llama4_is_chunked_with_a_fixed_window_unless_zero() -> None:
    window = sliding_window("llama4", 8, 2048, None, (1,) * 8)
    assert window is not None and (window.kind, window.size) == ("chunked", 8192)
    assert swa(window.layers) == [0, 1, 2, 4, 5, 6]
    assert sliding_window("llama4", 8, 0, None, (1,) * 8) is None


def test_lfm2_uses_the_window_on_attention_layers_only() -> None:
    window = sliding_window("lfm2", 4, 256, None, (0, 8, 0, 8))
    assert window is not None and swa(window.layers) == [1, 3]
    assert sliding_window("lfm2", 4, None, None, (0, 8, 0, 8)) is None


def test_exaone4_only_for_the_64_layer_model() -> None:
    assert sliding_window("exaone4", 30, 4096, None, (1,) * 30) is None
    window = sliding_window("exaone4", 64, None, None, (1,) * 64)
    assert window is not None and window.size == 4096 and window.n_swa_layers == 48


def test_architectures_llama_cpp_does_not_window() -> None:
    assert sliding_window("qwen2", 4, 4096, None, (1,) * 4) is None
    assert sliding_window("llama", 4, 4096, 2, (1,) * 4) is None
    assert sliding_window(None, 4, 4096, 2, (1,) * 4) is None
    assert sliding_window("gemma4", 4, 1024, None, (1,) * 4) is None  # must list its layers


def test_deepseek4_windows_every_layer() -> None:
    window = sliding_window("deepseek4", 3, 128, None, (1,) * 3)
    assert window is not None and window.layers == (True, True, True)
