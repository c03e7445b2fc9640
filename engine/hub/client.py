"""Searching the Hub for GGUF repositories and listing a repository's model files.

Calls go through huggingface_hub's HfApi with the endpoint from HF_ENDPOINT (read at each
HubClient, so tests and mirrors work), so proxies, tokens and offline mode behave as in every
other Hub call. Every failure becomes a HubError whose message says what to do.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.hub.catalog import ModelFile, group_model_files
from engine.hub.records import RemoteFile

SORTS = {"downloads": "downloads", "likes": "likes", "recent": "last_modified"}
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_EXPAND = ["downloads", "likes", "lastModified", "tags", "gated", "cardData"]


class HubError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class RepoSummary:
    repo_id: str
    downloads: int
    likes: int
    last_modified: datetime | None
    license: str | None
    gated: bool


@dataclass(frozen=True)
class RepoFiles:
    repo_id: str
    revision: str  # the commit the listing is from: downloads use it, so a set stays consistent
    license: str | None
    gated: bool
    models: tuple[ModelFile, ...]


def _license(info: Any) -> str | None:
    card = getattr(info, "card_data", None)
    if card is not None:
        value = card.get("license") if hasattr(card, "get") else None
        if value:
            return str(value)
    for tag in getattr(info, "tags", None) or ():
        if tag.startswith("license:"):
            return tag.split(":", 1)[1]
    return None


def _summary(info: Any) -> RepoSummary:
    return RepoSummary(
        repo_id=info.id,
        downloads=info.downloads or 0,
        likes=info.likes or 0,
        last_modified=info.last_modified,
        license=_license(info),
        gated=bool(info.gated),
    )


def _hub_error(action: str, exc: Exception) -> HubError:
    from huggingface_hub.errors import (
        GatedRepoError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(f"Cannot {action}: Hearth is offline (HF_HUB_OFFLINE is set).")
    if isinstance(exc, GatedRepoError):
        return HubError(
            f"Cannot {action}: the repository is gated. Accept its terms on the Hub and log in "
            "with a token."
        )
    if isinstance(exc, RepositoryNotFoundError):
        return HubError(f"Cannot {action}: no such repository (or it is private).")
    return HubError(
        f"Cannot {action}: {type(exc).__name__}: {str(exc)[:300]}. Check your connection and "
        "try again."
    )


class HubClient:
    def __init__(self, endpoint: str | None = None, token: str | bool | None = None) -> None:
        from huggingface_hub import HfApi, constants

        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip(
            "/"
        )
        self.token = token
        self.api = HfApi(endpoint=self.endpoint, token=token, library_name="hearth")

    def search(self, text: str, sort: str = "downloads", limit: int = 30) -> list[RepoSummary]:
        """GGUF repositories whose name contains `text`, most downloaded (or liked, or recent)
        first."""
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {sorted(SORTS)}, not {sort!r}")
        try:
            found = self.api.list_models(
                search=text.strip() or None,
                filter="gguf",
                sort=SORTS[sort],
                limit=limit,
                expand=_EXPAND,
            )
            return [_summary(info) for info in found]
        except Exception as exc:
            raise _hub_error(f"search the Hub for {text!r}", exc) from exc

    def file_metadata(self, repo_id: str, filename: str, revision: str = "main") -> RemoteFile:
        """One file's size and sha256 from a HEAD on its resolve URL (X-Linked-Size and
        X-Linked-Etag, which for an LFS file is its sha256), without listing the repository."""
        from huggingface_hub import get_hf_file_metadata, hf_hub_url

        from engine.hub.paths import safe_relative_name

        safe_relative_name(filename)
        url = hf_hub_url(repo_id, filename, revision=revision, endpoint=self.endpoint)
        try:
            meta = get_hf_file_metadata(url, token=self.token, endpoint=self.endpoint)
        except Exception as exc:
            raise _hub_error(f"look up {repo_id}/{filename}", exc) from exc
        if meta.size is None:
            raise HubError(f"The Hub did not say how large {filename} is; try again later.")
        etag = (meta.etag or "").strip('"').lower()
        sha = etag if _SHA256.match(etag) else None  # a git blob's etag is a sha1: no hash
        return RemoteFile(repo_id, filename, meta.size, sha, meta.commit_hash or revision)

    def repo_files(self, repo_id: str, revision: str | None = None) -> RepoFiles:
        try:
            info = self.api.model_info(repo_id, revision=revision, files_metadata=True)
        except Exception as exc:
            raise _hub_error(f"list the files of {repo_id}", exc) from exc
        commit = info.sha or revision or "main"
        remote = []
        for sibling in info.siblings or ():
            lfs = sibling.lfs
            size = lfs.size if lfs is not None else sibling.size
            if size is None:
                continue
            sha = lfs.sha256 if lfs is not None else None
            remote.append(RemoteFile(repo_id, sibling.rfilename, int(size), sha, commit))
        return RepoFiles(
            repo_id=info.id,
            revision=commit,
            license=_license(info),
            gated=bool(info.gated),
            models=tuple(group_model_files(remote)),
        )
