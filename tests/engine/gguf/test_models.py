"""The two starter models parse to known values.

The expected numbers were read from the files and checked once against the `gguf` package's
GGUFReader (a trusted reader for these trusted files, but far too slow to run in every test:
3 s and 11 s here).
"""

from __future__ import annotations

from pathlib import Path

from engine.gguf import read_model_info
from engine.gguf.summary import summary_lines


def test_smollm2_starter_model(starter_model: Path) -> None:
    info = read_model_info(starter_model)
    assert info.architecture == "llama"
    assert info.name == "Smollm2 135M 8k Lc100K Mix1 Ep2"
    assert info.size_label == "135M"
    assert (info.file_type, info.quant_name) == (3, "Q4_1")
    assert info.parameter_count == 134_515_008
    assert (info.context_length, info.block_count, info.embedding_length) == (8192, 30, 576)
    assert info.feed_forward_length == 1536
    assert (info.head_count, info.head_count_kv) == (9, 3)
    assert (info.key_length, info.value_length) == (64, 64)
    assert info.sliding_window is None
    assert not any(info.is_swa_layer(i) for i in range(30))
    assert info.expert_count is None and info.mla is None and info.recurrent is None
    assert (info.vocab_size, info.tokenizer_model, info.tokenizer_pre) == (49152, "gpt2", "smollm")
    assert (info.bos_token_id, info.bos_token) == (1, "<|im_start|>")
    assert (info.eos_token_id, info.eos_token) == (2, "<|im_end|>")
    assert info.chat_template is not None
    assert info.chat_template.startswith("{% for message in messages %}")
    assert info.split_count is None and not info.is_split
    assert (info.version, info.byte_order, info.alignment) == (3, "little", 32)
    assert (info.header_bytes, info.data_offset) == (1_785_664, 1_785_664)
    assert len(info.tensors) == 272
    by_type: dict[str, int] = {}
    for t in info.tensors:
        by_type[t.type_name] = by_type.get(t.type_name, 0) + t.n_bytes
    assert by_type == {"Q8_0": 30_081_024, "F32": 140_544, "Q4_1": 66_355_200}
    embd = info.tensor("token_embd.weight")
    assert embd is not None
    assert (embd.type_name, embd.shape, embd.n_bytes, embd.offset) == (
        "Q8_0",
        (576, 49152),
        30_081_024,
        0,
    )
    assert len(info.layer_weight_bytes) == 30
    assert set(info.layer_weight_bytes) == {2_216_448}
    assert info.nonlayer_weight_bytes == 30_083_328
    assert info.weight_bytes == sum(by_type.values())
    assert summary_lines(info)[0] == "Smollm2 135M 8k Lc100K Mix1 Ep2 (llama, 135M)"


def test_gemma3_270m_with_sliding_window_layers(gemma_model: Path) -> None:
    info = read_model_info(gemma_model)
    assert (info.architecture, info.name, info.size_label) == ("gemma3", "Gemma 3 270m", "270M")
    assert (info.file_type, info.quant_name) == (15, "Q4_K_M")
    assert info.parameter_count == 268_098_176
    assert (info.context_length, info.block_count, info.embedding_length) == (32768, 18, 640)
    assert (info.head_count, info.head_count_kv) == (4, 1)
    assert (info.key_length, info.value_length) == (256, 256)
    window = info.sliding_window
    assert window is not None
    assert (window.kind, window.size) == ("standard", 512)
    # no sliding_window_pattern key in the file: llama.cpp's gemma3 default of 6 applies,
    # so every 6th layer (5, 11, 17) attends globally and the other 15 use the window.
    global_layers = [i for i in range(18) if not info.is_swa_layer(i)]
    assert global_layers == [5, 11, 17]
    assert window.n_swa_layers == 15
    assert not info.is_swa_layer(18)  # past the last layer
    assert (info.vocab_size, info.tokenizer_model) == (262_144, "llama")
    assert (info.bos_token_id, info.bos_token, info.eos_token_id, info.eos_token) == (
        2,
        "<bos>",
        1,
        "<eos>",
    )
    assert info.chat_template is None
    assert (info.header_bytes, info.data_offset, info.file_size) == (
        6_525_112,
        6_525_120,
        253_113_024,
    )
    assert len(info.tensors) == 236
    by_type: dict[str, int] = {}
    for t in info.tensors:
        by_type[t.type_name] = by_type.get(t.type_name, 0) + t.n_bytes
    assert by_type == {
        "F32": 223_744,
        "Q8_0": 179_824_640,
        "Q5_0": 43_591_680,
        "Q4_K": 13_271_040,
        "Q6_K": 9_676_800,
    }
    assert sum(info.layer_weight_bytes) == 68_327_424
    assert (info.layer_weight_bytes[0], info.layer_weight_bytes[5]) == (3_995_648, 3_596_288)
    assert info.nonlayer_weight_bytes == 178_260_480
    tokens = info.metadata["tokenizer.ggml.tokens"]
    assert tokens.length == 262_144 and tokens.values is None  # kept as a length, not a list
