"""One ModelInfo for a split set: part 1 holds the metadata, each part a share of the tensors."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import zip_longest

from engine.gguf import ModelInfo


def merge_split_infos(infos: Sequence[ModelInfo]) -> ModelInfo:
    """The headers of every part as one model, so the planner sees all of its weights."""
    first = infos[0]
    if len(infos) == 1:
        return first
    layers = [sum(c) for c in zip_longest(*(i.layer_weight_bytes for i in infos), fillvalue=0)]
    return dataclasses.replace(
        first,
        file_size=sum(i.file_size for i in infos),
        tensors=tuple(t for info in infos for t in info.tensors),
        layer_weight_bytes=tuple(layers),
        nonlayer_weight_bytes=sum(i.nonlayer_weight_bytes for i in infos),
    )
