"""Best fit between llama.cpp and the Hearth engine: measured figures decide, and say so."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from engine.planner import DeviceBudget, Planner, PlanRequest, engine_table
from engine.planner.engine_choice import plan_engines
from engine.planner.engine_table import device_class, kv_cost, speed_verdict

GIB = 1024**3


def h100(gib: float = 70, **options) -> PlanRequest:
    gpu = DeviceBudget("gpu0", "H100", "cuda", int(gib * GIB), 3350.0, "9.0")
    options.setdefault("host_budget_bytes", 64 * GIB)
    return PlanRequest(gpus=(gpu,), **options)


def llama_decode(depth: int) -> float:
    """llama.cpp's measured f16-cache decode speed of the dense model at `depth` in
    engine_figures.json."""
    return next(
        r["tokens_per_second"]
        for r in engine_table._figures()["decode"]
        if r["engine"] == "llama"
        and r["depth"] == depth
        and r["type_k"] == "f16"
        and not r.get("moe")
    )


def llama_figures_only() -> dict:
    """The figures file without its Hearth speed rows (as on a GPU class never measured)."""
    data = copy.deepcopy(engine_table._figures())
    data["decode"] = [row for row in data["decode"] if row["engine"] == "llama"]
    data["prompt"] = [row for row in data.get("prompt", ()) if row["engine"] == "llama"]
    return data


def with_hearth_figures(
    monkeypatch, tokens_per_second: dict[int, float], prompt: float | None = None
) -> None:
    """llama.cpp's figures plus Hearth rows on cuda sm_90 (a test's own, not measurements);
    `prompt`: Hearth's 512-token prompt speed, beside a llama.cpp one of 8,000 tokens/s."""
    data = llama_figures_only()
    data["prompt"] = []
    if prompt is not None:
        for engine, speed in (("llama", 8000.0), ("hearth", prompt)):
            data["prompt"].append(dict(
                device_class="cuda sm_90", device="test", model="llama3-8b Q4_K_M",
                engine=engine, tokens=512, tokens_per_second=speed, source="test",
            ))  # fmt: skip
    for depth, speed in tokens_per_second.items():
        data["decode"].append(dict(
            device_class="cuda sm_90", device="test", model="llama3-8b Q4_K_M", engine="hearth",
            type_k="f16", type_v="f16", depth=depth, tokens_per_second=speed, source="test",
        ))  # fmt: skip
    monkeypatch.setattr(engine_table, "_figures", lambda: data)


@pytest.fixture(scope="module")
def llama8b(synthetic_info):
    return Planner(synthetic_info("llama3-8b", "Q4_K_M"))


@pytest.mark.parametrize(
    ("backend", "cc", "name"),
    [("cuda", "9.0", "cuda sm_90"), ("cuda", "8.6", "cuda sm_86"), ("cuda", None, "cuda"),
     ("rocm", None, "rocm")],
)  # fmt: skip
def test_device_classes(backend, cc, name):
    assert device_class(backend, cc) == name


def test_every_figure_names_its_source():
    for figure in engine_table.decode_figures() + engine_table.prompt_figures():
        assert figure.source.startswith("docs/measurements/") and figure.tokens_per_second > 0
    assert kv_cost("hearth", "q8", "q8") == 0.00469  # the worse of the two measured models
    assert kv_cost("hearth", "f16", "q8") is None  # never measured


def test_without_hearth_figures_best_fit_keeps_llama_cpp_and_says_why(llama8b, monkeypatch):
    data = llama_figures_only()
    monkeypatch.setattr(engine_table, "_figures", lambda: data)
    verdict = speed_verdict("cuda sm_90")
    assert verdict.ratio is None and not verdict.hearth_faster
    plan = plan_engines(llama8b, h100())
    assert plan.fits and plan.choice.engine == "llama"
    assert "not been measured" in plan.notes[0]


def test_measured_faster_picks_hearth(llama8b, monkeypatch):
    with_hearth_figures(monkeypatch, {0: 330.0, 4096: 300.0, 32768: 250.0})
    verdict = speed_verdict("cuda sm_90")
    assert verdict.ratio == pytest.approx(330.0 / llama_decode(0))  # the worst depth: 0
    plan = plan_engines(llama8b, h100(target_ctx=8192))
    assert plan.choice.engine == "hearth" and plan.settings.engine == "hearth"
    assert plan.notes[0].startswith("Engine: Hearth engine")


