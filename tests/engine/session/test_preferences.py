"""The app's preferences file: defaults, a round trip, damaged and out-of-range values, and what
reaches a load."""

from __future__ import annotations

import json

import pytest

from engine.runtime.protocol import ModelParams
from engine.session.preferences import Preferences, load_preferences, save_preferences


def test_a_round_trip(tmp_path):
    path = tmp_path / "preferences.json"
    assert load_preferences(path) == Preferences()  # no file: the defaults
    chosen = Preferences(theme="dark", text_size=12, n_threads=6, default_context=16384,
                         start_server=True)  # fmt: skip
    save_preferences(chosen, path)
    assert load_preferences(path) == chosen


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("not json", Preferences()),
        ({"version": 99, "theme": "dark"}, Preferences()),  # from a newer Hearth
        ({"version": 1, "theme": "purple", "n_threads": 4}, Preferences(n_threads=4)),
        ({"version": 1, "n_threads": -3, "text_size": 12}, Preferences(text_size=12)),
        ({"version": 1, "default_context": 1000}, Preferences()),
        ({"version": 1, "start_server": "yes"}, Preferences()),  # not a bool
        ({"version": 1, "n_threads": True}, Preferences()),  # a bool is not a count
    ],
)
def test_a_bad_value_falls_back_alone(tmp_path, stored, expected):
    path = tmp_path / "preferences.json"
    path.write_text(stored if isinstance(stored, str) else json.dumps(stored))
    assert load_preferences(path) == expected


def test_saving_out_of_range_values_is_refused(tmp_path):
    with pytest.raises(ValueError, match="CPU threads"):
        save_preferences(Preferences(n_threads=-1), tmp_path / "p.json")


def test_threads_reach_the_load_and_context_the_policy():
    params = ModelParams(path="m.gguf", n_ctx=4096)
    assert Preferences(n_threads=6).with_preferences(params).n_threads == 6
    assert Preferences().with_preferences(params) == params  # 0: the engine's own choice
    assert Preferences(default_context=16384).target_context == 16384
    assert Preferences().target_context is None
