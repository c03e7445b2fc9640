"""The rule that judges a GPU build's greedy output against the CPU build's, on small made-up
traces (the real ones come from engine/runtime/logit_trace.py on the starter model)."""

import copy

import pytest

from engine.runtime.greedy_check import LOGIT_TOLERANCE, NEAR_TIE, check

PIECES = {1: b" a", 2: b" b", 3: b" c", 4: b" d", 5: b" e", 6: b" f"}


def step(ids, logits):
    return {
        "argmax": ids[0],
        "argmax_piece": PIECES[ids[0]].hex(),
        "top_ids": list(ids),
        "top_logits": list(logits),
    }


def cpu_reference():
    steps = [
        step([1, 2, 3], [10.0, 8.0, 7.0]),
        step([2, 3, 1], [5.0, 4.9, 4.7]),  # a near-tie: 0.1 and 0.3 below the best
        step([3, 1, 2], [9.0, 6.0, 5.0]),
    ]
    tokens = [s["argmax"] for s in steps]
    return {
        "forced": False,
        "tokens": tokens,
        "pieces": [PIECES[t].hex() for t in tokens],
        "text": b"".join(PIECES[t] for t in tokens).decode(),
        "steps": steps,
    }


def device_trace(reference, argmaxes=None, shift=0.0):
    """The device forced on the reference's tokens: its logits at the reference's top ids are
    the reference's plus `shift`, and its argmax is the reference's unless given."""
    steps = []
    for i, ref in enumerate(reference["steps"]):
        chosen = argmaxes[i] if argmaxes else ref["argmax"]
        steps.append(
            {
                "argmax": chosen,
                "argmax_piece": PIECES[chosen].hex(),
                "watched_logits": [x + shift for x in ref["top_logits"]],
            }
        )
    return {"forced": True, "tokens": list(reference["tokens"]), "steps": steps}


def test_the_same_tokens_and_close_logits_are_an_exact_match():
    ref = cpu_reference()
    verdict = check(ref, device_trace(ref, shift=0.25), ref["text"])
    assert verdict.passed and verdict.exact
    assert verdict.max_diff == pytest.approx(0.25)


def test_a_divergence_at_a_near_tie_passes_and_is_reported():
    ref = cpu_reference()
    device = device_trace(ref, argmaxes=[1, 1, 3])  # the CPU's third at position 1, 0.3 below
    verdict = check(ref, device, " a a c d")  # the engine's own text leaves at position 1
    assert verdict.passed and not verdict.exact
    assert [p.index for p in verdict.positions if p.near_tie] == [1]
    assert verdict.positions[1].gap == pytest.approx(0.3)
    assert verdict.positions[1].gap <= NEAR_TIE
    assert "near-tie" in verdict.table()


def test_a_divergence_where_the_cpu_build_was_sure_fails():
    ref = cpu_reference()
    device = device_trace(ref, argmaxes=[2, 2, 3])  # 2.0 below the CPU's best at position 0
    verdict = check(ref, device, " b b c")
    assert not verdict.passed
    assert "position 0" in verdict.problems[0] and "2.000 below" in verdict.problems[0]


def test_a_token_outside_the_cpu_build_top_k_fails():
    ref = cpu_reference()
    verdict = check(ref, device_trace(ref, argmaxes=[1, 6, 3]), " a f c")
    assert not verdict.passed
    assert "outside the CPU's top-k" in verdict.problems[0]


def test_a_logit_beyond_the_tolerance_fails_even_with_the_same_tokens():
    ref = cpu_reference()
    verdict = check(ref, device_trace(ref, shift=LOGIT_TOLERANCE + 0.01), ref["text"])
    assert not verdict.passed
    assert all("tolerance" in problem for problem in verdict.problems)


def test_an_engine_text_the_trace_does_not_explain_fails():
    ref = cpu_reference()
    # The trace agrees everywhere, but the engine's text differs.
    assert not check(ref, device_trace(ref), " a b d").passed
    # The trace leaves at position 1 with " a", but the engine's text leaves elsewhere.
    assert not check(ref, device_trace(ref, argmaxes=[1, 1, 3]), " a b d").passed
    # ... or does not leave at all.
    assert not check(ref, device_trace(ref, argmaxes=[1, 1, 3]), ref["text"]).passed


def test_a_device_trace_not_forced_on_the_reference_is_refused():
    ref = cpu_reference()
    device = device_trace(ref)
    device["tokens"] = [1, 1, 3]
    with pytest.raises(ValueError):
        check(ref, device, ref["text"])
    free_running = copy.deepcopy(device_trace(ref))
    free_running["forced"] = False
    with pytest.raises(ValueError):
        check(ref, free_running, ref["text"])
