"""The request log sees every request, listing routes and unknown ones too, and its speed is the
engine's decode speed, never the time a request waited (issue 32's small ones)."""

from __future__ import annotations

from engine.runtime import protocol as p
from engine.server.request_log import RequestLog, RequestRecord
from tests.engine.server.stand_in import app_with, call


def _logged(paths: list[tuple[str, str]]) -> list[RequestRecord]:
    app = app_with()
    for method, path in paths:
        call(app, method, path)
    return app.state.hearth.log.records()


def test_listing_routes_and_unknown_routes_are_logged():
    records = _logged([("GET", "/v1/models"), ("GET", "/api/tags"), ("GET", "/v1/nothing")])
    assert [(r.route, r.status) for r in records] == [
        ("/v1/models", 200),
        ("/api/tags", 200),
        ("/v1/nothing", 404),
    ]
    assert "There is no GET /v1/nothing here" in records[2].note


def test_tokens_per_second_is_the_engines_decode_not_the_wait():
    # 101 tokens: 100 after the first in 2 s of decoding; the request itself took 30 s (it
    # waited 25 s in the queue and 3 s for its first token)
    record = RequestRecord(number=1, started_at=0.0, client="c", route="/v1/chat/completions",
                           model="m", status=200, prompt_tokens=5, completion_tokens=101,
                           seconds=30.0, first_token_seconds=3.0, stream=True,
                           decode_seconds=2.0)  # fmt: skip
    assert record.tokens_per_second == 50.0
    log = RequestLog()
    log.add(record)
    assert "50.0 tok/s" in log.records()[0].line()


def test_a_jobs_record_takes_the_decode_time_from_the_engines_stats():
    from engine.server.server_state import Job

    class Done:
        completion_tokens = 11
        stats = p.GenerationStats(n_prompt_tokens=3, n_prompt_tokens_reused=0, n_generated=11,
                                  prefill_seconds=0.1, time_to_first_token=0.2,
                                  decode_seconds=0.5)  # fmt: skip

    log = RequestLog()
    Job(log, route="/api/chat", model="m", stream=False, client="c").finish(200, [Done()])
    assert log.records()[0].tokens_per_second == 20.0


def test_a_record_says_how_much_of_the_prompt_was_computed():
    from engine.server.openai_routes import _usage
    from engine.server.server_state import Job

    class Done:
        completion_tokens = 4
        prompt_tokens = 2070
        stats = p.GenerationStats(n_prompt_tokens=2070, n_prompt_tokens_reused=2048,
                                  n_generated=4, prefill_seconds=0.1, time_to_first_token=0.2,
                                  decode_seconds=0.5)  # fmt: skip

    log = RequestLog()
    Job(log, route="/v1/chat/completions", model="m", stream=True, client="c").finish(200, [Done()])
    record = log.records()[0]
    assert (record.prompt_tokens, record.prompt_tokens_computed) == (2070, 22)
    assert "prompt=2070 (computed 22) out=4" in record.line()
    assert _usage([Done()])["prompt_tokens_details"] == {"cached_tokens": 2048}
