import argparse

import pytest

from engine.cli.speculative_args import (
    add_speculative_arguments,
    speculative_from,
    speculative_summary,
)
from engine.runtime import protocol as p


def _parse(*argv):
    parser = argparse.ArgumentParser()
    add_speculative_arguments(parser)
    return parser.parse_args(list(argv))


def test_off_by_default():
    spec, problem = speculative_from(_parse())
    assert problem is None and spec.method == "off"


def test_prompt_lookup_with_its_draft_limit():
    spec, problem = speculative_from(_parse("--speculative", "prompt-lookup", "--max-draft", "8"))
    assert problem is None
    assert (spec.method, spec.max_draft) == ("prompt_lookup", 8)


def test_a_draft_model_needs_its_file(tmp_path):
    _, problem = speculative_from(_parse("--speculative", "draft-model"))
    assert "--draft-model" in problem
    _, problem = speculative_from(
        _parse("--speculative", "draft-model", "--draft-model", str(tmp_path / "none.gguf"))
    )
    assert "No draft model file" in problem
    draft = tmp_path / "draft.gguf"
    draft.write_bytes(b"GGUF")
    spec, problem = speculative_from(
        _parse("--speculative", "draft-model", "--draft-model", str(draft))
    )
    assert problem is None and spec.draft_path == str(draft)


def test_a_draft_model_without_the_method_is_refused(tmp_path):
    _, problem = speculative_from(_parse("--draft-model", str(tmp_path)))
    assert "--speculative draft-model" in problem


def test_an_unknown_method_is_refused_by_the_parser():
    with pytest.raises(SystemExit):
        _parse("--speculative", "guess")


def _stats(**kw):
    base = dict(n_prompt_tokens=10, n_prompt_tokens_reused=0, n_generated=41,
                prefill_seconds=0.1, time_to_first_token=0.1, decode_seconds=2.0)  # fmt: skip
    return p.GenerationStats(**{**base, **kw})


def test_the_summary_says_drafts_kept_and_speed_up():
    stats = _stats(speculative="prompt_lookup", n_drafted=40, n_draft_accepted=30,
                   plain_step_seconds=0.1)  # fmt: skip
    # 40 steps at 0.1 s plain = 4 s, done in 2 s: 2x
    assert speculative_summary(stats) == ", prompt lookup: 75% of 40 drafts kept, 2.0x speed"


def test_no_summary_without_speculation():
    assert speculative_summary(_stats()) == ""


def test_chat_and_serve_leave_the_choice_to_the_engine_by_default():
    parser = argparse.ArgumentParser()
    add_speculative_arguments(parser, default="auto")
    spec, problem = speculative_from(parser.parse_args([]))
    assert problem is None and spec.method == "auto"
