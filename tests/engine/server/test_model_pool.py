"""The model pool's rules with stand-in workers (engine/server/model_pool.py): one load per
model however many requests wait for it, LRU unloading within the budget, busy models kept,
idle unloading after keep_alive, refusals with the plan's numbers, and a crashed worker
loaded again by the next request. Real workers: test_models_on_demand.py."""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path

import pytest

from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed
from engine.server.app import create_app
from engine.server.config import ServerConfig
from engine.server.errors import APIError
from engine.server.model_pool import ModelPool, ModelRefused, PlannedModel, PoolSettings
from engine.server.server_state import ServerState
from tests.engine.server.stand_in import STATS, call

MODELS = [Path(f"/lib/o/{n}.gguf") for n in ("a/A-Q4_K_M", "b/B-Q8_0", "c/C-Q4_0", "d/Huge-F16")]
NEEDS = {"A-Q4_K_M": 6, "B-Q8_0": 5, "C-Q4_0": 4}


class FakeClient:
    def __init__(self, name: str):
        self.name, self.closed, self.killed = name, False, False

    def add_listener(self, callback) -> None:
        pass

    def remove_listener(self, callback) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def kill(self) -> None:
        self.killed = True


class Workers:
    """start_worker for the pool: counts the starts; a start can be held until released."""

    def __init__(self):
        self.started: list[str] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, params: p.ModelParams, timeout_s: float):
        self.gate.wait(5)
        name = Path(params.path).stem
        self.started.append(name)
        loaded = p.ModelLoaded(path=params.path, description="test Q4", n_ctx=256, n_ctx_train=256,
                               n_params=1, size_bytes=1, n_layers=1, n_gpu_layers=0,
                               flash_attn="off", chat_template="", load_seconds=0.0)  # fmt: skip
        return FakeClient(name), loaded


def plan(path: Path) -> PlannedModel:
    if path.stem == "Huge-F16":
        raise ModelRefused("Huge-F16.gguf needs 1.00 GiB more on system RAM than is free.")
    return PlannedModel(p.ModelParams(path=str(path)), {"host": NEEDS[path.stem]}, "256 tokens")


def pool_with(workers: Workers, budget: int = 12, keep_s: float = 300.0) -> ModelPool:
    return ModelPool(lambda: MODELS, plan, {"host": budget}, PoolSettings(keep_alive_s=keep_s),
                     library=Path("/lib"), start_worker=workers)  # fmt: skip


