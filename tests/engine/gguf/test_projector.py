"""The vision projector's header: told from a model, its image tokens, its pairing."""

from __future__ import annotations

import pytest

from engine.gguf import read_model_info
from engine.gguf.model_info import ModelInfo
from engine.gguf.projector import (
    ProjectorInfo,
    is_projector,
    is_projector_name,
    mismatch,
    pick_projector_name,
    projector_info,
)
from testkit.tiny_vision import TINY_IMAGE_TOKENS, write_tiny_projector


def _info(metadata: dict, architecture: str | None = "clip", embd: int | None = None):
    return ModelInfo(
        source="/models/x/mmproj-F16.gguf", version=3, byte_order="<", alignment=32,
        header_bytes=0, data_offset=0, file_size=0, metadata=metadata,
        architecture=architecture, embedding_length=embd,
    )  # fmt: skip


@pytest.mark.parametrize(
    "name, expected",
    [
        ("mmproj-F16.gguf", True),
        ("gemma-3-4b-it-mmproj-bf16.gguf", True),
        ("sub/MMPROJ-model-f16.gguf", True),
        ("gemma-3-4b-it-Q4_K_M.gguf", False),
        ("projector.gguf", False),
    ],
)
def test_projector_names(name, expected):
    assert is_projector_name(name) is expected


@pytest.mark.parametrize(
    "metadata, architecture, expected",
    [
        ({"general.type": "mmproj"}, "whatever", True),
        ({}, "clip", True),
        ({"clip.has_vision_encoder": True}, None, True),
        ({"general.type": "model"}, "llama", False),
    ],
)
def test_projector_by_header(metadata, architecture, expected):
    assert is_projector(_info(metadata, architecture)) is expected


GEMMA3 = {"clip.projector_type": "gemma3", "clip.vision.image_size": 896,
          "clip.vision.patch_size": 14, "clip.vision.projection_dim": 2560}  # fmt: skip


@pytest.mark.parametrize(
    "metadata, tokens",
    [
        (GEMMA3, 256),  # 64 patches a side pooled 4x4: Gemma 3's 256
        ({**GEMMA3, "clip.vision.projector.scale_factor": 2}, 1024),
        (
            {
                "clip.projector_type": "mlp",
                "clip.vision.image_size": 336,
                "clip.vision.patch_size": 14,
            },
            576,
        ),  # LLaVA-1.5
        (
            {
                "clip.projector_type": "idefics3",
                "clip.vision.image_size": 512,
                "clip.vision.patch_size": 16,
                "clip.vision.projector.scale_factor": 4,
            },
            64,
        ),
        (
            {
                "clip.projector_type": "qwen2.5vl_merger",
                "clip.vision.image_size": 560,
                "clip.vision.patch_size": 14,
            },
            400,
        ),
        (
            {
                "clip.projector_type": "qwen2.5vl_merger",
                "clip.vision.image_size": 560,
                "clip.vision.patch_size": 14,
                "clip.vision.image_max_pixels": 1003520,
            },
            1280,
        ),
        (
            {
                "clip.projector_type": "resampler",
                "clip.vision.image_size": 448,
                "clip.vision.patch_size": 14,
                "clip.minicpmv_query_num": 64,
            },
            64,
        ),
    ],
)
def test_image_tokens(metadata, tokens):
    assert projector_info(_info(metadata)).image_tokens == tokens


@pytest.mark.parametrize(
    "metadata, words",
    [
        ({"clip.projector_type": "gemma3"}, "image or patch size"),
        ({"clip.vision.image_size": 896, "clip.vision.patch_size": 14}, "projector type"),
        ({**GEMMA3, "clip.has_vision_encoder": False}, "audio"),
        ({**GEMMA3, "clip.vision.image_size": "big"}, "not a whole number"),
    ],
)
def test_unusable_projectors_say_why(metadata, words):
    with pytest.raises(ValueError, match=words):
        projector_info(_info(metadata))


def test_a_model_is_not_a_projector():
    with pytest.raises(ValueError, match="not a vision projector"):
        projector_info(_info({"general.type": "model"}, "llama"))


@pytest.mark.parametrize(
    "text_embd, model_embd, fits",
    [(2560, 2560, True), (2560, 576, False), (None, 576, True), (2560, None, True)],
)
def test_mismatch(text_embd, model_embd, fits):
    projector = ProjectorInfo("gemma3", 1, 896, 14, 4, text_embd)
    assert (mismatch(projector, _info({}, "llama", model_embd)) is None) is fits


@pytest.mark.parametrize(
    "names, picked",
    [
        (["m-Q4_K_M.gguf", "mmproj-F32.gguf", "mmproj-F16.gguf"], "mmproj-F16.gguf"),
        (["mmproj-Q8_0.gguf", "mmproj-BF16.gguf"], "mmproj-BF16.gguf"),
        (["mmproj-model-f16.gguf"], "mmproj-model-f16.gguf"),
        (["gemma-3-4b-it-Q4_K_M.gguf", "README.md"], None),
        ([], None),
    ],
)
def test_pick_projector_name(names, picked):
    assert pick_projector_name(names) == picked


def test_the_tiny_projector_reads_back(tmp_path):
    path = write_tiny_projector(tmp_path / "mmproj-tiny.gguf", text_embd=576)
    info = read_model_info(path)
    projector = projector_info(info)
    assert is_projector(info)
    assert projector.image_tokens == TINY_IMAGE_TOKENS
    assert projector.text_embd == 576
    assert projector.weights_bytes == info.weight_bytes > 0
