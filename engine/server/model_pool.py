"""Models on demand: `hearth serve` without a model serves the whole Library, one worker
process per loaded model.

    pool = ModelPool(catalogue, plan, budgets, PoolSettings(...))
    entry = await pool.acquire("gemma-3-270m:Q4_K_M", keep_s=300)   # loads it if need be
    ... entry.link.generate(...) ...
    pool.release(entry)                                              # its idle time starts

A request naming a model that is not loaded loads it through the load policy (`plan`: the
planner decides, as everywhere). Several models stay loaded while their plans fit the
machine's budgets together (memory_ledger.py); when a new one needs room, the least recently
used idle ones are unloaded first. Each model is unloaded after its idle time (the last
request's `keep_alive`). A load in flight is shared: a second request for the same model waits
for it, so there are never two copies. A worker that crashed is dropped, and the next request
for its model loads it again (the request it crashed got the crash's message from its link).

Runs on the server's event loop; the blocking parts (planning, starting a worker, closing one)
run on threads.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue
from engine.server import request_params as rp
from engine.server.engine_link import EngineLink
from engine.server.errors import APIError
from engine.server.memory_ledger import Budgets, Need, models_to_unload, over_budget, shortfall_text
from engine.untrusted_text import printable_line

CATALOGUE_S = 10.0  # the Library's list is read again after this long


class ModelRefused(Exception):
    """The load policy will not load this model here; the message has the plan's numbers."""


@dataclass(frozen=True)
class PlannedModel:
    params: p.ModelParams
    need: Need  # device id -> bytes the plan predicts
    summary: str  # e.g. "512 tokens · f16 KV · on the CPU"


@dataclass(frozen=True)
class PoolSettings:
    keep_alive_s: float = 300.0  # Ollama's default: 5 minutes
    queue_length: int = 32
    stop_grace_s: float = 60.0
    load_timeout_s: float = 600.0


@dataclass(eq=False)
class LoadedModel:
    """One model of the pool: loading (`loading` set) or loaded (`link` set)."""

    path: Path
    model_id: str
    need: Need = field(default_factory=dict)
    client: EngineClient | None = None
    link: EngineLink | None = None
    loading: asyncio.Future | None = None
    leases: int = 0  # requests using it now
    last_used: float = field(default_factory=time.monotonic)
    last_used_unix: float = field(default_factory=time.time)
    keep_s: float = 300.0
    expiry: asyncio.TimerHandle | None = None

    @property
    def loaded(self) -> p.ModelLoaded | None:
        return None if self.link is None else self.link.model

    @property
    def crashed(self) -> bool:
        return self.link is not None and self.link.crashed is not None

    @property
    def expires_at_unix(self) -> float:
        """When it is unloaded for idleness (inf: never; the time of the last use while busy)."""
        return self.last_used_unix + self.keep_s


StartWorker = Callable[[p.ModelParams, float], tuple[EngineClient, p.ModelLoaded]]


