"""Helper machines in the machine snapshot (engine/session/machine.py): asked again at each
snapshot; a busy one (serving the model this app loaded on it) keeps its earlier figures."""

from __future__ import annotations

import pytest

from engine.hardware import remote
from engine.hardware.remote import RemoteHost, probe_remote
from engine.session.machine import probe_helpers
from tests.engine.hardware.fake_rpc_server import FakeRpcServer


@pytest.fixture(autouse=True)
def quick_probes(monkeypatch):
    real = remote.probe_remote
    monkeypatch.setattr(
        "engine.session.machine.probe_remote",
        lambda address: real(address, measure_link=False, timeout_s=0.5),
    )


def test_a_busy_helper_keeps_what_was_known_and_an_unknown_busy_one_is_a_problem():
    fake = FakeRpcServer()
    try:
        address = f"127.0.0.1:{fake.port}"
        before = probe_remote(address, measure_link=False)
        fake.silent = True
        found, problems = probe_helpers([address], previous=(before,))
        assert found == (before,) and problems == ()
        found, problems = probe_helpers([address])
        assert found == () and "one connection at a time" in problems[0]
    finally:
        fake.close()


def test_a_gone_helper_is_a_problem_even_if_known():
    fake = FakeRpcServer()
    address = f"127.0.0.1:{fake.port}"
    before = probe_remote(address, measure_link=False)
    fake.close()
    found, problems = probe_helpers([address], previous=(before,))
    assert found == () and "cannot be reached" in problems[0]
    assert isinstance(before, RemoteHost)
