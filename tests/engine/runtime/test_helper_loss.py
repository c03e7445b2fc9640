"""Which helpers a crashed engine lost (engine/runtime/helper_loss.py), and how it reads."""

from __future__ import annotations

from engine.runtime.client import EngineCrashed
from engine.runtime.helper_loss import lost_helpers
from tests.engine.hardware.fake_rpc_server import FakeRpcServer


def test_only_the_helpers_that_no_longer_answer_are_lost():
    alive, gone = FakeRpcServer(), FakeRpcServer()
    gone.close()
    try:
        servers = [f"127.0.0.1:{alive.port}", f"127.0.0.1:{gone.port}"]
        assert lost_helpers(servers, timeout_s=1.0) == (f"127.0.0.1:{gone.port}",)
    finally:
        alive.close()


def test_a_crash_that_lost_a_helper_says_so_and_what_to_do():
    crash = EngineCrashed(-6, ("Remote RPC server crashed",), (), ("10.0.0.2:50052",))
    assert crash.message.startswith("The helper machine at 10.0.0.2:50052 went away")
    assert "Load the model again to go on without it" in crash.message
    plain = EngineCrashed(-6, ("Aborted",))
    assert "helper" not in plain.message and "SIGABRT" in plain.message
