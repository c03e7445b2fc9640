"""A repository's GGUF files as the models a person chooses between: grouped by quantization,
with a split set (`name-00001-of-00003.gguf` …) as one entry."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from engine.gguf.projector import is_projector_name, pick_projector_name
from engine.hub.records import RemoteFile

OTHER = "other"
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
# llama-quantize's type names, as they appear in file names (longest alternatives first)
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])("
    r"IQ[1-4]_(?:XXS|XS|NL|S|M|L|K(?:_[SML])?)|"
    r"Q[2-8]_K(?:_(?:XL|S|M|L))?|Q[4-8]_[01]|TQ[12]_0|MXFP4(?:_MOE)?|BF16|F16|F32|FP16|FP32"
    r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)


def quant_of(filename: str) -> str:
    """The quantization named in a file name (the last one: `Q8_0-...-Q4_K_M` is Q4_K_M)."""
    found = _QUANT.findall(PurePosixPath(filename).name)
    if not found:
        return OTHER
    return found[-1].upper().replace("FP16", "F16").replace("FP32", "F32")


def is_projector(filename: str) -> bool:
    """A vision projector (mmproj) that goes with a model; not a model on its own."""
    return is_projector_name(filename)


def projector_for(models: Iterable[ModelFile]) -> ModelFile | None:
    """The vision projector to download with a model of this listing (one repository holds
    one model's quantizations and its projector files): F16 first (engine/gguf/projector.py)."""
    projectors = {m.name: m for m in models if m.projector and m.complete}
    name = pick_projector_name(projectors)
    return projectors[name] if name else None


@dataclass(frozen=True)
class ModelFile:
    """One downloadable model: a single .gguf, or every part of a split set."""

    name: str
    quant: str
    files: tuple[RemoteFile, ...]
    expected_parts: int = 1  # a split set lists how many parts it should have

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def is_split(self) -> bool:
        return self.expected_parts > 1

    @property
    def complete(self) -> bool:
        """False for a split set with parts missing from the repository (not downloadable)."""
        return len(self.files) == self.expected_parts

    @property
    def first(self) -> RemoteFile:
        """The file whose header describes the model (part 1 of a set)."""
        return self.files[0]

    @property
    def projector(self) -> bool:
        return is_projector(self.name)


def group_model_files(files: Iterable[RemoteFile]) -> list[ModelFile]:
    """The .gguf files as ModelFiles, split sets merged, ordered by quantization then name."""
    singles: list[ModelFile] = []
    sets: dict[tuple[str, int], list[tuple[int, RemoteFile]]] = {}
    for file in files:
        if not file.filename.lower().endswith(".gguf"):
            continue
        match = _SPLIT.match(file.filename)
        if match and int(match["count"]) > 1:
            key = (match["stem"], int(match["count"]))
            sets.setdefault(key, []).append((int(match["no"]), file))
        else:
            singles.append(ModelFile(file.filename, quant_of(file.filename), (file,)))
    for (stem, count), numbered in sets.items():
        numbered.sort(key=lambda item: item[0])
        parts = tuple(f for _no, f in numbered)
        name = f"{stem}.gguf ({count} parts)"
        singles.append(ModelFile(name, quant_of(stem), parts, expected_parts=count))
    return sorted(singles, key=lambda m: (m.projector, m.quant == OTHER, m.quant, m.name))


def by_quant(models: Iterable[ModelFile]) -> dict[str, list[ModelFile]]:
    groups: dict[str, list[ModelFile]] = {}
    for model in models:
        groups.setdefault(model.quant, []).append(model)
    return groups
