"""Concurrent clients of a running `hearth serve`: they decode together and each gets its own
coherent, complete answer; a client that goes away frees its sequence at once."""

import http.client
import json
import threading
import time

COLOURS = ["red", "yellow", "green", "orange", "purple", "blue", "brown", "pink"]
SYSTEM = "You are a helpful assistant. Answer briefly."


def _messages(colour: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Name a fruit that is {colour}."}]  # fmt: skip


def test_eight_streaming_clients_get_complete_coherent_answers(openai_client, served):
    # Each answer alone first, one after the other: the reference for its opening words.
    alone = {
        colour: openai_client.chat.completions.create(
            model=served.model, messages=_messages(colour), max_tokens=24, temperature=0
        )
        .choices[0]
        .message.content
        for colour in COLOURS
    }
    results: dict[str, tuple[str, str | None]] = {}
    errors: list[BaseException] = []

    def client(colour: str) -> None:
        try:
            stream = openai_client.chat.completions.create(
                model=served.model, messages=_messages(colour), max_tokens=24, temperature=0,
                stream=True,
            )  # fmt: skip
            parts, finish = [], None
            for chunk in stream:
                if chunk.choices:
                    parts.append(chunk.choices[0].delta.content or "")
                    finish = chunk.choices[0].finish_reason or finish
            results[colour] = ("".join(parts), finish)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(c,)) for c in COLOURS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not errors, errors
    assert sorted(results) == sorted(COLOURS)
    for colour, (text, finish) in results.items():
        assert finish in ("stop", "length"), (colour, finish)
        assert "\ufffd" not in text and text.strip()
        # No sequence saw another's tokens: each answer opens as it does alone (batched
        # arithmetic may move a near-tie later on, so only the opening words are compared).
        assert text.split()[:5] == alone[colour].split()[:5], (colour, text, alone[colour])


def _health(served) -> dict:
    status, health = served.request("GET", "/health")
    assert status == 200
    return health


def test_a_client_that_disconnects_mid_stream_frees_its_sequence(served):
    # The schema forces a long reply (900 numbers), so only the disconnect can end it early.
    body = {
        "model": served.model, "prompt": "Numbers:", "max_tokens": 2000, "stream": True,
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {
            "type": "array", "items": {"type": "integer"}, "minItems": 900}}},
    }  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    conn.request(
        "POST",
        "/v1/completions",
        json.dumps(body),
        {"Authorization": f"Bearer {served.key}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    assert response.status == 200
    for _ in range(6):
        assert response.fp.readline()
    assert _health(served)["active_sequences"] == 1
    conn.sock.shutdown(2)
    conn.close()
    deadline = time.monotonic() + 5
    while _health(served)["active_sequences"] and time.monotonic() < deadline:
        time.sleep(0.05)
    health = _health(served)
    assert health["active_sequences"] == 0 and health["requests_in_flight"] == 0
    # And the freed sequence serves the next request.
    status, reply = served.request(
        "POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 3, "temperature": 0}
    )
    assert status == 200 and reply["usage"]["completion_tokens"] == 3