def test_slower_at_any_measured_depth_keeps_llama_cpp(llama8b, monkeypatch):
    with_hearth_figures(monkeypatch, {0: 330.0, 32768: 150.0})  # llama.cpp: ~160 at 32k
    plan = plan_engines(llama8b, h100(target_ctx=8192))
    assert plan.choice.engine == "llama"
    assert f"{150.0 / llama_decode(32768):.2f}x llama.cpp" in plan.notes[0]


def test_slower_prompts_keep_llama_cpp_and_say_so(llama8b, monkeypatch):
    with_hearth_figures(monkeypatch, {0: 330.0, 32768: 250.0}, prompt=4000.0)
    plan = plan_engines(llama8b, h100(target_ctx=8192))
    assert plan.choice.engine == "llama"
    assert "reads prompts at 0.50x llama.cpp" in plan.notes[0]
    with_hearth_figures(monkeypatch, {0: 330.0, 32768: 250.0}, prompt=9000.0)
    assert plan_engines(llama8b, h100(target_ctx=8192)).choice.engine == "hearth"


def test_a_lossier_cache_than_llama_cpps_keeps_llama_cpp(llama8b, monkeypatch):
    with_hearth_figures(monkeypatch, {0: 330.0})
    # Hearth without its kivi4 K (its speed not measured): 12 GiB at 96k,
    # llama.cpp fits it with q8_0 (KL 0.0075), Hearth needs rot4 (KL 0.088)
    data = engine_table._figures()
    data["kv_quality"] = [r for r in data["kv_quality"] if r["type_k"] != "kivi4"]
    request = h100(12, target_ctx=98304, preference="context")
    plan = plan_engines(llama8b, request)
    llama = plan_engines(llama8b, request, "llama")
    assert plan.choice == llama.choice and plan.choice.engine == "llama"
    assert "loses more" in plan.notes[0]


def test_a_4_bit_cache_within_q8_0s_loss_takes_the_long_context_to_hearth(llama8b, monkeypatch):
    # the same 12 GiB at 96k with kivi4 K / rot4 V measured (worst mean KL 0.0036, against
    # llama.cpp q8_0's 0.0075): Hearth holds the target at 5 bits a value and decodes faster
    with_hearth_figures(monkeypatch, {0: 330.0})
    plan = plan_engines(llama8b, h100(12, target_ctx=98304, preference="context"))
    assert plan.choice.engine == "hearth"
    assert (plan.choice.type_k, plan.choice.type_v) == ("kivi4", "rot4")
    assert plan.choice.n_ctx == 98304


def test_named_engines_plan_for_that_engine_alone(llama8b):
    assert plan_engines(llama8b, h100(), "llama").notes == ()
    hearth = plan_engines(llama8b, h100(), "hearth")
    assert hearth.choice.engine == "hearth"
    metal = dataclasses.replace(h100(), gpus=(DeviceBudget("m", "M2", "metal", 16 * GIB),))
    refused = plan_engines(llama8b, metal, "hearth")
    assert not refused.fits and "Metal" in refused.reasons[0]
    auto = plan_engines(llama8b, metal)
    assert auto.choice.engine == "llama" and "Metal" in auto.notes[0]


def test_an_unknown_engine_is_a_programming_error(llama8b):
    with pytest.raises(ValueError):
        plan_engines(llama8b, h100(), "vllm")


def test_a_llama_plan_made_elsewhere_is_the_one_compared(llama8b, monkeypatch):
    data = llama_figures_only()
    monkeypatch.setattr(engine_table, "_figures", lambda: data)
    made = plan_engines(llama8b, h100(target_ctx=4096), "llama")
    plan = plan_engines(llama8b, h100(), llama=made)
    assert plan.choice == made.choice and "not been measured" in plan.notes[0]


