from engine.runtime import protocol as p
from engine.runtime.speculative.summary import speculation_text


def _stats(**kw) -> p.GenerationStats:
    return p.GenerationStats(n_prompt_tokens=5, n_prompt_tokens_reused=0, n_generated=11,
                             prefill_seconds=0.1, time_to_first_token=0.1, decode_seconds=1.0,
                             **kw)  # fmt: skip


def test_nothing_without_speculation():
    assert speculation_text(_stats()) == ""


def test_drafts_kept_and_speed():
    text = speculation_text(_stats(speculative="draft_model", n_drafted=8, n_draft_accepted=2,
                                   plain_step_seconds=0.05))  # fmt: skip
    assert text == "draft model: 25% of 8 drafts kept, 0.5x speed"  # 10 x 50 ms in 1 s


def test_a_reply_with_no_drafts_and_no_timed_plain_step():
    assert speculation_text(_stats(speculative="prompt_lookup")) == "prompt lookup: nothing drafted"
