"""The worker fits a long chat into a small context with the model's own tokenizer and template:
a 20-turn chat into 512 tokens drops exactly the oldest whole turns, no more."""

from engine.enums import Overflow
from engine.runtime import protocol as p

from .conftest import EVENT_TIMEOUT, GREEDY, RunningEngine

N_CTX = 512
REPLY_ROOM = 64


def chat_of(turns: int) -> list[p.ChatMessage]:
    messages = [p.ChatMessage(role="system", content="You answer in one short sentence.")]
    for i in range(turns):
        messages.append(p.ChatMessage(role="user", content=f"Question {i}: what is {i} + {i}?"))
        messages.append(
            p.ChatMessage(
                role="assistant", content=f"The sum of {i} and {i} is {2 * i}, of course."
            )
        )
    messages.append(p.ChatMessage(role="user", content="And what is 7 + 8?"))
    return messages


def ask(engine: RunningEngine, messages, overflow: str, max_tokens: int = 1):
    """(PromptFitted or None, the final event) of one request."""
    request_id = engine.client.generate(
        messages=tuple(messages), sampling=GREEDY, max_tokens=max_tokens, overflow=overflow,
        reply_room=REPLY_ROOM,
    )  # fmt: skip
    fitted = None
    while True:
        event = engine.events.get(timeout=EVENT_TIMEOUT)
        if isinstance(event, p.PromptFitted):
            assert event.request_id == request_id
            fitted = event
        elif isinstance(event, p.GenerationDone | p.GenerationFailed):
            assert event.request_id == request_id
            return fitted, event


def test_a_20_turn_chat_in_512_tokens_drops_exactly_the_oldest_whole_turns(starter_path):
    engine = RunningEngine()
    try:
        loaded = engine.load(starter_path, n_ctx=N_CTX)
        assert isinstance(loaded, p.ModelLoaded) and loaded.n_ctx == N_CTX
        messages = chat_of(20)
        system, body = messages[:1], messages[1:]

        # The oracle, without the fitting code: drop one more whole turn (2 messages) at a time
        # and ask with overflow "stop" until the prompt fits; the worker counts each exactly.
        _, whole = ask(engine, messages, Overflow.STOP)
        assert isinstance(whole, p.GenerationFailed) and whole.context_full  # it overflows
        expected_dropped = None
        for dropped in range(2, len(body), 2):
            _, done = ask(engine, system + body[dropped:], Overflow.STOP)
            if isinstance(done, p.GenerationDone):
                expected_dropped, expected_tokens = dropped, done.stats.n_prompt_tokens
                break
            assert done.context_full
        assert expected_dropped is not None and expected_dropped < 40

        fitted, done = ask(engine, messages, Overflow.DROP_OLDEST, max_tokens=8)
        assert isinstance(done, p.GenerationDone), done
        assert fitted is not None and fitted.messages_dropped == expected_dropped
        assert fitted.n_prompt_tokens == expected_tokens == done.stats.n_prompt_tokens
        assert expected_tokens <= N_CTX - REPLY_ROOM
    finally:
        engine.close()
