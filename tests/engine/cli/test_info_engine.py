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
