import pytest

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EventQueue

READY_TIMEOUT = 60
LOAD_TIMEOUT = 120
EVENT_TIMEOUT = 120


class RunningEngine:
    """A worker process plus the queue its events land in."""

    def __init__(self, env=None):
        self.events = EventQueue()
        self.client = EngineClient(self.events, env=env)
        self.client.start()
        ready = self.events.wait_for(p.Ready, timeout=READY_TIMEOUT)
        assert isinstance(ready, p.Ready), ready

    def load(self, path: str, **params) -> p.ModelLoaded | p.LoadFailed:
        self.client.load(p.ModelParams(path=path, **params))
        return self.events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=LOAD_TIMEOUT)

    def run(self, **generate_args) -> tuple[list[str], object]:
        """Generate and collect the text events and the final event of that request."""
        request_id = self.client.generate(**generate_args)
        texts = []
        while True:
            event = self.events.get(timeout=EVENT_TIMEOUT)
            if isinstance(event, p.TokenText):
                assert event.request_id == request_id
                texts.append(event.text)
            elif isinstance(event, p.GenerationDone | p.GenerationFailed):
                assert event.request_id == request_id
                return texts, event
            elif not isinstance(event, p.Status | p.MemoryReport | p.ChatTemplateChanged):
                return texts, event

    def close(self):
        self.client.close()


@pytest.fixture
def engine():
    running = RunningEngine()
    yield running
    running.close()


@pytest.fixture(scope="module")
def loaded_engine(starter_path):
    running = RunningEngine()
    loaded = running.load(starter_path, n_ctx=2048)
    assert isinstance(loaded, p.ModelLoaded), loaded
    yield running
    running.close()


GREEDY = p.SamplingParams(temperature=0.0)
