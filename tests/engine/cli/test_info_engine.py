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
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
    from engine.cli.engine_check import hearth_lines
    from engine.gguf import read_model_info
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