class ModelPool:
    def __init__(
        self,
        catalogue: Callable[[], Sequence[Path]],
        plan: Callable[[Path], PlannedModel],
        budgets: Budgets,
        settings: PoolSettings,
        *,
        library: Path | None = None,
        start_worker: StartWorker | None = None,
        say: Callable[[str], None] = lambda line: None,
    ):
        self._catalogue = catalogue
        self._plan = plan
        self.budgets = budgets
        self.settings = settings
        self._library = library
        self._start_worker = start_worker or start_worker_with
        self._say = say
        self._entries: dict[Path, LoadedModel] = {}
        self._known: list[tuple[Path, tuple[str, ...]]] | None = None
        self._known_at = 0.0
        self._tasks: set[asyncio.Future] = set()

    # -- names ----------------------------------------------------------------------------------

    def available(self, rescan: bool = False) -> list[tuple[Path, tuple[str, ...]]]:
        """Every model the pool can serve, with the names it goes by (model_names); the
        Library is looked at again when asked, or after CATALOGUE_S (a download finished)."""
        now = time.monotonic()
        # A miss looks again, but at most once a second: unknown names sent in a loop must not
        # make the server read every model's header for each of them.
        age = now - self._known_at
        if self._known is None or (rescan and age > 1.0) or age > CATALOGUE_S:
            self._known = [(path, rp.model_names(str(path), self._library))
                           for path in self._catalogue()]  # fmt: skip
            self._known_at = now
        return self._known

    def path_for(self, requested: str) -> Path:
        """The model a request names (404 listing some names when none is called that)."""
        name = requested.strip().lower().removesuffix(":latest")
        for rescan in (False, True):  # a model downloaded since the last look is found too
            for path, names in self.available(rescan):
                if name in names:
                    return path
        known = ", ".join(rp.served_model_id(str(path)) for path, _ in self.available()[:10])
        raise APIError(
            404,
            f"No model called {requested[:100]!r} is in this server's Library. Models: "
            f"{known or 'none'} (GET /v1/models lists them all).",
            param="model",
            code="model_not_found",
        )

    def loaded_models(self) -> list[LoadedModel]:
        """The loaded ones, most recently used first."""
        self._drop_crashed()
        done = [e for e in self._entries.values() if e.loaded is not None and e.loading is None]
        return sorted(done, key=lambda e: -e.last_used)

    def entry_for(self, path: Path) -> LoadedModel | None:
        return self._entries.get(path)

    # -- using a model --------------------------------------------------------------------------

    async def acquire(self, requested: str, keep_s: float | None = None) -> LoadedModel:
        """The model `requested` names, loaded (loading it, or waiting for its load in flight),
        with one more lease; release() it when the request ends. An empty name: the model used
        last. APIError: 404 unknown name, 400 a model that cannot fit even alone, 503 no room
        now (the others are busy) or a load that failed."""
        self._drop_crashed()
        if not requested.strip():
            loaded = self.loaded_models()
            if not loaded:
                raise APIError(400, "Name a model: GET /v1/models lists this server's models.",
                               param="model")  # fmt: skip
            path = loaded[0].path
        else:
            path = self.path_for(requested)
        entry = self._entries.get(path)
        if entry is None:
            entry = LoadedModel(path=path, model_id=rp.served_model_id(str(path)))
            self._entries[path] = entry
            entry.loading = asyncio.ensure_future(self._load(entry))
        entry.leases += 1  # before waiting: an entry being waited for is never unloaded
        try:
            if entry.loading is not None:
                await asyncio.shield(entry.loading)
        except BaseException:
            entry.leases -= 1
            raise
        entry.keep_s = self.settings.keep_alive_s if keep_s is None else keep_s
        entry.last_used, entry.last_used_unix = time.monotonic(), time.time()
        if entry.expiry is not None:
            entry.expiry.cancel()
            entry.expiry = None
        return entry

    def release(self, entry: LoadedModel) -> None:
        """A request using `entry` ended: once none does, its idle time starts."""
        entry.leases = max(0, entry.leases - 1)
        entry.last_used, entry.last_used_unix = time.monotonic(), time.time()
        if entry.leases or self._entries.get(entry.path) is not entry:
            return
        if not math.isinf(entry.keep_s):
            loop = asyncio.get_running_loop()
            entry.expiry = loop.call_later(max(0.0, entry.keep_s), self._expire_later, entry)

    def _expire_later(self, entry: LoadedModel) -> None:
        task = asyncio.ensure_future(self._expire(entry))
        self._tasks.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(self._tasks.discard)

    async def unload(self, requested: str) -> bool:
        """Unload the named model now if it is loaded and idle (Ollama's keep_alive 0 with no
        prompt); False when it was not loaded."""
        entry = self._entries.get(self.path_for(requested))
        if entry is None or entry.loading is not None:
            return False
        if entry.leases:
            entry.keep_s = 0.0  # unloaded as its last request ends
            return True
        await self._unload(entry, "as asked")
        return True

    def close(self) -> None:
        """Stop every loaded model's worker (the server is ending; on its event loop's thread).
        A load still in flight ends with this process: its worker reads the end of its input."""
        for entry in list(self._entries.values()):
            self._forget(entry)
            if entry.client is not None:
                entry.client.close()

    # -- loading and unloading ------------------------------------------------------------------

    async def _load(self, entry: LoadedModel) -> None:
        try:
            try:
                planned = await asyncio.to_thread(self._plan, entry.path)
            except ModelRefused as exc:
                raise APIError(400, str(exc), param="model", code="model_does_not_fit") from None
            alone = over_budget([planned.need], self.budgets)
            if alone:  # the plan fits the machine but not the server's own limit
                raise APIError(
                    400,
                    f"{entry.model_id} ({planned.summary}) needs {shortfall_text(alone)} than "
                    "this server may use even with no other model loaded. Start the server "
                    "with a higher --memory-limit, or use a smaller quantization.",
                    param="model",
                    code="model_does_not_fit",
                )
            entry.need = planned.need
            await self._make_room(entry)
            self._say(f"[Loading {printable_line(entry.model_id)}: {planned.summary}.]")
            started = time.monotonic()
            client, loaded = await asyncio.to_thread(
                self._start_worker, planned.params, self.settings.load_timeout_s
            )
            entry.client = client
            link = EngineLink(client, n_parallel=loaded.n_parallel,
                              queue_length=self.settings.queue_length,
                              stop_grace_s=self.settings.stop_grace_s)  # fmt: skip
            link.model, link.template_note = loaded, loaded.chat_template
            link.reload_on_demand = True
            link.attach(asyncio.get_running_loop())
            entry.link = link
            self._say(f"[{printable_line(entry.model_id)} is loaded "
                      f"({time.monotonic() - started:.1f} s).]")  # fmt: skip
        except BaseException:
            self._forget(entry)
            raise
        finally:
            entry.loading = None

    async def _make_room(self, entry: LoadedModel) -> None:
        others = sorted(
            (e for e in self._entries.values() if e is not entry), key=lambda e: e.last_used
        )
        # A model loading or answering a request is not unloaded for another.
        table = [(e, e.need, e.leases > 0 or e.loading is not None) for e in others]
        gone = models_to_unload(table, entry.need, self.budgets)
        if gone is None:
            busy = ", ".join(e.model_id for e in others)
            raise APIError(
                503,
                f"{entry.model_id} does not fit beside the models answering requests now "
                f"({busy}); retry when they are done.",
                headers={"Retry-After": "5"},
            )
        for victim in gone:
            await self._unload(victim, f"to make room for {entry.model_id}")

    async def _expire(self, entry: LoadedModel) -> None:
        if entry.leases == 0 and entry.loading is None and self._entries.get(entry.path) is entry:
            await self._unload(entry, "idle")

    async def _unload(self, entry: LoadedModel, why: str) -> None:
        self._forget(entry)
        self._say(f"[Unloading {printable_line(entry.model_id)} ({why}).]")
        if entry.client is not None:
            await asyncio.to_thread(entry.client.close)

    def _forget(self, entry: LoadedModel) -> None:
        if self._entries.get(entry.path) is entry:
            del self._entries[entry.path]
        if entry.expiry is not None:
            entry.expiry.cancel()
            entry.expiry = None
        if entry.link is not None:
            entry.link.detach()

    def _drop_crashed(self) -> None:
        """A worker that died is forgotten: the next request for its model loads it again."""
        for entry in [e for e in self._entries.values() if e.crashed and e.loading is None]:
            self._forget(entry)
            self._say(f"[{printable_line(entry.model_id)} stopped; the next request for it "
                      "loads it again.]")  # fmt: skip
            if entry.client is not None:
                entry.client.kill()  # what is left of it (nothing reports a kill)


