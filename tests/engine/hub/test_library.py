"""The local library: models folder, imports, the Hugging Face cache, the index; settings."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from engine.hub.library import BUNDLED, HF_CACHE, IMPORTED, LIBRARY, Library, LibraryError
from engine.hub.settings import HubSettings, load_settings, save_settings
from tests.engine.gguf.craft import valid_model

GGUF = valid_model().bytes()


def put(path: Path, data: bytes = GGUF) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def fake_hf_cache(root: Path, repo_id: str, files: dict[str, bytes]) -> Path:
    """huggingface_hub's cache layout: blobs by hash, snapshots linking to them."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    commit = "a" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    for name, data in files.items():
        blob = put(repo / "blobs" / hashlib.sha256(data).hexdigest(), data)
        link = repo / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    return root


def test_scan_lists_library_files_split_sets_once_and_skips_parts_and_quarantine(
    tmp_path: Path,
) -> None:
    models = tmp_path / "models"
    put(models / "org" / "tiny-GGUF" / "tiny-Q4_K_M.gguf")
    put(models / "org" / "big-GGUF" / "big-Q8_0-00001-of-00002.gguf")
    put(models / "org" / "big-GGUF" / "big-Q8_0-00002-of-00002.gguf")
    put(models / "org" / "half-GGUF" / "half-00001-of-00002.gguf")  # part 2 missing
    put(models / "org" / "x" / "downloading.gguf.part")
    put(models / ".quarantine" / "1-bad.gguf")
    found = Library(models, scan_hf_cache=False).scan()
    assert [m.name for m in found] == ["big-Q8_0.gguf", "tiny-Q4_K_M.gguf"]
    big, tiny = found
    assert big.source == LIBRARY and len(big.parts) == 2 and big.size == 2 * len(GGUF)
    assert big.repo_id == "org/big-GGUF" and big.quant == "Q8_0"
    assert tiny.info is not None and tiny.info.architecture == "llama" and tiny.error is None


def test_a_broken_file_is_listed_with_the_reason(tmp_path: Path) -> None:
    put(tmp_path / "broken.gguf", b"GGUF\x03\x00")
    [model] = Library(tmp_path, scan_hf_cache=False).scan()
    assert model.info is None and "Not a usable GGUF" in model.error


def test_last_use_and_settings_are_remembered_and_sort_first(tmp_path: Path) -> None:
    library = Library(tmp_path, scan_hf_cache=False)
    a, b = put(tmp_path / "a.gguf"), put(tmp_path / "b.gguf")
    library.mark_used(b, {"n_ctx": 8192})
    first, second = Library(tmp_path, scan_hf_cache=False).scan()
    assert first.path == b and first.settings == {"n_ctx": 8192} and first.last_used
    assert second.path == a and second.last_used is None


def test_import_registers_in_place_or_copies(tmp_path: Path) -> None:
    outside = put(tmp_path / "elsewhere" / "mine-Q4_0.gguf")
    library = Library(tmp_path / "models", scan_hf_cache=False)
    model = library.import_file(outside)
    assert model.source == IMPORTED and model.path == outside
    assert [m.path for m in library.scan()] == [outside]
    copied = library.import_file(outside, copy=True)
    assert copied.source == LIBRARY and copied.path.read_bytes() == GGUF
    library.delete(model)  # forgets it, leaves the file
    assert outside.exists() and [m.path for m in library.scan()] == [copied.path]
    library.delete(copied)
    assert not copied.path.exists() and library.scan() == []


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("notes.txt", GGUF, "not a .gguf"),
        ("junk.gguf", b"not a gguf", "not a usable GGUF"),
        ("m-00002-of-00002.gguf", GGUF, "one part of a split model"),
    ],
)
def test_bad_imports_are_refused_with_a_reason(tmp_path, name, data, message) -> None:
    with pytest.raises(LibraryError, match=message):
        Library(tmp_path / "models").import_file(put(tmp_path / name, data))


