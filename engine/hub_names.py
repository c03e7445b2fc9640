"""Names from the Hub (repository, file, revision) checked before they become a path or a URL.

A repository is written by strangers: a file name like `../../.bashrc`, `/etc/passwd` or
`C:\\Windows\\x` must never become a path outside the models folder. Names are checked as
text first (no `..`, no absolute or drive paths, no backslashes or control characters, and none
of these hidden by percent-encoding or by look-alike characters that Unicode normalisation turns
into them); then engine.hub.paths resolves the joined path, which must still lie inside the
models folder (a symlink planted inside the folder cannot redirect the write either).

The same checks guard `hub_file_url`, the one place a Hub file's URL is built, for downloads and
for `hearth info hf://...`: an HTTP client removes `..` from a URL's path, so
`hf://owner/repo/../../x` would fetch `/owner/x` with the Hub token attached. Only URLs under
`<endpoint>/<owner>/<repo>/resolve/<revision>/` are ever built.

A module of its own, outside the engine's floors: the GGUF reader (the lowest floor) builds
Hub URLs too, for reading a header by ranges.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from pathlib import PurePosixPath
from urllib.parse import quote, unquote, urlsplit

_DRIVE = re.compile(r"^[A-Za-z]:")
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_REVISION = re.compile(r"^[A-Za-z0-9._/-]{1,255}$")  # a branch, a tag, a commit, refs/pr/N
_REPO_PREFIX = {None: "", "model": "", "dataset": "datasets/", "space": "spaces/"}


class UnsafePath(ValueError):
    """A repository or file name that would write outside the models folder."""


def safe_relative_name(filename: str) -> PurePosixPath:
    """The Hub file name as a relative path, or UnsafePath saying why it is refused."""
    problem = None
    if not filename or len(filename) > 1024:
        problem = "it is empty or too long"
    elif has_control_character(filename) or "\\" in filename:
        problem = "it holds backslashes or control characters"
    elif filename.startswith("/") or _DRIVE.match(filename):
        problem = "it is an absolute path"
    elif any(part in ("", ".", "..") for part in filename.split("/")):
        problem = "it holds '..', '.' or an empty folder name"
    elif _hidden_variant(filename):
        problem = "it hides '..', '/', '\\' or a control character in an encoded form"
    if problem:
        raise UnsafePath(
            f"Refused the repository file name {filename[:200]!r}: {problem}, so it could write "
            "outside the models folder. Report the repository to its owner; nothing was written."
        )
    return PurePosixPath(filename)


# Controls (C0, DEL and C1 such as U+0085, a line break to some readers), format characters
# (bidi overrides such as U+202E, which show a name reversed; zero-width characters),
# surrogates, and the line and paragraph separators U+2028 / U+2029.
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def has_control_character(text: str) -> bool:
    if text.isascii():
        return any(ord(c) < 32 or ord(c) == 127 for c in text)
    return any(unicodedata.category(c) in _CONTROL_CATEGORIES for c in text)


def check_repo_id(repo_id: str) -> tuple[str, str]:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_REPO_PART.match(p) and p not in (".", "..") for p in parts):
        raise UnsafePath(
            f"Refused the repository id {repo_id[:200]!r}: expected 'owner/name' made of "
            "letters, digits, '.', '_' and '-'."
        )
    return parts[0], parts[1]


def _hidden_variant(name: str) -> bool:
    """True when percent-decoding (repeated) or NFKC normalisation of `name` gives a name with
    another folder structure, a backslash or a control character: a server or a file system
    further on may decode or normalise it."""
    variants = {unicodedata.normalize("NFKC", name)}
    decoded = name
    for _ in range(3):  # %252e%252e is %2e%2e is ..
        decoded = unquote(decoded)
        variants |= {decoded, unicodedata.normalize("NFKC", decoded)}
    for variant in variants - {name}:
        parts = variant.split("/")
        if (
            len(parts) != len(name.split("/"))
            or any(part in ("", ".", "..") for part in parts)
            or "\\" in variant
            or has_control_character(variant)
        ):
            return True
    return False


def check_revision(revision: str) -> str:
    if not _REVISION.match(revision) or any(p in ("", ".", "..") for p in revision.split("/")):
        raise UnsafePath(
            f"Refused the revision {revision[:200]!r}: expected a branch, tag or commit made of "
            "letters, digits, '.', '_', '-' and '/' (no '..' or empty parts)."
        )
    return revision


def hub_file_url(
    endpoint: str, repo_id: str, filename: str, revision: str, repo_type: str | None = None
) -> str:
    """`<endpoint>/<repo_id>/resolve/<revision>/<filename>`, every part checked first (UnsafePath
    says which and why), so that no request, and no token, goes anywhere else on the Hub."""
    check_repo_id(repo_id)
    safe_relative_name(filename)
    check_revision(revision)
    if repo_type not in _REPO_PREFIX:
        raise UnsafePath(f"Refused the repository type {repo_type!r}.")
    base = f"{endpoint.rstrip('/')}/{_REPO_PREFIX[repo_type]}{repo_id}/resolve/"
    url = f"{base}{quote(revision, safe='')}/{quote(filename)}"
    # The checks above make this hold; it is asserted on the URL as an HTTP client will send it.
    path = posixpath.normpath(unquote(urlsplit(url).path))
    if not (path + "/").startswith(urlsplit(base).path) or urlsplit(url)[:2] != urlsplit(base)[:2]:
        raise UnsafePath(f"Refused {repo_id}/{filename}: its URL leaves {base}.")
    return url
