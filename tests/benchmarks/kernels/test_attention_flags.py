"""benchmarks/kernels/attention_flags.py: a flag's verdict from one run's attention table."""

from __future__ import annotations

import json

from benchmarks.kernels import attention_flags


def _row(k, context, us, once):
    tuning = {"rotate_q_once": once, "num_warps": 0}
    return {"k": k, "v": "rot4", "context": context, "window": 0, "tuning": tuning,
            "us_per_layer": us}  # fmt: skip


def _timed(k, context, default_a, flag, default_b):
    """What attention.flag_comparison times: default, flag on, default again."""
    return [_row(k, context, default_a, False), _row(k, context, flag, True),
            _row(k, context, default_b, False)]  # fmt: skip


def test_gain_and_spread_per_context():
    rows = [*_timed("rot4", 4096, 15.0, 13.0, 15.4), _row("f16", 4096, 14.0, False)]
    found = attention_flags.compare(rows, "rotate_q_once")
    assert list(found) == [("rot4", "rot4")]  # f16 was timed once, without the flag
    (c,) = found[("rot4", "rot4")]
    assert abs(c["default_us"] - 15.2) < 1e-9
    assert abs(c["gain_us"] - 2.2) < 1e-9
    assert abs(c["spread_us"] - 0.4) < 1e-9


def test_rows_with_another_flag_on_are_not_this_flags():
    both = _row("rot4", 4096, 11.0, True)
    both["tuning"]["sum_after_loop"] = True
    rows = [*_timed("rot4", 4096, 15.0, 13.0, 15.2), both]
    (c,) = attention_flags.compare(rows, "rotate_q_once")[("rot4", "rot4")]
    assert c["flag_us"] == 13.0
    assert attention_flags.compare(rows, "sum_after_loop") == {}  # never on alone


def test_default_only_where_the_gain_beats_the_spread_at_every_context():
    clear = _timed("rot4", 4096, 15.0, 13.0, 15.2) + _timed("rot4", 32768, 35.0, 33.0, 35.3)
    assert attention_flags.verdict(
        attention_flags.compare(clear, "rotate_q_once")[("rot4", "rot4")]
    )
    # at 32k the gain (0.25 us) is inside the spread (0.5 us): noise, so not default
    noisy = _timed("rot4", 4096, 15.0, 13.0, 15.2) + _timed("rot4", 32768, 35.0, 34.9, 35.5)
    assert not attention_flags.verdict(
        attention_flags.compare(noisy, "rotate_q_once")[("rot4", "rot4")]
    )
    assert not attention_flags.verdict([])


def test_main_prints_the_verdict(tmp_path, capsys):
    path = tmp_path / "attention.json"
    path.write_text(json.dumps({"attention": _timed("rot2", 4096, 16.0, 14.0, 16.1)}))
    assert attention_flags.main([str(path), "--flag", "rotate_q_once"]) == 0
    assert "rot2/rot4: rotate_q_once: make it default" in capsys.readouterr().out
    path.write_text(json.dumps({"attention": [_row("rot4", 4096, 15.0, False)]}))
    assert attention_flags.main([str(path), "--flag", "rotate_q_once"]) == 1
    assert "was --flag rotate_q_once given?" in capsys.readouterr().out


def test_flags_together_are_compared_as_one():
    """'fused_reduce+q_prepared': the rows with exactly those two on against the default."""
    rows = _timed("rot4", 4096, 15.0, 14.0, 15.2)  # rotate_q_once alone
    both = _row("rot4", 4096, 12.0, False)
    both["tuning"].update(fused_reduce=True, q_prepared=True)
    fused = _row("rot4", 4096, 13.5, False)
    fused["tuning"]["fused_reduce"] = True
    rows += [both, fused]
    (c,) = attention_flags.compare(rows, "fused_reduce+q_prepared")[("rot4", "rot4")]
    assert c["flag_us"] == 12.0 and abs(c["default_us"] - 15.1) < 1e-9
    (c,) = attention_flags.compare(rows, "fused_reduce")[("rot4", "rot4")]
    assert c["flag_us"] == 13.5
