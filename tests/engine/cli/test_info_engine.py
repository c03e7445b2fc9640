import subprocess
import sys

from engine.starter_model import starter_model_path


def test_info_engine_says_where_the_model_runs():
    cmd = [sys.executable, "-m", "app.launcher", "info", str(starter_model_path()), "--engine"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    engine_part = done.stdout.split("\nengine:\n", 1)[1]
    assert "runs on: CPU" in engine_part
    assert "layers on the GPU: 0 of 30" in engine_part
    assert "flash attention: on" in engine_part


def test_the_hearth_lines_say_whether_it_runs_here_and_what_best_fit_picks(tmp_path):
    from engine.cli.engine_check import hearth_lines
    from engine.gguf import read_model_info
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
    from tests.engine.session.conftest import cpu, machine, nvidia

    info = read_model_info(write_sparse_gguf(tmp_path / "l.gguf", SHAPES["llama3-8b"], "Q4_K_M"))
    lines, can_run = hearth_lines(info, machine(nvidia(22, 24, cc="8.9"), cpu(32)))
    assert can_run and lines[0] == "Hearth engine: can run it on Test RTX"
    assert lines[1].startswith("Best fit: llama.cpp. Engine: llama.cpp, because")
    assert "not been measured" in lines[1]
    lines, can_run = hearth_lines(info, machine(nvidia(22, 24, cc="7.5"), cpu(32)))
    assert not can_run and "compute capability 7.5" in lines[0]
    lines, can_run = hearth_lines(info, machine(cpu(32)))
    assert not can_run and "no GPU" in lines[0]


def test_the_plans_load_line_says_who_computes_the_experts_in_ram(tmp_path):
    """`hearth plan` on a 12 GiB sm_90 card for a Qwen3-30B-A3B shape: the Hearth engine with
    experts in RAM split between the CPU and the copy engine, said alike in the plan's first
    line and in its load line."""
    import io

    from engine.cli.plan_cmd import print_plan
    from engine.gguf import read_model_info
    from engine.planner import DeviceBudget, Planner, PlanRequest
    from engine.planner.engine_choice import plan_engines
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

    path = write_sparse_gguf(tmp_path / "q.gguf", SHAPES["qwen3-30b-a3b"], "Q4_K_M")
    gpu = DeviceBudget("gpu0", "H200", "cuda", 12 * 2**30, 4800.0, "9.0")
    request = PlanRequest(gpus=(gpu,), target_ctx=4096, host_budget_bytes=100 * 2**30)
    plan = plan_engines(Planner([read_model_info(path)]), request)
    assert plan.choice.engine == "hearth" and 0 < plan.choice.expert_cpu_picks < 8
    out = io.StringIO()
    print_plan(plan, out)
    split = f"{plan.choice.expert_cpu_picks} of a token's 8 picks computed by the CPU"
    load_line = out.getvalue().split("\nload with:", 1)[1]
    assert f"experts in RAM: the last {plan.choice.n_cpu_expert_layers} layers', {split}" in (
        load_line
    )
