"""Which vision projector (mmproj) file goes with a model on disk.

A projector comes from the model's Hub repository (the Library downloads it into the same
folder) or is dropped in beside the model; the Library may also remember one chosen for the
model (library.json). Candidates are the folder's `mmproj*.gguf` files, F16 first
(engine/gguf/projector.py), each read by its header: a file that is not a vision projector, or
whose embeddings do not fit the model's, is passed over with a note saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.gguf import GGUFError, ModelInfo, read_model_info
from engine.gguf.projector import (
    ProjectorInfo,
    is_projector_name,
    mismatch,
    projector_info,
    projector_rank,
)


@dataclass(frozen=True)
class FoundProjector:
    path: Path
    info: ProjectorInfo


def projector_candidates(model_path: str | Path) -> list[Path]:
    """The `mmproj*.gguf` files beside the model, the preferred first."""
    folder = Path(model_path).parent
    try:
        found = [p for p in folder.glob("*.gguf") if is_projector_name(p.name) and p.is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: projector_rank(p.name))


def read_projector(path: str | Path, model: ModelInfo) -> tuple[FoundProjector | None, str]:
    """`path` as `model`'s projector, or None and why not (one line)."""
    path = Path(path)
    try:
        projector = projector_info(read_model_info(path))
    except (GGUFError, OSError) as exc:
        return None, f"{path.name} cannot be read as a GGUF ({exc})"
    except ValueError as exc:
        return None, str(exc)
    why = mismatch(projector, model)
    if why:
        return None, f"{path.name} does not go with this model: {why}"
    return FoundProjector(path, projector), ""


def find_projector(
    model_path: str | Path, model: ModelInfo, chosen: str | Path | None = None
) -> tuple[FoundProjector | None, tuple[str, ...]]:
    """The projector to load with the model (`chosen` first, as the Library remembers it, then
    the folder's), and a note for each file passed over."""
    notes = []
    candidates = [Path(chosen)] if chosen else []
    candidates += [p for p in projector_candidates(model_path) if p not in candidates]
    for path in candidates:
        found, why = read_projector(path, model)
        if found is not None:
            return found, tuple(notes)
        notes.append(f"Vision projector not used: {why}.")
    return None, tuple(notes)