def test_a_mixture_of_experts_is_judged_by_moe_figures_only(synthetic_info, monkeypatch):
    """Dense models' figures (Hearth faster) say nothing of the expert kernels: without a MoE
    model's figures, Best fit keeps llama.cpp for Qwen3-30B-A3B and says why; with them (a
    test's own rows, marked moe), it follows them."""
    with_hearth_figures(monkeypatch, {0: 330.0, 4096: 300.0, 32768: 250.0})
    qwen3_moe = Planner(synthetic_info("qwen3-30b-a3b", "Q4_K_M"))
    assert speed_verdict("cuda sm_90").hearth_faster
    assert speed_verdict("cuda sm_90", moe=True).ratio is None
    plan = plan_engines(qwen3_moe, h100())
    assert plan.fits and plan.choice.engine == "llama"
    assert "speed on mixture-of-experts models has not been measured" in plan.notes[0]
    data = engine_table._figures()
    data["decode"] = [row for row in data["decode"] if not row.get("moe")]  # llama.cpp's too
    for engine, speed in (("llama", 150.0), ("hearth", 180.0)):
        data["decode"].append(dict(
            device_class="cuda sm_90", device="test", model="qwen3-30b-a3b Q4_K_M", engine=engine,
            type_k="f16", type_v="f16", depth=0, tokens_per_second=speed, source="test", moe=True,
        ))  # fmt: skip
    assert speed_verdict("cuda sm_90", moe=True).ratio == pytest.approx(180.0 / 150.0)
    assert plan_engines(qwen3_moe, h100(target_ctx=8192)).choice.engine == "hearth"


def test_the_measured_moe_figures_choose_the_hearth_engine_and_say_why(synthetic_info):
    """The figures file's MoE rows (measured on an H200): the Hearth engine decodes and reads
    prompts faster on Qwen3-30B-A3B and gpt-oss-20b, the least by 1.24x (gpt-oss-20b at 32k), so
    Best fit takes it for a MoE model and its note names that figure."""
    verdict = speed_verdict("cuda sm_90", moe=True)
    assert verdict.ratio == pytest.approx(285.8 / 230.18)
    assert "decodes at least 1.24x" in verdict.text and "gpt-oss-20b" in verdict.text
    plan = plan_engines(Planner(synthetic_info("qwen3-30b-a3b", "Q4_K_M")), h100(target_ctx=8192))
    assert plan.choice.engine == "hearth" and "1.24x" in plan.notes[0]


def with_serve_figures(monkeypatch, ratios: dict[int, float]) -> None:
    """Dense single-stream Hearth figures that win, and serving rows (a test's own) where the
    Hearth engine's aggregate decode is `ratios[clients]` times llama-server's 1,000 tok/s."""
    with_hearth_figures(monkeypatch, {0: 330.0, 4096: 300.0, 32768: 250.0})
    data = engine_table._figures()
    data["serve"] = [
        dict(device_class="cuda sm_90", device="test", model="llama3-8b Q4_K_M", engine=engine,
             clients=clients, tokens_per_second=speed, ttft_p95_s=1.0, source="test")
        for clients, ratio in ratios.items()
        for engine, speed in (("llama", 1000.0), ("hearth", 1000.0 * ratio))
    ]  # fmt: skip


def test_parallel_requests_are_judged_by_serving_figures(llama8b, monkeypatch):
    """A server's --parallel 16 takes the Hearth engine only where its batch was measured
    faster than llama-server at every client count up to 16; the single-stream win alone does
    not decide it."""
    with_serve_figures(monkeypatch, {})
    plan = plan_engines(llama8b, h100(target_ctx=8192, n_parallel=16))
    assert plan.choice.engine == "llama"
    assert "serving 16 requests at once has not been measured" in plan.notes[0]
    with_serve_figures(monkeypatch, {4: 1.6, 16: 2.1, 64: 2.6})
    plan = plan_engines(llama8b, h100(target_ctx=8192, n_parallel=16))
    assert plan.choice.engine == "hearth"
    assert "serves 4 clients at least 1.60x llama-server" in plan.notes[0]
    with_serve_figures(monkeypatch, {4: 0.9, 16: 2.1, 64: 2.6})
    plan = plan_engines(llama8b, h100(target_ctx=8192, n_parallel=16))
    assert plan.choice.engine == "llama" and "at 0.90x llama-server" in plan.notes[0]
    # one stream is judged by the decode figures, whatever the serving rows say
    assert plan_engines(llama8b, h100(target_ctx=8192)).choice.engine == "hearth"
