"""Where a file from the Hub goes in the models folder, refusing names that would leave it.

A repository is written by strangers: a file name like `../../.bashrc`, `/etc/passwd` or
`C:\\Windows\\x` must never become a path outside the models folder. Names are checked as
text first (no `..`, no absolute or drive paths, no backslashes or control characters), then
the joined path is resolved and must still lie inside the folder (a symlink planted inside the
folder cannot redirect the write either).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

_DRIVE = re.compile(r"^[A-Za-z]:")
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class UnsafePath(ValueError):
    """A repository or file name that would write outside the models folder."""


def safe_relative_name(filename: str) -> PurePosixPath:
    """The Hub file name as a relative path, or UnsafePath saying why it is refused."""
    problem = None
    if not filename or len(filename) > 1024:
        problem = "it is empty or too long"
    elif any(ord(c) < 32 for c in filename) or "\\" in filename:
        problem = "it holds backslashes or control characters"
    elif filename.startswith("/") or _DRIVE.match(filename):
        problem = "it is an absolute path"
    elif any(part in ("", ".", "..") for part in filename.split("/")):
        problem = "it holds '..', '.' or an empty folder name"
    if problem:
        raise UnsafePath(
            f"Refused the repository file name {filename[:200]!r}: {problem}, so it could write "
            "outside the models folder. Report the repository to its owner; nothing was written."
        )
    return PurePosixPath(filename)


def check_repo_id(repo_id: str) -> tuple[str, str]:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_REPO_PART.match(p) and p not in (".", "..") for p in parts):
        raise UnsafePath(
            f"Refused the repository id {repo_id[:200]!r}: expected 'owner/name' made of "
            "letters, digits, '.', '_' and '-'."
        )
    return parts[0], parts[1]


def library_path(models_dir: Path, repo_id: str, filename: str) -> Path:
    """models_dir/owner/name/filename, guaranteed to lie inside models_dir."""
    owner, name = check_repo_id(repo_id)
    relative = safe_relative_name(filename)
    root = Path(models_dir).resolve()
    target = (root / owner / name / relative).resolve()
    if not target.is_relative_to(root):
        raise UnsafePath(
            f"Refused {repo_id}/{filename}: it resolves to {target}, outside the models folder "
            f"{root} (a symbolic link inside the folder points out of it). Remove the link."
        )
    return target
