"""The Hub and the local library: search, file lists with fit badges, verified downloads.

    client = HubClient()                                   # HF_ENDPOINT honoured
    client.search("llama 3", sort="downloads")             # -> [RepoSummary]
    listing = client.repo_files("org/model-GGUF")          # -> RepoFiles, models by quant
    fit_badge(listing.models[0], request)                  # -> FitBadge, from the remote header
    queue = DownloadQueue(models_dir); queue.restore(); queue.start(); queue.add(model)
    Library(models_dir).scan()                             # -> [LocalModel]

Qt-free: the GUI (app/library/panel.py) runs these off its thread and forwards the callbacks.
"""

from engine.hub.catalog import ModelFile, by_quant, group_model_files, quant_of
from engine.hub.client import HubClient, HubError, RepoFiles, RepoSummary
from engine.hub.control import CANCEL, PAUSE, StopFlag
from engine.hub.download import Downloader, RetryPolicy
from engine.hub.fit import FitBadge, fit_badge, local_fit_badge
from engine.hub.library import Library, LibraryError, LocalModel
from engine.hub.paths import UnsafePath, library_path
from engine.hub.queue import DownloadQueue, Job
from engine.hub.records import (
    ChecksumMismatch,
    DiskFull,
    DownloadError,
    DownloadStopped,
    Progress,
    RemoteFile,
)
from engine.hub.settings import HubSettings, load_settings, save_settings

__all__ = [
    "CANCEL",
    "PAUSE",
    "ChecksumMismatch",
    "DiskFull",
    "DownloadError",
    "DownloadQueue",
    "DownloadStopped",
    "Downloader",
    "FitBadge",
    "HubClient",
    "HubError",
    "HubSettings",
    "Job",
    "Library",
    "LibraryError",
    "LocalModel",
    "ModelFile",
    "Progress",
    "RemoteFile",
    "RepoFiles",
    "RepoSummary",
    "RetryPolicy",
    "StopFlag",
    "UnsafePath",
    "by_quant",
    "fit_badge",
    "group_model_files",
    "library_path",
    "load_settings",
    "local_fit_badge",
    "quant_of",
    "save_settings",
]
