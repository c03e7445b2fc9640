"""Repository file names that would escape the models folder are refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.hub.paths import UnsafePath, library_path, safe_relative_name


@pytest.mark.parametrize(
    "name",
    [
        "../evil.gguf",
        "a/../../evil.gguf",
        "/etc/passwd",
        "C:/Windows/evil.gguf",
        "c:evil.gguf",
        "a\\..\\evil.gguf",
        "",
        "a//b.gguf",
        "./a.gguf",
        "a/..",
        "evil\x00.gguf",
        "x" * 2000,
    ],
)
def test_escaping_names_are_refused_with_a_reason(name: str, tmp_path: Path) -> None:
    with pytest.raises(UnsafePath, match="Refused"):
        safe_relative_name(name)
    with pytest.raises(UnsafePath):
        library_path(tmp_path, "org/repo", name)


@pytest.mark.parametrize("repo_id", ["../x", "org/..", "org", "org/a/b", "/abs", "org/.hidden"])
def test_bad_repo_ids_are_refused(repo_id: str, tmp_path: Path) -> None:
    with pytest.raises(UnsafePath):
        library_path(tmp_path, repo_id, "model.gguf")


def test_good_names_land_inside_the_folder(tmp_path: Path) -> None:
    path = library_path(tmp_path, "org/repo", "Q4_K_M/model-00001-of-00002.gguf")
    assert path == tmp_path.resolve() / "org" / "repo" / "Q4_K_M" / "model-00001-of-00002.gguf"


def test_a_symlink_inside_the_folder_cannot_redirect_the_write(tmp_path: Path) -> None:
    models, outside = tmp_path / "models", tmp_path / "outside"
    (models / "org").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, models / "org" / "repo")
    with pytest.raises(UnsafePath, match="outside the models folder"):
        library_path(models, "org/repo", "model.gguf")
