"""Repository file names that would escape the models folder are refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.hub.download import Downloader
from engine.hub.paths import UnsafePath, hub_file_url, library_path, safe_relative_name
from engine.hub.records import RemoteFile


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
        "%2e%2e/evil.gguf",  # encoded forms: a server or file system further on may decode them
        "..%2fevil.gguf",
        "%252e%252e/evil.gguf",
        "a%5c..%5cevil.gguf",
        "evil%00.gguf",
        "\uff0e\uff0e/evil.gguf",  # fullwidth dots: '..' after NFKC normalisation
        "a\uff0fevil.gguf",  # fullwidth solidus: '/' after NFKC
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


def test_hub_urls_are_built_only_under_the_files_resolve_path() -> None:
    url = hub_file_url("http://hub.test/", "org/repo", "Q4/a b#1.gguf", "refs/pr/3")
    assert url == "http://hub.test/org/repo/resolve/refs%2Fpr%2F3/Q4/a%20b%231.gguf"
    for name, revision in [("../x.gguf", "main"), ("x.gguf", "../main"), ("x.gguf", "a//b")]:
        with pytest.raises(UnsafePath, match="Refused"):
            hub_file_url("http://hub.test", "org/repo", name, revision)


def test_the_downloader_refuses_a_hostile_name_before_any_request(tmp_path: Path) -> None:
    file = RemoteFile("org/repo", "../../etc/passwd.gguf", 10, None)
    with pytest.raises(UnsafePath):
        Downloader(endpoint="http://127.0.0.1:9", token=False).download(
            [file], [tmp_path / "x.gguf"], tmp_path / ".quarantine"
        )
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "name",
    [
        "model\u0085.gguf",  # NEXT LINE, a C1 control: a line break to some readers
        "model\u2028name.gguf",  # LINE SEPARATOR
        "model\u2029.gguf",  # PARAGRAPH SEPARATOR
        "evil\u202efuug.exe.gguf",  # RIGHT-TO-LEFT OVERRIDE: shown as a different name
        "model\u200b.gguf",  # ZERO WIDTH SPACE: two names that look the same
        "model\x7f.gguf",  # DEL
        "model%C2%85.gguf",  # the NEXT LINE, percent-encoded
    ],
)
def test_unicode_control_and_format_characters_are_refused_as_documented(name: str) -> None:
    with pytest.raises(UnsafePath, match="control character"):
        safe_relative_name(name)


@pytest.mark.parametrize("name", ["Modèle-7B.Q4_K_M.gguf", "模型/qwen-7b.gguf", "emoji-🦙.gguf"])
def test_names_in_other_scripts_are_taken(name: str) -> None:
    assert str(safe_relative_name(name)) == name
