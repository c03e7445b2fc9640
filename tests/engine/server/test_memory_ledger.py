"""Which loaded models go for a new one to fit (engine/server/memory_ledger.py), by table."""

import pytest

from engine.server.memory_ledger import models_to_unload, over_budget, shortfall_text

GIB = 1024**3
BUDGET = {"host": 10, "gpu0": 8}


@pytest.mark.parametrize(
    ("loaded", "new", "gone"),
    [
        ([], {"host": 4}, []),
        ([("a", {"host": 4}, False)], {"host": 6}, []),  # exactly the budget fits
        ([("a", {"host": 4}, False), ("b", {"host": 4}, False)], {"host": 4}, ["a"]),  # LRU first
        ([("a", {"host": 4}, False), ("b", {"host": 4}, False)], {"host": 9}, ["a", "b"]),
        ([("a", {"host": 4}, True), ("b", {"host": 4}, False)], {"host": 4}, ["b"]),  # a is busy
        ([("a", {"host": 4}, True), ("b", {"host": 4}, True)], {"host": 4}, None),  # all busy
        ([("a", {"gpu0": 6}, False), ("b", {"host": 9}, False)], {"gpu0": 4}, ["a"]),  # per device
        ([("a", {"gpu0": 1, "host": 1}, False)], {"other": 99}, []),  # a device without budget
        ([], {"host": 11}, None),  # not even alone
    ],
)  # fmt: skip
def test_least_recently_used_idle_models_go_first(loaded, new, gone):
    assert models_to_unload(loaded, new, BUDGET) == gone


def test_over_budget_names_each_device_and_by_how_much():
    over = over_budget([{"host": 6 * GIB, "gpu0": 2 * GIB}, {"host": 5 * GIB}],
                       {"host": 10 * GIB, "gpu0": 8 * GIB})  # fmt: skip
    assert over == {"host": GIB}
    assert shortfall_text(over, {"host": "system RAM"}) == "1.00 GiB more on system RAM"