def test_hf_cache_models_are_listed_but_not_deleted(tmp_path: Path) -> None:
    cache = fake_hf_cache(tmp_path / "hf", "org/cached-GGUF", {"c-Q5_K_M.gguf": GGUF, "x.md": b""})
    library = Library(tmp_path / "models", hf_cache_dir=cache)
    [model] = library.scan()
    assert model.source == HF_CACHE and model.repo_id == "org/cached-GGUF"
    assert model.info is not None and not model.deletable
    with pytest.raises(LibraryError, match="hf cache delete"):
        library.delete(model)


def test_settings_round_trip_and_survive_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "hub_settings.json"
    settings = HubSettings(models_dir=tmp_path / "m", offline=True)
    save_settings(settings, path)
    assert load_settings(path) == settings
    path.write_text("{broken")
    assert load_settings(path) == HubSettings.default()
    assert HubSettings.default().with_models_dir("~/x").models_dir == Path.home() / "x"


def test_a_model_opened_from_anywhere_is_listed_from_then_on(tmp_path: Path) -> None:
    opened = put(tmp_path / "Downloads" / "found-Q4_K_M.gguf")
    Library(tmp_path / "models", scan_hf_cache=False).remember_opened(opened, {"n_ctx": 4096})
    [model] = Library(tmp_path / "models", scan_hf_cache=False).scan()
    assert model.path == opened and model.source == IMPORTED
    assert model.settings == {"n_ctx": 4096} and model.last_used
    assert opened.exists()  # listed where it is, not copied


def test_a_cached_file_that_was_opened_stays_a_cached_file(tmp_path: Path) -> None:
    cache = tmp_path / "hf"
    fake_hf_cache(cache, "org/m-GGUF", {"m-Q4_0.gguf": GGUF})
    snapshot = cache / "models--org--m-GGUF" / "snapshots" / ("a" * 40)
    library = Library(tmp_path / "models", hf_cache_dir=cache)
    library.remember_opened(snapshot / "m-Q4_0.gguf")
    [model] = library.scan()
    assert model.source == HF_CACHE and model.repo_id == "org/m-GGUF" and model.last_used


def test_the_bundled_starter_model_is_always_listed_and_never_deleted(tmp_path: Path) -> None:
    starter = put(tmp_path / "site-packages" / "starter.gguf")
    library = Library(tmp_path / "models", scan_hf_cache=False, bundled=(starter,))
    [model] = library.scan()
    assert model.source == BUNDLED and not model.deletable
    with pytest.raises(LibraryError, match="comes with Hearth"):
        library.delete(model)
    assert starter.exists()


def test_a_model_is_paired_with_its_vision_projector_which_is_not_listed_as_a_model(
    tmp_path: Path,
) -> None:
    from testkit.tiny_vision import write_tiny_projector

    folder = tmp_path / "models" / "org" / "vlm-GGUF"
    model = put(folder / "vlm-Q4_K_M.gguf")
    put(folder / "mmproj-F32.gguf")
    f16 = put(folder / "mmproj-F16.gguf")
    write_tiny_projector(folder / "vision-encoder.gguf", text_embd=64)  # a projector by header
    put(tmp_path / "models" / "org" / "text-GGUF" / "text-Q8_0.gguf")
    library = Library(tmp_path / "models", scan_hf_cache=False)
    found = {m.name: m for m in library.scan()}
    assert sorted(found) == ["text-Q8_0.gguf", "vlm-Q4_K_M.gguf"]
    assert found["vlm-Q4_K_M.gguf"].projector == f16  # F16 is preferred
    assert found["text-Q8_0.gguf"].projector is None
    # one chosen for the model is remembered with its record, while it exists
    library.set_projector(model, folder / "mmproj-F32.gguf")
    [vlm] = [m for m in library.scan() if m.name == "vlm-Q4_K_M.gguf"]
    assert vlm.projector == (folder / "mmproj-F32.gguf").resolve()
    (folder / "mmproj-F32.gguf").unlink()
    [vlm] = [m for m in library.scan() if m.name == "vlm-Q4_K_M.gguf"]
    assert vlm.projector == f16
