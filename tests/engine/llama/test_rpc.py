"""The starter model split across this process and two `hearth host` helpers on 127.0.0.1 (CPU
backend, each with its own memory limit), through llama.cpp's RPC backend (engine/llama/rpc.py):
the same greedy reply as one process, the planner's per-device memory beside llama.cpp's
buffers, and a helper killed mid-reply: a clear message, and a reload without it that works.

Skips where the installed llama_cpp was built without RPC (installers/build_engine.py builds
it with -DGGML_RPC=ON; a wheel from before that does not have it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.gguf import read_model_info
from engine.hardware.remote import probe_remote
from engine.planner import Planner, PlanRequest
from engine.planner.remote import with_helpers
from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed
from testkit.rpc_helpers import local_helper
from tests.engine.runtime.conftest import RunningEngine

GIB = 1024**3
PROMPT = (p.ChatMessage(role="user", content="Name three colours and say why you like them."),)
GREEDY = p.SamplingParams(temperature=0.0)
# Memory each helper lends: small enough that the model is split three ways.
LIMITS_GIB = (0.06, 0.05)


@pytest.fixture(scope="module")
def rpc_build():
    from engine.llama.rpc import rpc_available

    if not rpc_available():
        pytest.skip(
            "the installed llama_cpp has no RPC backend (built before installers/build_engine.py "
            "added -DGGML_RPC=ON); rebuild the engine to run these tests"
        )


@pytest.fixture
def helpers(rpc_build, tmp_path):
    with (
        local_helper(LIMITS_GIB[0], data_dir=str(tmp_path / "a")) as a,
        local_helper(LIMITS_GIB[1], data_dir=str(tmp_path / "b")) as b,
    ):
        yield a, b


def split_plan(starter_path, hosts):
    planner = Planner(read_model_info(starter_path))
    request = PlanRequest(host_budget_bytes=8 * GIB, target_ctx=2048, min_ctx=2048)
    return planner.plan(with_helpers(request, hosts))


def reply(engine: RunningEngine, max_tokens: int = 32) -> str:
    texts, done = engine.run(messages=PROMPT, sampling=GREEDY, max_tokens=max_tokens)
    assert isinstance(done, p.GenerationDone), done
    return "".join(texts)


@pytest.fixture(scope="module")
def single_process_reply(rpc_build, starter_path):
    engine = RunningEngine()
    try:
        assert isinstance(engine.load(starter_path, n_ctx=2048), p.ModelLoaded)
        return reply(engine)
    finally:
        engine.close()


def test_a_split_across_two_helpers_replies_as_one_process_and_as_planned(
    helpers, starter_path, single_process_reply
):
    hosts = [probe_remote(h.address) for h in helpers]
    plan = split_plan(starter_path, hosts)
    assert plan.fits
    assert plan.settings.rpc_servers == tuple(h.address for h in helpers)
    counts = plan.choice.gpu_layer_counts
    assert len(counts) == 2 and all(counts), counts  # both helpers hold layers, the CPU the rest
    assert sum(counts) < plan.choice.n_layers + 1
    engine = RunningEngine()
    try:
        loaded = engine.load(**vars(plan.settings.model_params()))
        assert isinstance(loaded, p.ModelLoaded), loaded
        assert reply(engine) == single_process_reply
        # another split in the same worker: its connections to the helpers are reused
        other = replace(plan.settings.model_params(), n_gpu_layers=sum(counts) - 1)
        other = replace(other, tensor_split=(counts[0] - 1.0, float(counts[1])))
        assert isinstance(engine.load(**vars(other)), p.ModelLoaded)
        assert reply(engine) == single_process_reply
    finally:
        engine.close()
    for helper, usage in zip(helpers, plan.devices, strict=False):
        assert usage.id == f"rpc:{helper.address}:0"
        measured = {
            a.kind: a.bytes for a in loaded.allocations if a.device.endswith(f"[{helper.address}]")
        }
        assert usage.weights_bytes == pytest.approx(measured["model"], rel=0.005)
        assert usage.kv_bytes == pytest.approx(measured.get("KV", 0), rel=0.01)
        total = sum(measured.values())
        # the CPU backend's compute buffer is over-estimated on a helper (never under)
        assert usage.compute_bytes >= measured["compute"]
        assert total <= usage.total_bytes <= 1.3 * total
        assert usage.total_bytes <= usage.budget_bytes  # each helper's own limit holds


def test_a_helper_killed_mid_reply_ends_it_clearly_and_a_reload_without_it_works(
    helpers, starter_path, single_process_reply
):
    a, b = helpers
    hosts = [probe_remote(a.address), probe_remote(b.address)]
    engine = RunningEngine()
    try:
        loaded = engine.load(**vars(split_plan(starter_path, hosts).settings.model_params()))
        assert isinstance(loaded, p.ModelLoaded), loaded
        engine.client.generate(messages=PROMPT, sampling=GREEDY, max_tokens=400, ignore_eos=True)
        pieces = 0
        while pieces < 3:
            event = engine.events.get(timeout=120)
            pieces += isinstance(event, p.TokenText)
        b.kill()
        crash = engine.events.wait_for(p.GenerationDone, timeout=120)
    finally:
        engine.close()
    assert isinstance(crash, EngineCrashed), crash
    assert crash.lost_helpers == (b.address,)
    assert b.address in crash.message and "go on without it" in crash.message
    # the reload: planned again with the helper that is left
    survivors = [probe_remote(a.address)]
    plan = split_plan(starter_path, survivors)
    assert plan.settings.rpc_servers == (a.address,)
    engine = RunningEngine()
    try:
        assert isinstance(engine.load(**vars(plan.settings.model_params())), p.ModelLoaded)
        assert reply(engine) == single_process_reply
    finally:
        engine.close()


def test_a_helper_that_is_gone_before_the_load_is_refused_in_words(rpc_build, starter_path):
    with local_helper(0.06) as helper:
        hosts = [probe_remote(helper.address)]
        helper.kill()
    engine = RunningEngine()
    try:
        failed = engine.load(**vars(split_plan(starter_path, hosts).settings.model_params()))
    finally:
        engine.close()
    assert isinstance(failed, p.LoadFailed), failed
    assert "cannot be reached" in failed.message and "hearth host" in failed.message