async def until(condition, seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not within the time"
        await asyncio.sleep(0.005)


def test_requests_waiting_for_a_load_share_it():
    workers = Workers()

    async def go():
        pool = pool_with(workers)
        workers.gate.clear()  # the load is in flight while the other requests come
        first = asyncio.ensure_future(pool.acquire("a-q4_k_m"))
        others = [asyncio.ensure_future(pool.acquire("o/a:latest")) for _ in range(3)]
        await asyncio.sleep(0.01)
        workers.gate.set()
        entries = await asyncio.gather(first, *others)
        assert len({id(e) for e in entries}) == 1 and entries[0].leases == 4
        return [m.model_id for m in pool.loaded_models()]

    assert asyncio.run(go()) == ["A-Q4_K_M"]
    assert workers.started == ["A-Q4_K_M"]  # never two copies


def test_the_least_recently_used_idle_model_makes_room():
    workers = Workers()

    async def go():
        pool = pool_with(workers, budget=12)
        a = await pool.acquire("A-Q4_K_M")
        pool.release(a)
        b = await pool.acquire("B-Q8_0")  # 6 + 5 fit 12: both stay
        assert {m.model_id for m in pool.loaded_models()} == {"A-Q4_K_M", "B-Q8_0"}
        pool.release(b)
        pool.release(await pool.acquire("A-Q4_K_M"))  # A used last now: B is the least recent
        c = await pool.acquire("C-Q4_0")  # 6 + 5 + 4 do not fit 12: B goes, A stays
        assert [m.model_id for m in pool.loaded_models()] == ["C-Q4_0", "A-Q4_K_M"]
        assert b.client.closed and not a.client.closed and not c.client.closed

    asyncio.run(go())


def test_a_model_answering_a_request_is_not_unloaded_for_another():
    async def go():
        pool = pool_with(Workers(), budget=10)
        await pool.acquire("A-Q4_K_M")  # held: a request is using it
        with pytest.raises(APIError) as caught:
            await pool.acquire("B-Q8_0")
        assert caught.value.status == 503 and "A-Q4_K_M" in caught.value.message
        assert [m.model_id for m in pool.loaded_models()] == ["A-Q4_K_M"]

    asyncio.run(go())


def test_a_model_that_cannot_fit_alone_is_refused_with_the_plans_numbers():
    async def go():
        pool = pool_with(Workers(), budget=10)
        with pytest.raises(APIError) as refused:
            await pool.acquire("Huge-F16")
        assert (
            refused.value.status == 400 and "1.00 GiB more on system RAM" in refused.value.message
        )
        pool.budgets = {"host": 5}  # fits the machine, not the server's --memory-limit
        with pytest.raises(APIError) as over:
            await pool.acquire("A-Q4_K_M")
        assert over.value.status == 400 and "--memory-limit" in over.value.message
        assert "needs 1 B more on host" in over.value.message
        assert pool.loaded_models() == []

    asyncio.run(go())


def test_an_unknown_name_is_404_and_no_name_is_the_last_used_model():
    async def go():
        pool = pool_with(Workers())
        with pytest.raises(APIError) as unknown:
            await pool.acquire("gpt-4o")
        assert unknown.value.status == 404 and "A-Q4_K_M" in unknown.value.message
        with pytest.raises(APIError) as none_yet:
            await pool.acquire("")
        assert none_yet.value.status == 400
        pool.release(await pool.acquire("b-q8_0"))
        assert (await pool.acquire("")).model_id == "B-Q8_0"

    asyncio.run(go())


@pytest.mark.parametrize(("keep_s", "unloaded"), [(0.0, True), (0.02, True), (math.inf, False)])
def test_an_idle_model_unloads_after_its_keep_alive(keep_s, unloaded):
    async def go():
        pool = pool_with(Workers())
        entry = await pool.acquire("A-Q4_K_M", keep_s)
        assert entry.expires_at_unix == pytest.approx(entry.last_used_unix + keep_s)
        pool.release(entry)
        if unloaded:
            await until(lambda: entry.client.closed)
            assert pool.loaded_models() == []
        else:
            await asyncio.sleep(0.05)
            assert pool.loaded_models() == [entry] and not entry.client.closed

    asyncio.run(go())


def test_a_request_in_time_keeps_the_model_loaded():
    async def go():
        pool = pool_with(Workers())
        entry = await pool.acquire("A-Q4_K_M", 0.05)
        pool.release(entry)
        again = await pool.acquire("A-Q4_K_M", 300.0)  # before its idle time ran out
        await asyncio.sleep(0.1)
        assert again is entry and not entry.client.closed

    asyncio.run(go())


def test_a_crashed_worker_is_loaded_again_by_the_next_request():
    workers = Workers()

    async def go():
        pool = pool_with(workers)
        entry = await pool.acquire("A-Q4_K_M")
        entry.link._dispatch(EngineCrashed(exit_code=-6, last_lines=("abort",)))
        pool.release(entry)
        again = await pool.acquire("A-Q4_K_M")
        assert again is not entry and again.loaded is not None and entry.client.killed

    asyncio.run(go())
    assert workers.started == ["A-Q4_K_M", "A-Q4_K_M"]


class StreamingClient(FakeClient):
    """A worker that answers a generation in two pieces, the second after the route has
    returned its streaming response, noting how many requests hold its model then."""

    def __init__(self, name: str, pool_of):
        super().__init__(name)
        self.listeners, self.pool_of, self.leases_late = [], pool_of, []

    def add_listener(self, callback) -> None:
        self.listeners.append(callback)

    def generate(self, **request) -> int:
        loop = asyncio.get_running_loop()

        def later() -> None:
            entry = self.pool_of().loaded_models()[0]
            self.leases_late.append(entry.leases)
            for callback in self.listeners:
                callback(p.TokenText(request_id=7, text=" there"))
                callback(p.GenerationDone(request_id=7, stop_reason="eos", stats=STATS))

        for callback in self.listeners:
            callback(p.TokenText(request_id=7, text="Hi"))
        loop.call_later(0.05, later)
        return 7

    def stop(self, request_id: int) -> None:
        pass


def test_a_stream_holds_its_model_until_it_ends():
    clients: list[StreamingClient] = []
    pool: list[ModelPool] = []

    def start_worker(params, timeout_s):
        _, loaded = Workers()(params, timeout_s)
        clients.append(StreamingClient("A", lambda: pool[0]))
        return clients[-1], loaded

    pool.append(ModelPool(lambda: MODELS, plan, {"host": 12}, PoolSettings(),
                          library=Path("/lib"), start_worker=start_worker))  # fmt: skip
    app = create_app(ServerState(link=None, config=ServerConfig(), models=pool[0]))
    body = {"model": "A-Q4_K_M", "messages": [{"role": "user", "content": "Hi"}],
            "keep_alive": 0}  # fmt: skip
    status, _, content = call(app, "POST", "/api/chat", body)
    assert status == 200 and b"Hi" in content and b" there" in content
    assert clients[0].leases_late == [1]  # the route had returned; the stream still held it
    assert [e.leases for e in pool[0]._entries.values()] in ([0], [])  # released at its end


@pytest.mark.parametrize(
    ("cause", "reloads", "said"),
    [((), True, "killed by SIGABRT. The server loads the model again; retry"),
     (("GGML_ASSERT(x) failed",), True, "llama.cpp said: GGML_ASSERT(x) failed The server"),
     ((), False, "SIGABRT. Reload the model in Hearth, then retry.")],
)  # fmt: skip
def test_a_crash_is_told_with_its_cause_and_what_happens_next(cause, reloads, said):
    from engine.server.errors import crash_message

    crash = EngineCrashed(exit_code=-6, last_lines=(), cause_lines=cause)
    assert said in crash_message(crash, reloads)
