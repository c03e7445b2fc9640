"""The local library: the models folder, files imported from elsewhere, and GGUFs already in
huggingface_hub's cache, each with its header, size, quant, last use and remembered settings.

    library = Library(settings.models_dir)
    models = library.scan()                 # -> list[LocalModel], most recently used first
    library.import_file(path)               # register a .gguf from elsewhere (not copied)
    library.mark_used(model.path, settings) # after a load: when, and with what settings
    library.remember_opened(path, settings) # a model opened from anywhere: listed from now on

What Hearth knows beyond the files lives in `<models folder>/library.json` (written atomically).
The `.part` files of downloads in flight and the `.quarantine` folder are never listed.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.files import write_json_atomic
from engine.gguf import GGUFError, ModelInfo, read_model_info
from engine.gguf.projector import is_projector, is_projector_name, pick_projector_name
from engine.hub.catalog import quant_of
from engine.hub.split_info import merge_split_infos

INDEX_VERSION = 1
LIBRARY = "library"  # a file inside the models folder (downloaded or copied there)
IMPORTED = "imported"  # a file elsewhere on disk, registered by drag-and-drop or the picker
HF_CACHE = "hf-cache"  # a file in huggingface_hub's cache
BUNDLED = "bundled"  # shipped with Hearth (the starter model): always listed, never deleted
# How a downloaded file was checked (LocalModel.verified_by); files Hearth did not download
# (imported, in the HF cache, put in the folder by hand) have None: nothing is promised for them.
BY_SHA256 = "sha256"  # its sha256 equals the one the Hub lists
BY_STRUCTURE = "size and GGUF structure"  # the Hub listed no sha256: unverified
_INDEX_LOCK = threading.Lock()
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


class LibraryError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class LocalModel:
    path: Path  # the file to load (part 1 of a split set)
    parts: tuple[Path, ...]
    source: str  # LIBRARY, IMPORTED or HF_CACHE
    size: int
    quant: str
    repo_id: str | None = None
    info: ModelInfo | None = None
    error: str | None = None  # why the header could not be read
    last_used: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    verified_by: str | None = None  # BY_SHA256, BY_STRUCTURE, or None (not downloaded here)
    # Its vision projector (mmproj GGUF): the one remembered for it (library.json), else the
    # preferred one in its folder (downloaded from the same repository, or dropped in beside
    # it). None: a text model. The load policy checks it against the model's header.
    projector: Path | None = None

    @property
    def unverified(self) -> bool:
        """Downloaded without a sha256 to check it against: the Library page says so."""
        return self.verified_by == BY_STRUCTURE

    @property
    def name(self) -> str:
        match = _SPLIT.match(self.path.name)
        return f"{match['stem']}.gguf" if match else self.path.name

    @property
    def deletable(self) -> bool:
        return self.source == LIBRARY


def split_parts(first: Path) -> tuple[Path, ...] | None:
    """All parts of the set `first` opens, or None when it is not part 1 of a complete set."""
    match = _SPLIT.match(first.name)
    if not match:
        return (first,)
    if int(match["no"]) != 1:
        return None
    count = int(match["count"])
    parts = tuple(
        first.with_name(f"{match['stem']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)
    )
    return parts if all(p.exists() for p in parts) else None


class Library:
    def __init__(
        self,
        models_dir: Path,
        *,
        hf_cache_dir: Path | None = None,
        scan_hf_cache=True,
        bundled: tuple[Path, ...] = (),
    ):
        self.models_dir = Path(models_dir)
        self.bundled = tuple(Path(p) for p in bundled)
        self.index_path = self.models_dir / "library.json"
        self.hf_cache_dir = hf_cache_dir
        self.scan_hf_cache = scan_hf_cache

    # -- the index ------------------------------------------------------------------------------

    def _load_index(self) -> dict[str, Any]:
        try:
            data = json.loads(self.index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"version": INDEX_VERSION, "models": {}}
        if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
            return {"version": INDEX_VERSION, "models": {}}
        return data

    def _update(self, path: Path, **fields: Any) -> None:
        # Read, change, write under one lock: the download queue's thread and the window both
        # record downloads, and one's change must not be lost under the other's write.
        with _INDEX_LOCK:
            index = self._load_index()
            entry = index["models"].setdefault(str(Path(path).resolve()), {})
            entry.update(fields)
            write_json_atomic(self.index_path, index)

    def mark_used(self, path: Path, settings: dict[str, Any] | None = None) -> None:
        """Remember that `path` was loaded now, and with what settings (to offer them again)."""
        fields: dict[str, Any] = {"last_used": time.time()}
        if settings is not None:
            fields["settings"] = dict(settings)
        self._update(path, **fields)

    def remember_opened(self, path: Path, settings: dict[str, Any] | None = None) -> None:
        """A model that was loaded from wherever it is (File › Open, a drop, --model): listed
        from now on, in place (not copied), with when and how it was loaded."""
        fields: dict[str, Any] = {"last_used": time.time(), "imported": True}
        if settings is not None:
            fields["settings"] = dict(settings)
        self._update(path, **fields)

    def set_projector(self, path: Path, projector: Path | None) -> None:
        """Remember `projector` as the vision projector of the model at `path` (None: forget
        it, and let the one in its folder be found again)."""
        self._update(path, projector=str(Path(projector).resolve()) if projector else None)

    def record_download(
        self, path: Path, repo_id: str, sha256: str | None, *, verified: bool | None = None
    ) -> None:
        """Remember where a download came from and how it was checked (`verified`: every file
        of the set against a Hub sha256; by default, whether `sha256` is given)."""
        verified = bool(sha256) if verified is None else verified
        self._update(
            path,
            repo_id=repo_id,
            sha256=sha256,
            verified_by=BY_SHA256 if verified else BY_STRUCTURE,
        )

    # -- listing --------------------------------------------------------------------------------

    def scan(self) -> list[LocalModel]:
        index = self._load_index()["models"]
        found: dict[Path, LocalModel] = {}
        for first in self._library_files():
            if not is_projector_name(first.name):
                found.setdefault(first.resolve(), self._entry(first, LIBRARY, index))
        # Before the registered files: a cached file that was opened stays a cached file.
        if self.scan_hf_cache:
            for first, repo_id in self._hf_cache_files():
                if first.resolve() not in found:
                    found[first.resolve()] = self._entry(first, HF_CACHE, index, repo_id)
        for first in self.bundled:
            if first.is_file() and first.resolve() not in found:
                found[first.resolve()] = self._entry(first, BUNDLED, index)
        for key, entry in index.items():
            if entry.get("imported"):
                first = Path(key)
                if first.exists() and first.resolve() not in found:
                    found[first.resolve()] = self._entry(first, IMPORTED, index)
        # A projector without "mmproj" in its name is known by its header (general.type, clip
        # keys): it is not a model of its own either.
        models = [m for m in found.values() if m.info is None or not is_projector(m.info)]
        return sorted(models, key=lambda m: (-(m.last_used or 0), m.name.lower()))

    def _library_files(self) -> Iterable[Path]:
        if not self.models_dir.is_dir():
            return []
        files = []
        for path in sorted(self.models_dir.rglob("*.gguf")):
            relative = path.relative_to(self.models_dir)
            if any(part.startswith(".") for part in relative.parts):
                continue  # .quarantine and other hidden folders
            if split_parts(path) is not None:
                files.append(path)
        return files

    def _hf_cache_files(self) -> Iterable[tuple[Path, str]]:
        try:
            from huggingface_hub import scan_cache_dir

            cache = scan_cache_dir(self.hf_cache_dir)
        except Exception:  # no cache yet, or one huggingface_hub cannot read: nothing to list
            return []
        files = []
        for repo in cache.repos:
            if repo.repo_type != "model":
                continue
            for revision in repo.revisions:
                for cached in revision.files:
                    path = Path(cached.file_path)
                    if (
                        path.suffix.lower() == ".gguf"
                        and not is_projector_name(path.name)
                        and split_parts(path) is not None
                    ):
                        files.append((path, repo.repo_id))
        return files

    def _entry(
        self, first: Path, source: str, index: dict[str, Any], repo_id: str | None = None
    ) -> LocalModel:
        parts = split_parts(first) or (first,)
        known = index.get(str(first.resolve()), {})
        info, error = None, None
        try:
            info = merge_split_infos([read_model_info(p) for p in parts])
        except GGUFError as exc:
            error = f"Not a usable GGUF: {exc}"
        if repo_id is None and source == LIBRARY:
            relative = first.relative_to(self.models_dir).parts
            repo_id = known.get("repo_id") or (
                "/".join(relative[:2]) if len(relative) > 2 else None
            )
        quant = info.quant_name if info is not None and info.quant_name else quant_of(first.name)
        return LocalModel(
            path=first,
            parts=parts,
            source=source,
            size=sum(p.stat().st_size for p in parts),
            quant=quant,
            repo_id=repo_id,
            info=info,
            error=error,
            last_used=known.get("last_used"),
            settings=known.get("settings") or {},
            verified_by=_verified_by(known),
            projector=_projector_of(first, known),
        )

    # -- changes --------------------------------------------------------------------------------

    def import_file(self, path: str | Path, *, copy: bool = False) -> LocalModel:
        """Add a .gguf from elsewhere: registered where it is, or copied into the models folder.
        Part 1 of a split set brings the whole set."""
        path = Path(path).expanduser()
        if path.suffix.lower() != ".gguf" or not path.is_file():
            raise LibraryError(f"{path.name} is not a .gguf file. Choose a GGUF model file.")
        parts = split_parts(path)
        if parts is None:
            raise LibraryError(
                f"{path.name} is one part of a split model, and not the first or parts are "
                "missing. Import the file ending in -00001-of-…gguf, with all parts beside it."
            )
        try:
            read_model_info(parts[0])
        except GGUFError as exc:
            raise LibraryError(f"{path.name} is not a usable GGUF model: {exc}") from exc
        if copy:
            target_dir = self.models_dir / "imported"
            target_dir.mkdir(parents=True, exist_ok=True)
            for part in parts:
                shutil.copy2(part, target_dir / part.name)
            return self._entry(target_dir / parts[0].name, LIBRARY, self._load_index()["models"])
        self._update(parts[0], imported=True)
        return self._entry(parts[0], IMPORTED, self._load_index()["models"])

    def delete(self, model: LocalModel) -> None:
        """Delete a model's files from the models folder; imported and cached files are only
        forgotten (they belong to someone else)."""
        index = self._load_index()
        key = str(model.path.resolve())
        if model.source == LIBRARY:
            root = self.models_dir.resolve()
            for part in model.parts:
                if not part.resolve().is_relative_to(root):
                    raise LibraryError(f"{part} is outside the models folder; not deleted.")
            for part in model.parts:
                part.unlink(missing_ok=True)
        elif model.source == BUNDLED:
            raise LibraryError(f"{model.name} comes with Hearth; it cannot be deleted.")
        elif model.source == HF_CACHE:
            raise LibraryError(
                f"{model.name} is in the Hugging Face cache, shared with other programs. "
                "Remove it with `hf cache delete`."
            )
        if key in index["models"]:
            del index["models"][key]
            write_json_atomic(self.index_path, index)


def _projector_of(first: Path, known: dict[str, Any]) -> Path | None:
    """The remembered projector while it exists, else the preferred one in the folder."""
    remembered = known.get("projector")
    if isinstance(remembered, str) and Path(remembered).is_file():
        return Path(remembered)
    try:
        names = [p.name for p in first.parent.glob("*.gguf")]
    except OSError:
        return None
    name = pick_projector_name(names)
    return first.parent / name if name else None


def _verified_by(known: dict[str, Any]) -> str | None:
    if known.get("verified_by") in (BY_SHA256, BY_STRUCTURE):
        return known["verified_by"]
    if "repo_id" in known and "sha256" in known:  # recorded before verified_by existed
        return BY_SHA256 if known["sha256"] else BY_STRUCTURE
    return None
