"""A handful of good models for this machine: a small catalogue (suggested_models.json, data
not code), each entry's fit planned from its header on the Hub, the ones that fit ranked.

    entries = load_catalogue()
    picks = suggest(HubClient(), request, entries)  # -> list[Suggestion], best first

Only headers cross the wire (a HEAD for the size and hash, ranged reads for the header); nothing
is downloaded until the person asks. Ranking: what fits all on the GPU first, largest first
(on a GPU a bigger model costs little speed and answers better); then what fits with offload or
on the CPU alone, smallest first (there the CPU's memory bandwidth sets the speed, and a small
model is the usable one). What does not fit is never suggested.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from engine.hub.catalog import ModelFile, quant_of
from engine.hub.client import HubClient, HubError, is_connection_problem
from engine.hub.fit import DOES_NOT_FIT, FITS, UNKNOWN, FitBadge, fit_badge
from engine.planner import PlanRequest

CATALOGUE_VERSION = 1
SHOWN = 5


@dataclass(frozen=True)
class CatalogueEntry:
    repo_id: str
    filename: str
    name: str
    why: str = ""


@dataclass(frozen=True)
class Suggestion:
    entry: CatalogueEntry
    model: ModelFile  # what the download queue takes
    badge: FitBadge


def load_catalogue(path: str | Path | None = None) -> list[CatalogueEntry]:
    """The catalogue shipped beside this module, or the file at `path`."""
    if path is None:
        text = resources.files("engine.hub").joinpath("suggested_models.json").read_text("utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    data = json.loads(text)
    if data.get("version") != CATALOGUE_VERSION:
        raise ValueError(f"suggested models: version {data.get('version')!r} is not supported")
    return [
        CatalogueEntry(m["repo_id"], m["filename"], m["name"], m.get("why", ""))
        for m in data["models"]
    ]


def rank(suggestions: Sequence[Suggestion], limit: int = SHOWN) -> list[Suggestion]:
    """Those that fit, best first (see the module docstring), at most `limit`."""
    on_gpu = [s for s in suggestions if s.badge.verdict == FITS and s.badge.on_gpu]
    elsewhere = [
        s for s in suggestions if s not in on_gpu and s.badge.verdict not in (DOES_NOT_FIT, UNKNOWN)
    ]
    on_gpu.sort(key=lambda s: -s.model.size)
    elsewhere.sort(key=lambda s: s.model.size)
    return (on_gpu + elsewhere)[:limit]


def suggest(
    client: HubClient,
    request: PlanRequest,
    entries: Sequence[CatalogueEntry],
    limit: int = SHOWN,
) -> list[Suggestion]:
    """The ranked suggestions; HubError when the Hub cannot be reached at all (entries that
    are gone from the Hub are skipped)."""
    found: list[Suggestion] = []
    for entry in entries:
        try:
            remote = client.file_metadata(entry.repo_id, entry.filename)
        except HubError as exc:
            if is_connection_problem(exc.__cause__ or exc):
                raise
            continue  # renamed or removed on the Hub: the catalogue is older than the Hub
        model = ModelFile(entry.filename, quant_of(entry.filename), (remote,))
        badge = fit_badge(model, request, endpoint=client.endpoint, token=client.token)
        found.append(Suggestion(entry, model, badge))
    return rank(found, limit)
