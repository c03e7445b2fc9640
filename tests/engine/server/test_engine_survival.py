"""The worker's death and a worker stuck inside one C call, as the link and `hearth serve`'s
keeper see them (stand-in clients; every wait bounded to a fraction of a second)."""

import asyncio
import threading
import time

import pytest

from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed
from engine.server import engine_keeper
from engine.server.engine_keeper import EngineKeeper
from engine.server.engine_link import EngineLink, GenerationRequest
from engine.server.errors import APIError
from tests.engine.server.stand_in import LOADED
from tests.engine.server.test_engine_link import StandInClient

CRASH = EngineCrashed(exit_code=-9, last_lines=())


class RecordingClient(StandInClient):
    def __init__(self):
        super().__init__()
        self.aborted = 0
        self.embedded = []

    def abort_hung(self):
        self.aborted += 1

    def embed(self, inputs, query: str = ""):
        self.embedded.append(inputs)
        return 100 + len(self.embedded)


class RecordingKeeper:
    def __init__(self):
        self.reasons = []
        self.restarting = False

    def restart(self, reason):
        self.reasons.append(reason)
        self.restarting = True


def _link(client, **kwargs) -> EngineLink:
    link = EngineLink(client, n_parallel=2, queue_length=2, **kwargs)
    link.model = LOADED
    link.attach(asyncio.get_running_loop())
    link.say = lambda line: None
    return link


async def _walk_away_from_a_generation(link: EngineLink) -> None:
    """A client that starts a generation and goes away (or a request that times out)."""
    events = link.generate(GenerationRequest(prompt="x"))
    waiting = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.01)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await events.aclose()


def test_a_dead_worker_is_restarted_and_requests_meanwhile_get_503_with_retry_after():
    async def scenario():
        keeper = RecordingKeeper()
        link = _link(RecordingClient(), keeper=keeper)
        link.client.play(CRASH)
        await asyncio.sleep(0.01)
        assert keeper.reasons and "killed by SIGKILL" in keeper.reasons[0]
        with pytest.raises(APIError) as refused:
            link.require_model()
        assert refused.value.status == 503 and refused.value.headers["Retry-After"]
        assert "started again" in refused.value.message
        link.client.play(LOADED)  # the keeper loaded the model again
        await asyncio.sleep(0.01)
        assert link.require_model() is LOADED

    asyncio.run(scenario())


def test_a_stopped_generation_the_worker_does_not_end_gets_the_worker_killed():
    async def scenario():
        link = _link(RecordingClient(), stop_grace_s=0.05)
        await _walk_away_from_a_generation(link)
        assert link.client.stopped == [1]
        await asyncio.sleep(0.15)  # the worker never said GenerationDone: it is stuck
        return link.client.aborted

    assert asyncio.run(scenario()) == 1


def test_a_worker_that_does_stop_is_left_alone():
    async def scenario():
        link = _link(RecordingClient(), stop_grace_s=0.05)
        await _walk_away_from_a_generation(link)
        link.client.play(p.GenerationFailed(request_id=1, message="stopped"))
        await asyncio.sleep(0.15)
        return link.client.aborted

    assert asyncio.run(scenario()) == 0


def test_embeddings_past_the_time_limit_are_stopped_in_the_worker():
    async def scenario():
        link = _link(RecordingClient(), stop_grace_s=10)
        with pytest.raises(APIError) as late:
            await link.embed(("a", "b"), timeout_s=0.02)
        assert late.value.status == 504 and "stopped" in late.value.message
        return link.client.stopped

    assert asyncio.run(scenario()) == [101]


def test_a_disconnect_during_embeddings_stops_them_too():
    async def scenario():
        link = _link(RecordingClient(), stop_grace_s=10)
        task = asyncio.ensure_future(link.embed(("a",), timeout_s=30))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return link.client.stopped, link.in_flight

    assert asyncio.run(scenario()) == ([101], 0)


# -- the keeper ---------------------------------------------------------------------------------


class RestartableClient:
    """Says Ready when started and ModelLoaded (or LoadFailed) when asked to load."""

    def __init__(self, loads: bool = True):
        self.loads, self.listeners, self.started, self.killed = loads, [], 0, 0

    def add_listener(self, callback):
        self.listeners.append(callback)

    def remove_listener(self, callback):
        self.listeners.remove(callback)

    def _play(self, event):
        for listener in list(self.listeners):
            listener(event)

    def kill(self):
        self.killed += 1

    def start(self):
        self.started += 1
        self._play(p.Ready(pid=1, llama_system_info="", gpu_offload_supported=False))

    def load(self, params):
        self._play(LOADED if self.loads else p.LoadFailed(path=params.path, message="no room"))


def _keeper(client):
    done, lines, ended = threading.Event(), [], []

    def say(line):
        lines.append(line)
        if "back" in line:
            done.set()

    def give_up(message):
        ended.append(message)
        done.set()

    keeper = EngineKeeper(client, p.ModelParams(path="/m/tiny.gguf"), say=say, give_up=give_up,
                          load_timeout_s=2)  # fmt: skip
    return keeper, done, lines, ended


def test_the_keeper_starts_the_worker_again_and_loads_the_same_model():
    client = RestartableClient()
    keeper, done, lines, ended = _keeper(client)
    keeper.restart("The engine process was killed by SIGKILL.")
    assert done.wait(5) and not ended
    assert client.killed == 1 and client.started == 1 and not keeper.restarting
    assert "SIGKILL" in lines[0] and "back" in lines[-1]


def test_a_model_that_no_longer_loads_ends_the_server_with_the_reason():
    keeper, done, _, ended = _keeper(RestartableClient(loads=False))
    keeper.restart("The engine process exited with status 1.")
    assert done.wait(5) and "no room" in ended[0]


def test_a_worker_that_keeps_dying_ends_the_server_instead_of_restarting_for_ever():
    keeper, _, _, ended = _keeper(RestartableClient())
    keeper._restarts.extend([time.monotonic()] * engine_keeper.MAX_RESTARTS)  # just now
    keeper.restart("The engine process was killed by SIGSEGV.")
    assert ended and "times within" in ended[0]


def test_a_reply_that_stops_bringing_tokens_is_ended_with_a_504_that_says_why():
    from engine.server.completion import Reply, pieces

    class OneTokenThenNothing:
        closed = False

        async def generate(self, request):
            try:
                yield p.TokenText(request_id=1, text="{")
                await asyncio.Event().wait()  # the sampler searches inside one C call
            finally:
                OneTokenThenNothing.closed = True  # closing it stops the generation

    async def scenario():
        reply = Reply()
        with pytest.raises(APIError) as late:
            async for _ in pieces(OneTokenThenNothing(), GenerationRequest(), 30, reply, 0.05):
                pass
        return late.value, reply

    error, reply = asyncio.run(scenario())
    assert error.status == 504 and "no new token for 0.05 s" in error.message
    assert reply.text == "{" and OneTokenThenNothing.closed


def test_a_request_whose_end_was_sent_but_not_read_is_not_watched():
    async def scenario():
        link = _link(RecordingClient(), stop_grace_s=0.05)
        events = link.generate(GenerationRequest(prompt="x"))
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.01)
        link.client.play(p.TokenText(request_id=1, text="a"))
        link.client.play(p.GenerationFailed(request_id=1, message="done"))
        await asyncio.sleep(0.01)  # both dispatched; the reader has taken only the first
        await waiting
        await events.aclose()  # the client went away before reading the end
        await asyncio.sleep(0.15)
        return link.client.aborted

    assert asyncio.run(scenario()) == 0
