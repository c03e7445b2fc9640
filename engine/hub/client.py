"""Searching the Hub for GGUF repositories and listing a repository's model files.

Calls go through huggingface_hub (its HfApi, or its shared HTTP session and headers) with the
endpoint from HF_ENDPOINT (read at each HubClient, so tests and mirrors work), so proxies, tokens
and offline mode behave as in every other Hub call. Every failure becomes a HubError whose message
says what to do; without a connection it says so in a few seconds.

A search is one request with a short timeout and no retries: a person is waiting for it, and
HfApi.list_models retries a refused connection five times with back-off (24 s measured here
before the error came).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlparse

from engine.hub.catalog import ModelFile, group_model_files
from engine.hub.records import RemoteFile

SORTS = {"downloads": "downloads", "likes": "likes", "recent": "last_modified"}
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_EXPAND = ["downloads", "likes", "lastModified", "tags", "gated", "cardData"]
SEARCH_TIMEOUT_S = 6.0  # to connect, and then for each read
# Exception class names (httpx's and requests' families) that mean the network, not the Hub
_NETWORK_ERRORS = {
    "ConnectError",
    "ConnectTimeout",
    "ReadTimeout",
    "TimeoutException",
    "NetworkError",
    "TransportError",
    "ProxyError",
    "ConnectionError",  # requests', and Python's own (refused, reset)
    "Timeout",
    "TimeoutError",
    "gaierror",  # the name did not resolve
}


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


def is_connection_problem(exc: BaseException) -> bool:
    """True when `exc` (or what caused it) is a failure to reach the Hub at all."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {cls.__name__ for cls in type(current).__mro__}
        if names & _NETWORK_ERRORS:
            return True
        current = current.__cause__ or current.__context__
    return False


def no_connection_message(endpoint: str) -> str:
    host = urlparse(endpoint).hostname or endpoint
    return (
        f"No connection to the Hugging Face Hub ({host}). Check your internet connection or "
        "proxy, then search again; the models you already have work without one."
    )


def _hub_error(action: str, exc: Exception, endpoint: str = "") -> HubError:
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
    if is_connection_problem(exc):
        return HubError(no_connection_message(endpoint or "huggingface.co"))
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
        from huggingface_hub import ModelInfo, constants
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        if constants.HF_HUB_OFFLINE:
            raise HubError("Cannot search the Hub: Hearth is offline (HF_HUB_OFFLINE is set).")
        params: list[tuple[str, str | int]] = [("filter", "gguf"), ("limit", limit)]
        params.append(("sort", "lastModified" if sort == "recent" else SORTS[sort]))
        params += [("expand", field) for field in _EXPAND]
        if text.strip():
            params.append(("search", text.strip()))
        try:
            response = get_session().get(
                f"{self.endpoint}/api/models",
                params=params,
                headers=build_hf_headers(token=self.token, library_name="hearth"),
                timeout=SEARCH_TIMEOUT_S,
            )
            hf_raise_for_status(response)
            return [_summary(ModelInfo(**{"siblings": None, **item})) for item in response.json()]
        except Exception as exc:
            raise _hub_error(f"search the Hub for {text!r}", exc, self.endpoint) from exc

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
            raise _hub_error(f"look up {repo_id}/{filename}", exc, self.endpoint) from exc
        if meta.size is None:
            raise HubError(f"The Hub did not say how large {filename} is; try again later.")
        etag = (meta.etag or "").strip('"').lower()
        sha = etag if _SHA256.match(etag) else None  # a git blob's etag is a sha1: no hash
        return RemoteFile(repo_id, filename, meta.size, sha, meta.commit_hash or revision)

    def repo_files(self, repo_id: str, revision: str | None = None) -> RepoFiles:
        try:
            info = self.api.model_info(repo_id, revision=revision, files_metadata=True)
        except Exception as exc:
            raise _hub_error(f"list the files of {repo_id}", exc, self.endpoint) from exc
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
