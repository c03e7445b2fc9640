"""The Hearth engine's batch decoder (engine/runtime/hearth_batch.py) in process, on the CPU, on a
tiny random model with the starter model's vocabulary: greedy replies decoded together equal
each decoded alone, a prompt joins in chunks while the others keep decoding, and a stopped
(disconnected) request gives its pages back at once."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")

from engine.runtime import protocol as p
from engine.runtime.batch_schedule import MIN_CHUNK
from engine.runtime.batching import new_context
from engine.runtime.hearth_batch import HearthBatchedDecoder
from engine.runtime.hearth_batch_context import HearthBatchContext
from engine.runtime.hearth_driver import HearthModel
from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf
from tests.engine.runtime.conftest import EVENT_TIMEOUT, GREEDY, RunningEngine

PROMPTS = [[1, 504, 3101, 30], [1, 9, 18, 27, 36, 45, 54, 63, 72], [1, 700], [1, 2, 3, 4, 5, 6]]


@pytest.fixture(scope="module")
def model(starter_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("hb") / "tiny.gguf"
    write_tiny_gguf(path, tiny_spec("llama", n_layer=2), vocab_from=starter_model)
    mp = pytest.MonkeyPatch()
    mp.setenv("HEARTH_ENGINE_DEVICE", "cpu")
    loaded = HearthModel(p.ModelParams(path=str(path), engine="hearth", n_ctx=512, n_threads=1))
    yield loaded
    loaded.close()
    mp.undo()


def _decoder(model, n_parallel=4, n_ctx=512, n_ubatch=512):
    params = p.ModelParams(path=model.params.path, engine="hearth", n_ctx=n_ctx,
                           n_parallel=n_parallel, n_ubatch=n_ubatch, n_threads=1,
                           type_k=model.params.type_k, type_v=model.params.type_v)  # fmt: skip
    ctx = new_context(model, params)
    assert isinstance(ctx, HearthBatchContext)
    events: list = []
    return HearthBatchedDecoder(model, ctx, n_parallel, events.append), events


def _generate(rid, prompt, max_tokens=6, sampling=GREEDY):
    return p.Generate(request_id=rid, prompt_tokens=tuple(prompt), sampling=sampling,
                      max_tokens=max_tokens, ignore_eos=True)  # fmt: skip


def _texts(events) -> dict[int, str]:
    out: dict[int, str] = {}
    for e in events:
        if isinstance(e, p.TokenText):
            out[e.request_id] = out.get(e.request_id, "") + e.text
    return out


def _alone(model, prompt, n, sampling=GREEDY) -> str:
    """The one-sequence path (HearthContext): prefill, then steps."""
    ctx = model.new_context(
        p.ModelParams(path=model.params.path, engine="hearth", n_ctx=64 * (1 + len(prompt) // 48))
    )
    sampler = ctx.new_sampler(sampling)
    out, data = ctx.decode(prompt), b""
    for _ in range(n):
        token = sampler.sample(out)
        data += model.token_bytes(token)
        out = ctx.step(token)
    return data.decode("utf-8", errors="replace")


def test_replies_decoded_together_equal_each_decoded_alone(model):
    decoder, events = _decoder(model)
    for rid, prompt in enumerate(PROMPTS):
        decoder.submit(_generate(rid, prompt), 0.0, prompt)
    steps = 0
    while decoder.busy:
        decoder.step()
        steps += 1
    # every prompt in the first step, then one token each per step; each decode step is
    # launched ahead of the last one's tokens, so one more call takes the last step's
    assert steps == 7
    done = [e for e in events if isinstance(e, p.GenerationDone)]
    assert sorted(d.request_id for d in done) == [0, 1, 2, 3]
    assert all(d.stop_reason == "max_tokens" and d.stats.n_generated == 6 for d in done)
    texts = _texts(events)
    assert len(set(texts.values())) == len(PROMPTS)  # four different replies
    for rid, prompt in enumerate(PROMPTS):
        assert texts[rid] == _alone(model, prompt, 6)
    assert decoder.ctx.cache.pool.free_pages == decoder.ctx.cache.pool.n_pages


def test_a_long_prompt_joins_in_chunks_while_the_others_decode(model):
    decoder, events = _decoder(model, n_parallel=2, n_ubatch=8)
    decoder.submit(_generate(0, PROMPTS[0], max_tokens=20), 0.0, PROMPTS[0])
    decoder.step()  # its prompt, and its first token
    long_prompt = [1, *range(100, 140)]  # 41 tokens: several steps beside the one decoder
    decoder.submit(_generate(1, long_prompt, max_tokens=3), 0.0, long_prompt)
    n_steps = -(-len(long_prompt) // max(decoder.ctx.budget - 1, MIN_CHUNK))
    assert n_steps >= 3
    per_step = []
    for _ in range(n_steps):
        before = len([e for e in events if isinstance(e, p.TokenText) and e.request_id == 0])
        decoder.step()
        after = len([e for e in events if isinstance(e, p.TokenText) and e.request_id == 0])
        per_step.append(after - before)
    assert per_step == [1] * n_steps  # request 0 never waited for the prompt
    assert 1 in _texts(events)  # the prompt's last chunk sampled request 1's first token
    while decoder.busy:
        decoder.step()
    assert _texts(events)[1] == _alone(model, long_prompt, 3)


def test_a_stopped_request_frees_its_pages_at_once_and_the_other_goes_on(model):
    decoder, events = _decoder(model, n_parallel=2, n_ctx=512)
    pool = decoder.ctx.cache.pool
    decoder.submit(_generate(0, PROMPTS[1], max_tokens=100), 0.0, PROMPTS[1])
    decoder.submit(_generate(1, PROMPTS[2], max_tokens=8), 0.0, PROMPTS[2])
    for _ in range(70):  # request 0 reaches its second page of 64 positions
        decoder.step()
    held = pool.free_pages
    decoder.request_stop(0)  # what the server does when the client disconnects
    decoder.step()
    assert pool.free_pages == held + 2
    stopped = [e for e in events if isinstance(e, p.GenerationDone) and e.request_id == 0]
    assert stopped[0].stop_reason == "stopped"
    while decoder.busy:
        decoder.step()
    assert pool.free_pages == pool.n_pages


def test_a_reply_ending_on_a_stop_string_while_its_next_step_runs_ahead(model):
    """Its launched-ahead row is discarded: its text ends where a step at a time ends it, its
    pages go back, and the reply beside it is what it is alone."""
    alone = _alone(model, PROMPTS[1], 12)
    stop = alone[len(alone) // 2 : len(alone) // 2 + 3]
    assert stop.strip() and alone.index(stop) > 0
    decoder, events = _decoder(model, n_parallel=2)
    command = p.Generate(request_id=0, prompt_tokens=tuple(PROMPTS[1]), sampling=GREEDY,
                         max_tokens=12, ignore_eos=True, stop=(stop,))  # fmt: skip
    decoder.submit(command, 0.0, PROMPTS[1])
    decoder.submit(_generate(1, PROMPTS[0], max_tokens=12), 0.0, PROMPTS[0])
    while decoder.busy:
        decoder.step()
    assert _done(events, 0).stop_reason == "stop_string"
    assert _texts(events)[0] == alone[: alone.index(stop)]
    assert _texts(events)[1] == _alone(model, PROMPTS[0], 12)
    assert decoder.ctx.cache.pool.free_pages == decoder.ctx.cache.pool.n_pages


SAMPLED = [p.SamplingParams(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=s) for s in (4, 5)]


@pytest.mark.parametrize("sampling", [[GREEDY], SAMPLED], ids=["greedy", "sampled"])
def test_steps_launched_ahead_give_the_tokens_of_steps_one_at_a_time(model, sampling):
    """The same four requests with steps launched ahead and a step at a time: the same
    replies, greedy and drawn with seeds (each draw on the device, its token never on the
    host before the next step starts)."""
    assert_launched_ahead_equals_one_at_a_time(model, PROMPTS, max_tokens=9, sampling=sampling)


def test_a_seeded_sampled_reply_is_the_same_in_a_batch_and_alone(model):
    decoder, events = _decoder(model)
    for rid, prompt in enumerate(PROMPTS[:2]):
        decoder.submit(_generate(rid, prompt, 8, SAMPLED[rid]), 0.0, prompt)
    while decoder.busy:
        decoder.step()
    texts = _texts(events)
    for rid, prompt in enumerate(PROMPTS[:2]):
        assert texts[rid] == _alone(model, prompt, 8, SAMPLED[rid])
    assert texts[0] != _alone(model, PROMPTS[0], 8)  # drawn, not the greedy reply


def assert_launched_ahead_equals_one_at_a_time(
    model, prompts, max_tokens: int, sampling=(GREEDY,)
) -> None:
    """The replies with and without steps launched ahead, through the decoder on `model`'s
    device (tests/engine/hearth/test_gpu_batch.py runs it on a GPU's CUDA graphs); request i
    samples by sampling[i % len(sampling)]."""

    def run(launch_ahead: bool) -> tuple[dict[int, str], int]:
        decoder, events = _decoder(model, n_parallel=len(prompts))
        decoder.launch_ahead = launch_ahead
        decoder.ctx.warm_up()  # on a GPU: the decode steps' CUDA graphs
        for rid, prompt in enumerate(prompts):
            settings = sampling[rid % len(sampling)]
            decoder.submit(_generate(rid, prompt, max_tokens, settings), 0.0, prompt)
        launched_ahead = 0
        while decoder.busy:
            decoder.step()
            launched_ahead += decoder._launched is not None
        decoder.close()
        return _texts(events), launched_ahead

    ahead, n_ahead = run(launch_ahead=True)
    one_at_a_time, n_one = run(launch_ahead=False)
    assert n_ahead >= max_tokens - 3 and n_one == 0
    assert len(ahead) == len(prompts) and ahead == one_at_a_time


def test_a_reply_with_a_repeat_penalty_keeps_the_batch_to_a_step_at_a_time(model):
    """A repeat penalty needs each reply's tokens before its next draw on the host: no step is
    launched ahead, so the last step's tokens are taken by the step itself."""
    decoder, events = _decoder(model, n_parallel=2)
    penalized = p.SamplingParams(temperature=0.0, repeat_penalty=1.5, repeat_last_n=16)
    decoder.submit(_generate(0, PROMPTS[0]), 0.0, PROMPTS[0])
    decoder.submit(_generate(1, PROMPTS[2], sampling=penalized), 0.0, PROMPTS[2])
    steps = 0
    while decoder.busy:
        decoder.step()
        steps += 1
    assert steps == 6
    assert _texts(events)[0] == _alone(model, PROMPTS[0], 6)
    assert _texts(events)[1] == _alone(model, PROMPTS[2], 6, penalized)


def test_too_many_parallel_requests_are_refused_with_what_to_do(model):
    from engine.llama.driver import EngineError

    with pytest.raises(EngineError, match="--parallel 64 or fewer"):
        _decoder(model, n_parallel=65, n_ctx=65 * 4)


def test_the_worker_batches_on_the_hearth_engine(model):
    """Through the worker process: loaded with n_parallel 2, two requests decode together."""
    import os

    running = RunningEngine(env={**os.environ, "HEARTH_ENGINE_DEVICE": "cpu"})
    try:
        loaded = running.load(model.params.path, engine="hearth", n_ctx=256, n_parallel=2,
                              n_threads=1)  # fmt: skip
        assert isinstance(loaded, p.ModelLoaded), loaded
        assert (loaded.engine, loaded.n_parallel) == ("hearth", 2)
        ids = [running.client.generate(prompt_tokens=tuple(prompt), sampling=GREEDY,
                                       max_tokens=4, ignore_eos=True)
               for prompt in PROMPTS[:2]]  # fmt: skip
        done = {}
        while len(done) < 2:
            event = running.events.get(timeout=EVENT_TIMEOUT)
            if isinstance(event, p.GenerationDone | p.GenerationFailed):
                done[event.request_id] = event
        assert all(isinstance(d, p.GenerationDone) for d in done.values()), done
        assert sorted(done) == sorted(ids)
        assert all(d.stats.n_generated == 4 for d in done.values())
    finally:
        running.close()


def test_a_request_that_runs_out_of_pages_fails_alone_with_what_to_do(model):
    """A pool smaller than the requests' shares (here: two pages for two requests): the one that
    needs a third page fails with the pool's message; the other decodes on, as if alone."""
    from engine.hearth.page_pool import PagePool

    decoder, events = _decoder(model, n_parallel=2)
    decoder.ctx.cache.pool = PagePool(n_pages=2, page_size=64, max_sequences=3)
    long_prompt = [1, *range(200, 260)]  # 61 tokens: the 4th generated token needs a page
    short_prompt = [1, 5, 6]
    decoder.submit(_generate(0, long_prompt, max_tokens=10), 0.0, long_prompt)
    decoder.submit(_generate(1, short_prompt, max_tokens=10), 0.0, short_prompt)
    while decoder.busy:
        decoder.step()
    failed = [e for e in events if isinstance(e, p.GenerationFailed)]
    assert [f.request_id for f in failed] == [0]
    assert "KV cache is full" in failed[0].message and "Retry" in failed[0].message
    done = [e for e in events if isinstance(e, p.GenerationDone)]
    assert [(d.request_id, d.stats.n_generated) for d in done] == [(1, 10)]
    assert _texts(events)[1] == _alone(model, short_prompt, 10)


def test_log_probabilities_come_with_each_token(model):
    decoder, events = _decoder(model, n_parallel=2)
    command = p.Generate(request_id=7, prompt_tokens=tuple(PROMPTS[0]), sampling=GREEDY,
                         max_tokens=3, ignore_eos=True, top_logprobs=2)  # fmt: skip
    decoder.submit(command, 0.0, PROMPTS[0])
    while decoder.busy:
        decoder.step()
    entries = [lp for e in events if isinstance(e, p.TokenText) for lp in e.logprobs]
    assert len(entries) == 3
    for entry in entries:  # greedy: the chosen token is the most likely one
        assert len(entry.top) == 2 and entry.logprob == entry.top[0][1] <= 0.0
        assert entry.top[0][1] >= entry.top[1][1]


def _greedy_tokens(model, prompt, n) -> list[int]:
    """The one-sequence path's greedy token ids."""
    ctx = model.new_context(p.ModelParams(path=model.params.path, engine="hearth", n_ctx=128))
    sampler = ctx.new_sampler(GREEDY)
    out, tokens = ctx.decode(prompt), []
    for _ in range(n):
        tokens.append(sampler.sample(out))
        out = ctx.step(tokens[-1])
    return tokens


def _done(events, rid):
    return next(e for e in events if isinstance(e, p.GenerationDone) and e.request_id == rid)


def test_a_shared_system_prompt_is_computed_once_across_clients_and_turns(model):
    """Pages of 64: a 70-token 'system prompt' computed by the first of three concurrent
    requests is taken by reference by the other two (64 tokens reused, their own tails
    computed), whose replies equal each decoded alone; a chat's next turn (the previous
    prompt, its reply, a new message) reuses the previous turn's full pages too."""
    decoder, events = _decoder(model, n_parallel=4)
    system = [1, *range(200, 269)]  # 70 tokens
    first, second, third = [*system, 5, 6], [*system, 7], [*system, 8, 9, 10]
    # all three arrive at once: the second and third wait the one step in which the first
    # computes the shared page, then take it
    decoder.submit(_generate(0, first), 0.0, first)
    decoder.submit(_generate(1, second), 0.0, second)
    decoder.submit(_generate(2, third), 0.0, third)
    while decoder.busy:
        decoder.step()
    reused = [_done(events, rid).stats.n_prompt_tokens_reused for rid in range(3)]
    assert reused == [0, 64, 64]
    texts = _texts(events)
    assert texts[1] == _alone(model, second, 6) and texts[2] == _alone(model, third, 6)
    # a chat's next turn: the previous turn's 60-token prompt and its 8 reply tokens (7 of
    # them written to the cache, the last only sampled), then a new message; the previous
    # turn's first full page (60 prompt and 4 reply tokens) is shared
    chat = [1, *range(300, 359)]
    decoder.submit(_generate(4, chat, max_tokens=8), 0.0, chat)
    while decoder.busy:
        decoder.step()
    turn = [*chat, *_greedy_tokens(model, chat, 8), 40, 41]
    decoder.submit(_generate(5, turn), 0.0, turn)
    while decoder.busy:
        decoder.step()
    assert _done(events, 5).stats.n_prompt_tokens_reused == 64
    assert _texts(events)[5] == _alone(model, turn, 6)
    pool = decoder.ctx.cache.pool
    assert pool.free_pages == pool.n_pages  # only the index holds pages now: all can be taken


def test_a_warm_up_step_of_several_prompts_gives_every_page_back(model):
    """The GPU warm-up's steps (several prompts computed together, a prompt beside a one-token
    row) run through the same forward as a server's steps and close their sequences: after
    them every page and sequence is free, and which steps fit the context is decided by the
    sequences, their share of the context and the step's token budget."""
    decoder, _ = _decoder(model, n_parallel=4, n_ctx=512, n_ubatch=64)
    ctx = decoder.ctx
    pool = ctx.cache.pool
    for lengths in ([15] * 4, [1, 17], [12] * 4):
        assert ctx._fits_one_step(lengths)
        ctx._warm_up_step(lengths, 1)
        assert pool.free_pages == pool.n_pages
    assert not ctx._fits_one_step([12] * 8)  # more prompts than sequences
    assert not ctx._fits_one_step([23] * 4)  # 92 rows: past the step's 64
    assert not ctx._fits_one_step([200])  # past a sequence's 128 positions
    decoder.submit(_generate(0, PROMPTS[0]), 0.0, PROMPTS[0])  # and the batch still decodes
    while decoder.busy:
        decoder.step()
    assert pool.free_pages == pool.n_pages


def test_the_warm_up_ladder_meets_each_launch_shape_a_row_count_can_pick():
    """The warm-up's prompt lengths: every interval between powers of two from 8 to 512 holds
    one that is not a multiple of 16 and (from 16) one that is (Triton specializes the
    count), and no two neighbours are more than 1.5 apart (the kernels' row-count thresholds,
    such as RoPE's heads a program, fall anywhere)."""
    from engine.runtime.hearth_batch_context import WARM_UP_ROWS

    rows = sorted(WARM_UP_ROWS)
    for low in (8, 16, 32, 64, 128, 256):
        inside = [n for n in rows if low <= n < 2 * low]
        assert any(n % 16 for n in inside), low
        assert low < 16 or any(n % 16 == 0 for n in inside), low
    assert all(b / a <= 1.5 for a, b in itertools.pairwise(rows))
    assert rows[-1] == 512  # the default step budget (n_ubatch)
