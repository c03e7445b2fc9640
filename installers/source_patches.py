"""Hearth's patches to the llama.cpp inside llama-cpp-python: read them and apply them.

A patch in installers/patches/ is a unified diff (paths relative to llama.cpp's root, `a/` and
`b/` prefixes, as `git diff` writes them) after a description that names the backends it is for:

    Backends: cuda, hip

Each hunk's old lines must be found in the file exactly (first where the hunk says, else anywhere,
once); otherwise nothing is written and the error names the patch, the file and the line, because
a patch that half applies would build an engine nobody measured. Pure Python, so that the Linux,
macOS and Windows installers apply patches the same way without a `patch` program.

    python installers/source_patches.py LLAMA_CPP_DIR BACKEND     (prints what it applied)
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

PATCH_DIR = Path(__file__).resolve().parent / "patches"
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(Exception):
    pass


@dataclass(frozen=True)
class Hunk:
    old_start: int  # 1-based, as in the header
    old: tuple[str, ...]  # lines without their line ends
    new: tuple[str, ...]


@dataclass(frozen=True)
class FilePatch:
    path: str
    hunks: tuple[Hunk, ...]


@dataclass(frozen=True)
class Patch:
    name: str
    backends: frozenset[str]
    files: tuple[FilePatch, ...]
    text: str


def parse(text: str, name: str) -> Patch:
    """A patch from its text; PatchError when it is malformed or names no backends."""
    lines = text.splitlines()
    backends: frozenset[str] | None = None
    files: list[FilePatch] = []
    i = 0
    while i < len(lines) and not lines[i].startswith("--- "):
        if lines[i].lower().startswith("backends:"):
            names = lines[i].split(":", 1)[1].replace(",", " ").split()
            backends = frozenset(n.lower() for n in names)
        i += 1
    if not backends:
        raise PatchError(f"{name}: no 'Backends:' line before the diff")
    while i < len(lines):
        if not lines[i].startswith("--- ") or i + 1 >= len(lines):
            raise PatchError(f"{name}, line {i + 1}: expected '--- a/PATH' and '+++ b/PATH'")
        if not lines[i + 1].startswith("+++ "):
            raise PatchError(f"{name}, line {i + 2}: expected '+++ b/PATH'")
        path = _strip_prefix(lines[i + 1][4:].split("\t")[0].strip(), name)
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith("@@"):
            hunk, i = _parse_hunk(lines, i, name)
            hunks.append(hunk)
        if not hunks:
            raise PatchError(f"{name}: no hunks for {path}")
        files.append(FilePatch(path, tuple(hunks)))
    if not files:
        raise PatchError(f"{name}: no diff")
    return Patch(name, backends, tuple(files), text)


def _strip_prefix(path: str, name: str) -> str:
    rest = path[2:]
    if not path.startswith("b/") or ".." in Path(rest).parts or rest.startswith(("/", "\\")):
        raise PatchError(f"{name}: unexpected path {path!r} (want b/ and a relative path)")
    return rest


def _parse_hunk(lines: list[str], i: int, name: str) -> tuple[Hunk, int]:
    match = _HUNK_HEADER.match(lines[i])
    if not match:
        raise PatchError(f"{name}, line {i + 1}: malformed hunk header {lines[i]!r}")
    old_start = int(match[1])
    old_count = int(match[2]) if match[2] is not None else 1
    new_count = int(match[4]) if match[4] is not None else 1
    old: list[str] = []
    new: list[str] = []
    i += 1
    while i < len(lines) and (len(old) < old_count or len(new) < new_count):
        line = lines[i]
        if line.startswith(("@@", "--- ")):
            break  # the header promised more lines than the hunk has
        kind, body = (line[:1], line[1:]) if line else (" ", "")
        if kind == " ":
            old.append(body)
            new.append(body)
        elif kind == "-":
            old.append(body)
        elif kind == "+":
            new.append(body)
        elif kind != "\\":  # "\ No newline at end of file"
            raise PatchError(f"{name}, line {i + 1}: unexpected {line!r} inside a hunk")
        i += 1
    if len(old) != old_count or len(new) != new_count:
        raise PatchError(
            f"{name}: a hunk's header says -{old_count} +{new_count} lines, "
            f"its body has -{len(old)} +{len(new)}"
        )
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return Hunk(old_start, tuple(old), tuple(new)), i


def apply_hunks(original: str, hunks: tuple[Hunk, ...], where: str = "the file") -> str:
    """`original` with the hunks applied, in order; PatchError if one does not match."""
    lines = original.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    offset = 0  # lines added minus lines removed by the hunks before
    for hunk in hunks:
        at = _find(bare, hunk, hunk.old_start - 1 + offset, where)
        end = at + len(hunk.old)
        ending = _line_end(lines[at:end] or lines[max(at - 1, 0) : at])
        lines[at:end] = [line + ending for line in hunk.new]
        bare[at:end] = list(hunk.new)
        offset += len(hunk.new) - len(hunk.old)
    return "".join(lines)


def _find(bare: list[str], hunk: Hunk, expected: int, where: str) -> int:
    n = len(hunk.old)
    if 0 <= expected <= len(bare) - n and tuple(bare[expected : expected + n]) == hunk.old:
        return expected
    found = [i for i in range(len(bare) - n + 1) if tuple(bare[i : i + n]) == hunk.old]
    if len(found) == 1:
        return found[0]
    what = "is not in" if not found else f"is in {len(found)} places of"
    raise PatchError(f"the hunk for line {hunk.old_start} {what} {where}")


def _line_end(lines: list[str]) -> str:
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def patches_for(backend: str, folder: Path = PATCH_DIR) -> list[Patch]:
    """The patches that name `backend`, in file-name order."""
    found = [parse(p.read_text(encoding="utf-8"), p.name) for p in sorted(folder.glob("*.patch"))]
    return [p for p in found if backend.lower() in p.backends]


def digest(patches: list[Patch]) -> str:
    """Changes when any patch's text does: part of the engine build's cache key."""
    h = hashlib.sha256()
    for patch in patches:
        h.update(patch.name.encode() + b"\0" + patch.text.encode() + b"\0")
    return h.hexdigest()[:16]


def apply(root: Path, patches: list[Patch]) -> None:
    """Apply every patch under `root` (llama.cpp's folder); nothing is written unless all apply."""
    results: dict[Path, str] = {}
    for patch in patches:
        for file in patch.files:
            target = root / file.path
            if target not in results:
                if not target.is_file():
                    raise PatchError(f"{patch.name}: {file.path} is not in {root}")
                results[target] = target.read_bytes().decode("utf-8")
            text = results[target]
            try:
                results[target] = apply_hunks(text, file.hunks, file.path)
            except PatchError as exc:
                raise PatchError(f"{patch.name}: {exc}") from None
    for target, text in results.items():
        target.write_bytes(text.encode("utf-8"))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    root, backend = Path(argv[0]), argv[1]
    patches = patches_for(backend)
    try:
        apply(root, patches)
    except PatchError as exc:
        print(f"hearth: {exc}", file=sys.stderr)
        return 1
    for patch in patches:
        print(f"applied {patch.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
