"""Helper machines seen from here (engine/hardware/remote.py, rpc_wire.py, remote_about.py),
against a stand-in RPC server: versions, devices, the link test, failures in words."""

from __future__ import annotations

import pytest

from engine.hardware import remote_about
from engine.hardware.remote import (
    DEFAULT_PORT,
    HelperBusy,
    RemoteHost,
    RemoteHostError,
    parse_address,
    probe_remote,
)
from tests.engine.hardware.fake_rpc_server import FakeRpcServer

GIB = 1024**3


@pytest.fixture
def server():
    fake = FakeRpcServer(devices=[(3 * GIB, 4 * GIB), (7 * GIB, 8 * GIB)])
    yield fake
    fake.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pc2", ("pc2", DEFAULT_PORT)),
        ("10.0.0.2:50060", ("10.0.0.2", 50060)),
        ("[fd00::2]:50060", ("fd00::2", 50060)),
        (" pc2:1 ", ("pc2", 1)),
    ],
)
def test_addresses_parse(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["", ":50052", "pc2:port", "pc2:70000", "pc2:0"])
def test_bad_addresses_say_how_to_write_one(text):
    with pytest.raises(RemoteHostError, match=r"HOST|port"):
        parse_address(text)


def test_a_plain_rpc_server_lists_its_devices_and_memory_with_a_note(server):
    host = probe_remote(f"127.0.0.1:{server.port}", measure_link=False)
    assert host.protocol_version == (7, 0, 0)
    assert [(d.index, d.free_bytes, d.total_bytes) for d in host.devices] == [
        (0, 3 * GIB, 4 * GIB),
        (1, 7 * GIB, 8 * GIB),
    ]
    assert {d.backend for d in host.devices} == {"unknown"}
    assert host.link is None
    assert "plain llama.cpp rpc-server" in host.notes[0]


def test_the_link_test_sends_tensor_data_and_times_round_trips(server):
    host = probe_remote(f"127.0.0.1:{server.port}")
    assert server.received_tensor_bytes == 4 * 4 * 1024 * 1024
    assert host.link is not None
    assert 0 < host.link.latency_s < 1.0
    assert host.link.bytes_per_s > 1e6
    assert "Gbit/s" in str(host.link)


def test_what_hearth_host_says_about_its_devices_is_used(server):
    about = {
        "rpc_protocol": "7.0.0",
        "llama_cpp_python": "0.3.36",
        "devices": [
            {"name": "CUDA0", "description": "RTX 4090", "backend": "cuda"},
            {"name": "CPU", "description": "Ryzen", "backend": "CPU", "memory_limit_bytes": GIB},
        ],
    }
    listening = remote_about.serve_about("127.0.0.1", server.port + 1, about)
    try:
        host = probe_remote(f"127.0.0.1:{server.port}", measure_link=False)
    finally:
        remote_about.stop_about(listening)
    assert [(d.name, d.backend) for d in host.devices] == [("CUDA0", "cuda"), ("CPU", "cpu")]
    assert host.devices[1].usable_bytes == GIB
    assert host.devices[0].usable_bytes == 3 * GIB
    assert host.llama_cpp_version == "0.3.36"
    assert host.notes == ()


def test_a_helper_of_another_minor_version_is_refused_with_both_versions_named():
    fake = FakeRpcServer(version=(7, 3, 1))
    try:
        with pytest.raises(RemoteHostError) as raised:
            probe_remote(f"127.0.0.1:{fake.port}")
    finally:
        fake.close()
    assert "7.3.1" in str(raised.value) and "7.0.0" in str(raised.value)
    assert "same Hearth version" in str(raised.value)


def test_an_old_helper_is_named_by_its_version_too():
    fake = FakeRpcServer(version=(3, 0, 0), legacy_hello=True)
    try:
        with pytest.raises(RemoteHostError, match=r"protocol 3\.0\.0.*speaks 7\.0\.0"):
            probe_remote(f"127.0.0.1:{fake.port}")
    finally:
        fake.close()


def test_an_older_minor_version_of_the_same_major_is_accepted():
    fake = FakeRpcServer(version=(7, 0, 5))
    try:
        assert probe_remote(f"127.0.0.1:{fake.port}", measure_link=False).devices
    finally:
        fake.close()


def test_nothing_listening_says_to_start_hearth_host():
    fake = FakeRpcServer()
    port = fake.port
    fake.close()
    with pytest.raises(RemoteHostError, match=r"cannot be reached.*hearth host"):
        probe_remote(f"127.0.0.1:{port}", timeout_s=1.0)


def test_a_helper_that_hangs_up_says_so():
    fake = FakeRpcServer(hang_up_after_hello=True)
    try:
        with pytest.raises(RemoteHostError, match="stopped answering"):
            probe_remote(f"127.0.0.1:{fake.port}", timeout_s=1.0)
    finally:
        fake.close()


def test_a_helper_that_accepts_but_does_not_answer_is_busy_not_gone():
    fake = FakeRpcServer(silent=True)
    try:
        with pytest.raises(HelperBusy, match="one connection at a time"):
            probe_remote(f"127.0.0.1:{fake.port}", timeout_s=0.5)
    finally:
        fake.close()


def test_a_host_survives_json(server):
    host = probe_remote(f"127.0.0.1:{server.port}")
    assert RemoteHost.from_dict(host.to_dict()) == host
