"""A vision projector (mmproj) GGUF: telling one from a model, what its header says about its
memory and the tokens an image takes, and which projector goes with a model.

A vision model ships as two files: the language model and its projector (llama.cpp's
`mmproj-*.gguf`, architecture `clip`), which turns an image into embeddings the model reads as
tokens. The projector is known by its name (`mmproj` in it), by `general.type = "mmproj"`, or
by the `clip.*` keys llama.cpp's converter writes. Pure: data in, data out.

The tokens an image takes follow llama.cpp's clip.cpp (clip_n_output_tokens): projectors that
resize every image to `image_size` give (image_size / patch_size)² patches, divided by the
square of their merge factor (Gemma 3 pools 4×4 patches into one token, SmolVLM's pixel shuffle
folds `scale_factor`², Qwen-VL merges 2×2); Qwen-VL-style projectors take an image at its own
size, up to `image_max_pixels`. The worker counts each real image exactly (mtmd); this figure
is what the planner sets aside for one image before any is seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

from engine.gguf.model_info import ModelInfo

# Projector types whose images keep their own size (two patches a side merged into one token),
# up to the header's image_max_pixels.
_DYNAMIC = frozenset(
    {
        "qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger", "qwen2.5o", "glm4v", "glm5v",
        "mimovl", "ling3vl", "exaone4_5", "youtuvl", "minimax_m3",
    }
)  # fmt: skip
# MiniCPM-V's resampler gives a fixed number of queries per image slice (96 by default).
_RESAMPLER = "resampler"
# The merge factor a type uses when its header does not say (clip.cpp's load_hparams).
_DEFAULT_MERGE = {"gemma3": 4, "idefics3": 3, "lfm2": 2, "ldp": 2, "ldpv2": 2}
# How the projector's weights are preferred when a repository offers several: llama.cpp's own
# advice is F16; BF16 next, then the smaller quantized ones; F32 is twice F16's memory.
_PROJECTOR_QUANT_ORDER = ("f16", "bf16", "q8_0", "f32")


@dataclass(frozen=True)
class ProjectorInfo:
    """What the planner and the Library need to know of a projector file."""

    projector_type: str  # clip.projector_type: "gemma3", "idefics3", "mlp", "qwen2.5vl_merger"...
    weights_bytes: int
    image_size: int  # the side images are resized to (the most, for dynamic projectors)
    patch_size: int
    merge: int  # the patch grid's side is divided by this before the tokens come out
    text_embd: int | None  # clip.vision.projection_dim: the embedding length it feeds
    max_pixels: int | None = None  # dynamic projectors: the largest image they take
    queries: int | None = None  # MiniCPM-V's resampler: tokens per image slice

    @property
    def image_tokens(self) -> int:
        """The tokens one image takes, at most (see the module docstring)."""
        patch = max(1, self.patch_size)
        if self.projector_type == _RESAMPLER:
            return self.queries or 96
        if self.projector_type in _DYNAMIC:
            side = patch * 2
            if self.max_pixels:
                return max(1, self.max_pixels // (side * side))
            return max(1, (self.image_size // side) ** 2)
        per_side = self.image_size // patch
        return max(1, (per_side // max(1, self.merge)) ** 2)


def is_projector_name(filename: str) -> bool:
    """`mmproj` in a file's name: how llama.cpp's converter and every GGUF publisher name one."""
    return "mmproj" in PurePath(filename).name.lower()


def is_projector(info: ModelInfo) -> bool:
    """A projector by its header: `general.type = mmproj`, architecture `clip`, or clip keys."""
    meta = info.metadata
    if meta.get("general.type") == "mmproj" or info.architecture == "clip":
        return True
    return any(key.startswith("clip.") for key in meta)


def projector_info(info: ModelInfo) -> ProjectorInfo:
    """The projector facts of a header; ValueError (saying which key) when it has no vision
    encoder or misses what llama.cpp needs to load it."""
    meta = info.metadata
    if not is_projector(info):
        raise ValueError(f"{PurePath(info.source).name} is not a vision projector (mmproj).")
    if meta.get("clip.has_vision_encoder") is False:
        raise ValueError(
            f"{PurePath(info.source).name} is a projector for audio, not images; Hearth "
            "shows images only."
        )
    kind = meta.get("clip.projector_type") or meta.get("clip.vision.projector_type")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"{PurePath(info.source).name} does not say its projector type.")

    def number(key: str, default: int | None = None) -> int | None:
        value = meta.get(key, default)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{PurePath(info.source).name}: {key} is not a whole number.")
        return value

    image_size = number("clip.vision.image_size")
    patch_size = number("clip.vision.patch_size")
    if not image_size or not patch_size:
        raise ValueError(
            f"{PurePath(info.source).name} does not say its image or patch size "
            "(clip.vision.image_size, clip.vision.patch_size)."
        )
    merge = (
        number("clip.vision.projector.scale_factor")
        or number("clip.vision.spatial_merge_size")
        or _DEFAULT_MERGE.get(kind, 1)
    )
    return ProjectorInfo(
        projector_type=kind,
        weights_bytes=info.weight_bytes,
        image_size=image_size,
        patch_size=patch_size,
        merge=merge,
        text_embd=number("clip.vision.projection_dim"),
        max_pixels=number("clip.vision.image_max_pixels"),
        queries=number("clip.minicpmv_query_num"),
    )


def mismatch(projector: ProjectorInfo, model: ModelInfo) -> str | None:
    """Why `projector` cannot feed `model` (its embeddings have another width), or None.
    A projector that does not say its width is given the benefit of the doubt: llama.cpp
    checks again when it loads it (mtmd: "mismatch between text model and mmproj")."""
    want = model.embedding_length
    if projector.text_embd and want and projector.text_embd != want:
        return (
            f"its embeddings are {projector.text_embd:,} wide and the model's are {want:,}: "
            "it belongs to another model"
        )
    return None


def projector_rank(filename: str) -> tuple[int, str]:
    """Sort key among a repository's projector files: F16 first, then BF16, Q8_0, F32."""
    name = PurePath(filename).name.lower()
    for i, quant in enumerate(_PROJECTOR_QUANT_ORDER):
        if quant in name.replace("-", "_").replace(".", "_").split("_"):
            return (i, name)
    return (len(_PROJECTOR_QUANT_ORDER), name)


def pick_projector_name(filenames: Iterable[str]) -> str | None:
    """The projector to use among a folder's or a Hub listing's file names (None: none)."""
    found = sorted((n for n in filenames if is_projector_name(n)), key=projector_rank)
    return found[0] if found else None
