from app.chat.conversation_model import stats_line
from engine.runtime import protocol as p


def _done(**speculative) -> p.GenerationDone:
    stats = p.GenerationStats(n_prompt_tokens=20, n_prompt_tokens_reused=0, n_generated=81,
                              prefill_seconds=0.1, time_to_first_token=0.12, decode_seconds=2.0,
                              **speculative)  # fmt: skip
    return p.GenerationDone(request_id=1, stop_reason="eos", stats=stats)


def test_a_reply_with_speculation_shows_the_drafts_kept_and_the_speed_up():
    line = stats_line(_done(speculative="prompt_lookup", n_drafted=60, n_draft_accepted=45,
                            plain_step_seconds=0.045))  # fmt: skip
    # 80 steps at 45 ms would take 3.6 s; they took 2.0 s
    assert line == (
        "40.0 tok/s · 0.12 s to first token · 81 tokens · end of reply · "
        "prompt lookup: 75% of 60 drafts kept, 1.8x speed"
    )


def test_a_reply_without_speculation_keeps_the_plain_line():
    assert stats_line(_done()).endswith("81 tokens · end of reply")
