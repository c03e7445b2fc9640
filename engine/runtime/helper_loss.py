"""Which helper machines a crashed engine lost.

llama.cpp's RPC client aborts the engine process when a helper stops answering mid-computation
(ggml-rpc.cpp: RPC_STATUS_ASSERT -> GGML_ABORT "Remote RPC server crashed or returned malformed
response"). The worker cannot catch that, so the client finds out afterwards: each helper the
loaded model used is asked again (engine/hardware/remote.py); those that do not answer as a
compatible helper are the lost ones, and the load policy plans the reload without them.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.hardware.remote import RemoteHostError, probe_remote

CHECK_TIMEOUT_S = 2.0


def lost_helpers(servers: Sequence[str], timeout_s: float = CHECK_TIMEOUT_S) -> tuple[str, ...]:
    """The helpers among `servers` that no longer answer."""
    lost = []
    for address in servers:
        try:
            probe_remote(address, measure_link=False, timeout_s=timeout_s)
        except RemoteHostError:
            lost.append(address)
    return tuple(lost)


def lost_helper_message(lost: Sequence[str]) -> str:
    which = ", ".join(lost)
    helper = "helper machine" if len(lost) == 1 else "helper machines"
    return (
        f"The {helper} at {which} went away, and llama.cpp stops the engine when a helper "
        "stops answering, so the reply ends here. Load the model again to go on without it "
        "(the window does so at once); start `hearth host` there again to use it later."
    )