class _StartEvents(EventQueue):
    """The start's and the load's events, for the thread that waits on them; afterwards every
    event goes to the model's link only (a queue nobody reads would grow with every token)."""

    keeping = True

    def __call__(self, event) -> None:
        if self.keeping:
            super().__call__(event)


def start_worker_with(
    params: p.ModelParams, timeout_s: float
) -> tuple[EngineClient, p.ModelLoaded]:
    """A new worker process with `params` loaded (blocking). APIError 500 with the worker's
    reason when it does not load."""
    events = _StartEvents()
    client = EngineClient(events)
    client.start()
    try:
        ready = events.wait_for(p.Ready, timeout=timeout_s)
        if isinstance(ready, EngineCrashed):
            raise APIError(500, f"The engine did not start: {ready.message}")
        client.load(params)
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=timeout_s)
        if isinstance(loaded, EngineCrashed | p.LoadFailed):
            raise APIError(500, f"The model did not load: {loaded.message}")
    except TimeoutError:
        events.keeping = False
        client.close()
        raise APIError(
            504,
            f"The model did not load within {timeout_s:g} s; retry, or "
            "check the server's console for the engine's lines.",
        ) from None
    except BaseException:
        events.keeping = False
        client.close()
        raise
    events.keeping = False
    return client, loaded
