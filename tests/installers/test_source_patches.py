"""Hearth's llama.cpp patches: parsing, applying, refusing what does not match, and the build key
that changes with them (installers/source_patches.py, installers/build_engine.py)."""

import importlib.util
import sys
import tarfile
from pathlib import Path

import pytest

INSTALLERS = Path(__file__).resolve().parents[2] / "installers"
sys.path.insert(0, str(INSTALLERS))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, INSTALLERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


sp = _load("source_patches")
build_engine = _load("build_engine")

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 21))

PATCH = """Make line 3 and line 15 say more.

Backends: cuda, HIP

--- a/src/file.c
+++ b/src/file.c
@@ -2,3 +2,4 @@
 line 2
-line 3
+line 3, changed
+an added line
 line 4
@@ -14,3 +15,2 @@
 line 14
-line 15
 line 16
"""


def test_a_patch_names_its_backends_and_files():
    patch = sp.parse(PATCH, "x.patch")
    assert patch.backends == {"cuda", "hip"}
    assert [f.path for f in patch.files] == ["src/file.c"]
    first, second = patch.files[0].hunks
    assert (first.old_start, first.old, first.new) == (
        2,
        ("line 2", "line 3", "line 4"),
        ("line 2", "line 3, changed", "an added line", "line 4"),
    )
    assert second.new == ("line 14", "line 16")


def test_hunks_apply_in_order_with_the_offset_of_those_before():
    hunks = sp.parse(PATCH, "x.patch").files[0].hunks
    result = sp.apply_hunks(ORIGINAL, hunks)
    lines = result.splitlines()
    assert lines[1:5] == ["line 2", "line 3, changed", "an added line", "line 4"]
    assert "line 15" not in lines and lines[14:16] == ["line 14", "line 16"]
    assert len(lines) == 20


def test_a_hunk_is_found_where_the_file_moved_it():
    moved = "a new first line\n" * 7 + ORIGINAL
    result = sp.apply_hunks(moved, sp.parse(PATCH, "x.patch").files[0].hunks)
    assert "line 3, changed\nan added line\n" in result and "line 15\n" not in result


def test_crlf_files_keep_their_line_ends():
    result = sp.apply_hunks(ORIGINAL.replace("\n", "\r\n"), sp.parse(PATCH, "x").files[0].hunks)
    assert "line 3, changed\r\nan added line\r\n" in result
    assert "\n" not in result.replace("\r\n", "")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ORIGINAL.replace("line 3\n", "line three\n"), "the hunk for line 2 is not in"),
        (
            "moved\n" * 3 + ORIGINAL + "line 14\nline 15\nline 16\n",
            "the hunk for line 14 is in 2 places of",
        ),
    ],
)
def test_a_hunk_that_does_not_match_once_is_refused(text, message):
    with pytest.raises(sp.PatchError, match=message):
        sp.apply_hunks(text, sp.parse(PATCH, "x").files[0].hunks, "src/file.c")


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (PATCH.replace("Backends: cuda, HIP\n", ""), "no 'Backends:' line"),
        (PATCH.replace("@@ -2,3 +2,4 @@", "@@ -2,3 +2,5 @@"), "header says -3 \\+5"),
        (PATCH.replace("+++ b/src/file.c", "+++ b/../outside.c"), "unexpected path"),
        (PATCH.replace("+++ b/src/file.c", "+++ b//etc/passwd"), "unexpected path"),
        (PATCH.replace("@@ -2,3 +2,4 @@", "@@ nonsense @@"), "malformed hunk header"),
        ("Backends: cuda\n", "no diff"),
    ],
)
def test_malformed_patches_are_refused_with_the_reason(patch, message):
    with pytest.raises(sp.PatchError, match=message):
        sp.parse(patch, "x.patch")


def test_apply_writes_nothing_unless_every_patch_applies(tmp_path):
    (tmp_path / "src").mkdir()
    target = tmp_path / "src" / "file.c"
    target.write_text(ORIGINAL)
    good = sp.parse(PATCH, "1.patch")
    bad = sp.parse(
        "Backends: cuda\n--- a/src/file.c\n+++ b/src/file.c\n@@ -10,1 +10,1 @@\n-line 99\n+x\n",
        "2.patch",
    )
    with pytest.raises(sp.PatchError, match=r"2\.patch: the hunk for line 10 is not in"):
        sp.apply(tmp_path, [good, bad])
    assert target.read_text() == ORIGINAL
    sp.apply(tmp_path, [good])
    assert "line 3, changed" in target.read_text()
    with pytest.raises(sp.PatchError, match=r"1\.patch"):  # already applied: refused, not doubled
        sp.apply(tmp_path, [good])


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(sp.PatchError, match=r"src/file\.c is not in"):
        sp.apply(tmp_path, [sp.parse(PATCH, "x.patch")])


def test_hearths_patches_parse_and_the_cuda_ones_are_for_cuda_and_hip_only():
    assert sp.patches_for("cuda") and sp.patches_for("cuda") == sp.patches_for("hip")
    for backend in ("cpu", "vulkan", "metal"):
        assert sp.patches_for(backend) == []
    names = [p.name for p in sp.patches_for("cuda")]
    assert names == [
        "0001-ggml-cuda-q8_1-sum-of-quantized-values.patch",
        "0002-ggml-cuda-graph-per-batch-shape.patch",
    ]
    paths = {f.path for p in sp.patches_for("cuda") for f in p.files}
    assert paths == {
        "ggml/src/ggml-cuda/quantize.cu",
        "ggml/src/ggml-cuda/fattn-common.cuh",
        "ggml/src/ggml-cuda/ggml-cuda.cu",
    }


def test_hearths_patches_apply_to_the_llama_cpp_they_were_written_for(tmp_path):
    """Against the real sources, when installers/build_engine.py has downloaded the sdist."""
    name = f"llama_cpp_python-{build_engine.LLAMA_VERSION}.tar.gz"
    sdist = build_engine.default_cache() / "sdist" / name
    if not sdist.exists():
        pytest.skip(f"{sdist} is not here (installers/build_engine.py downloads it)")
    patches = sp.patches_for("cuda")
    wanted = {f.path for p in patches for f in p.files}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            inner = member.name.split("/vendor/llama.cpp/", 1)
            if len(inner) == 2 and inner[1] in wanted:
                target = tmp_path / inner[1]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
    sp.apply(tmp_path, patches)
    quantize = (tmp_path / "ggml/src/ggml-cuda/quantize.cu").read_text()
    assert "const float sum = d * warp_reduce_sum<QK8_1>((float) q);" in quantize


def test_the_build_key_changes_with_the_patches_and_not_without_them():
    none, source = build_engine.build_key("0.3.36", "cpu", "", [])
    assert "patches" not in source  # the key earlier installers used: their wheels stay valid
    cuda = sp.patches_for("cuda")
    with_patches, source = build_engine.build_key("0.3.36", "cuda", "-DGGML_CUDA=on", cuda)
    assert f"patches {sp.digest(cuda)}" in source
    edited = [sp.parse(cuda[0].text.replace("Backends:", "Edited.\n\nBackends:"), cuda[0].name)]
    assert build_engine.build_key("0.3.36", "cuda", "-DGGML_CUDA=on", edited)[0] != with_patches
    assert build_engine.build_key("0.3.36", "cpu", "", [])[0] == none
