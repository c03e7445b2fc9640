"""Where a file from the Hub goes in the models folder, refusing names that would leave it.

The names are checked as text by engine.hub_names (no `..`, absolute or drive paths,
backslashes, control characters, or encoded forms of them); then the joined path is resolved and
must still lie inside the folder, so a symlink planted inside the folder cannot redirect the
write either.
"""

from __future__ import annotations

from pathlib import Path

from engine.hub_names import (
    UnsafePath,
    check_repo_id,
    check_revision,
    hub_file_url,
    safe_relative_name,
)

__all__ = [
    "UnsafePath",
    "check_repo_id",
    "check_revision",
    "hub_file_url",
    "library_path",
    "safe_relative_name",
]


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
