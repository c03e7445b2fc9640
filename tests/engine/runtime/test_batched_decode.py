"""Several generations decoded together in one worker (n_parallel > 1), on the starter model."""

import json

import pytest

from engine.runtime import protocol as p
from tests.engine.runtime.conftest import EVENT_TIMEOUT, GREEDY, RunningEngine

SYSTEM = (
    "You are a careful assistant. Answer in one short sentence, in plain English, without "
    "lists, and never mention that you are an assistant."
)


@pytest.fixture(scope="module")
def parallel_engine(starter_path):
    running = RunningEngine()
    loaded = running.load(starter_path, n_ctx=3 * 512, n_parallel=3)
    assert isinstance(loaded, p.ModelLoaded), loaded
    assert loaded.n_parallel == 3
    yield running
    running.close()


def _collect(engine: RunningEngine, request_ids: list[int]) -> dict[int, tuple[str, object]]:
    texts = {rid: [] for rid in request_ids}
    done: dict[int, object] = {}
    while len(done) < len(request_ids):
        event = engine.events.get(timeout=EVENT_TIMEOUT)
        if isinstance(event, p.TokenText):
            texts[event.request_id].append(event.text)
        elif isinstance(event, p.GenerationDone | p.GenerationFailed):
            done[event.request_id] = event
        else:
            assert isinstance(event, p.Status | p.MemoryReport), event
    return {rid: ("".join(texts[rid]), done[rid]) for rid in request_ids}


def _ask(engine, question: str, **kwargs) -> int:
    messages = [
        p.ChatMessage(role="system", content=SYSTEM),
        p.ChatMessage(role="user", content=question),
    ]
    return engine.client.generate(
        messages=messages, **{"sampling": GREEDY, "max_tokens": 24, **kwargs}
    )


def test_the_same_prompt_in_three_sequences_gives_the_same_greedy_reply(parallel_engine):
    ids = [_ask(parallel_engine, "What colour is the sky?") for _ in range(3)]
    results = _collect(parallel_engine, ids)
    texts = {text for text, _ in results.values()}
    assert len(texts) == 1 and next(iter(texts)).strip()
    for _, done in results.values():
        assert isinstance(done, p.GenerationDone) and done.stop_reason in ("eos", "max_tokens")


def test_a_shared_system_prompt_is_computed_once(parallel_engine):
    ids = [_ask(parallel_engine, q) for q in ("Name a river.", "Name a mountain.")]
    results = _collect(parallel_engine, ids)
    stats = [results[rid][1].stats for rid in ids]
    # The second prompt borrows the first one's cells for everything up to its question.
    assert stats[1].n_prompt_tokens_reused >= 30
    assert stats[1].n_prompt_tokens_reused < stats[1].n_prompt_tokens


def test_stopping_one_request_leaves_the_others_running(parallel_engine):
    long_one = _ask(parallel_engine, "Tell me a long story about a dragon.", max_tokens=200,
                    ignore_eos=True)  # fmt: skip
    short_one = _ask(parallel_engine, "Name a fruit.", max_tokens=12)
    first = parallel_engine.events.wait_for(p.TokenText, timeout=EVENT_TIMEOUT)
    assert first.request_id in (long_one, short_one)
    parallel_engine.client.stop(long_one)
    results = _collect(parallel_engine, [long_one, short_one])
    assert results[long_one][1].stop_reason == "stopped"
    assert results[long_one][1].stats.n_generated < 200
    assert results[short_one][1].stop_reason in ("eos", "max_tokens")


def test_a_grammar_makes_the_reply_parse(parallel_engine):
    grammar = r'''root ::= "{\"city\": \"" [A-Za-z ]{1,20} "\"}"'''
    sampling = p.SamplingParams(temperature=0.0, grammar=grammar)
    rid = _ask(parallel_engine, "Which city is the capital of Italy?", sampling=sampling,
               max_tokens=40)  # fmt: skip
    text, done = _collect(parallel_engine, [rid])[rid]
    assert done.stop_reason == "eos", (text, done)
    assert json.loads(text)["city"].strip()


def test_log_probabilities_come_with_each_token(parallel_engine):
    rid = _ask(parallel_engine, "Say hello.", max_tokens=4, top_logprobs=2)
    entries = []
    while True:
        event = parallel_engine.events.get(timeout=EVENT_TIMEOUT)
        if isinstance(event, p.TokenText):
            entries.extend(event.logprobs)
        elif isinstance(event, p.GenerationDone) and event.request_id == rid:
            break
    assert len(entries) == event.stats.n_generated
    for entry in entries:
        assert entry.logprob <= 0 and len(entry.top) == 2
        # Greedy: the chosen token is the most likely one.
        assert entry.top[0][1] == pytest.approx(entry.logprob)


def test_a_prompt_longer_than_a_sequences_share_is_refused(parallel_engine):
    rid = parallel_engine.client.generate(prompt="word " * 700, sampling=GREEDY, max_tokens=4)
    _, event = _collect(parallel_engine, [rid])[rid]
    assert isinstance(event, p.GenerationFailed) and "parallel sequences" in event.message
