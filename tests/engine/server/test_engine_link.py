"""The link between routes and the worker: admission past the bound, and stopping what nobody
reads any more (with a stand-in client that records commands and plays events)."""

import asyncio

import pytest

from engine.runtime import protocol as p
from engine.server.engine_link import EngineLink, GenerationRequest
from engine.server.errors import APIError
from tests.engine.server.stand_in import STATS

LOADED = p.ModelLoaded(path="/m/x.gguf", description="x", n_ctx=512, n_ctx_train=512,
                       n_params=1, size_bytes=1, n_layers=1, n_gpu_layers=0, flash_attn="on",
                       chat_template="", load_seconds=0.0)  # fmt: skip


class StandInClient:
    def __init__(self):
        self.listeners, self.generated, self.stopped = [], [], []

    def add_listener(self, callback):
        self.listeners.append(callback)

    def remove_listener(self, callback):
        self.listeners.remove(callback)

    def generate(self, **kwargs) -> int:
        self.generated.append(kwargs)
        return len(self.generated)

    def stop(self, request_id=None):
        self.stopped.append(request_id)

    def play(self, event):
        for listener in self.listeners:
            listener(event)


def _link(client, n_parallel=1, queue_length=1) -> EngineLink:
    link = EngineLink(client, n_parallel=n_parallel, queue_length=queue_length)
    link.model = LOADED
    link.attach(asyncio.get_running_loop())
    return link


def test_past_the_queue_a_request_gets_503_with_retry_after():
    async def scenario():
        client = StandInClient()
        link = _link(client)
        first, second = link.generate(GenerationRequest()), link.generate(GenerationRequest())
        waits = [asyncio.ensure_future(anext(g)) for g in (first, second)]
        await asyncio.sleep(0.01)
        assert link.in_flight == 2
        with pytest.raises(APIError) as refused:
            await anext(link.generate(GenerationRequest()))
        assert refused.value.status == 503 and refused.value.headers["Retry-After"]
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
        for g in (first, second):
            await g.aclose()
        return client, link

    client, link = asyncio.run(scenario())
    assert link.in_flight == 0
    assert sorted(client.stopped) == [1, 2]  # nobody reads them any more: stopped


def test_events_reach_their_own_request_and_a_finished_one_is_not_stopped():
    async def scenario():
        client = StandInClient()
        link = _link(client, n_parallel=2)
        events = link.generate(GenerationRequest(prompt="x"))
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.01)
        client.play(p.TokenText(request_id=99, text="someone else's"))
        client.play(p.TokenText(request_id=1, text="mine"))
        assert (await waiting).text == "mine"
        client.play(p.GenerationDone(request_id=1, stop_reason="eos", stats=STATS))
        assert isinstance(await anext(events), p.GenerationDone)
        with pytest.raises(StopAsyncIteration):
            await anext(events)
        return client

    client = asyncio.run(scenario())
    assert client.stopped == []


def test_no_model_is_a_503_that_says_what_to_do():
    async def scenario():
        link = _link(StandInClient())
        link.model = None
        with pytest.raises(APIError, match="No model is loaded") as refused:
            await anext(link.generate(GenerationRequest()))
        assert refused.value.status == 503

    asyncio.run(scenario())
