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


def test_a_reply_whose_greedy_text_may_differ_says_so_and_why():
    from engine.runtime.speculative.setup import LLAMA_GPU_CAVEAT

    stats = _stats(speculative="prompt_lookup", n_drafted=4, n_draft_accepted=4,
                   speculative_caveat=LLAMA_GPU_CAVEAT)  # fmt: skip
    text = speculation_text(stats)
    assert text.startswith("prompt lookup: 100% of 4 drafts kept; greedy text may differ")
    assert "round a check of several tokens unlike a one-token step" in text


def test_the_engine_s_own_choice_is_said_with_its_reason():
    on = _stats(speculative="prompt_lookup", n_drafted=4, n_draft_accepted=2,
                speculative_why="on: a check of 4 drafts costs 1.3 plain steps here")  # fmt: skip
    assert speculation_text(on).startswith(
        "prompt lookup (on: a check of 4 drafts costs 1.3 plain steps here): 50% of 4 drafts"
    )
    off_note = "Speculative decoding off: a check of 4 drafts costs 3.9 plain steps here."
    off = _stats(speculative="off", speculative_why=off_note)
    assert speculation_text(off) == off_note
