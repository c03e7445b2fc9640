"""`hearth serve`: what it refuses before it listens, and how it finds the model."""

import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.serve_cmd import resolve_model
from engine.server.config import ServerConfigError

REPO = Path(__file__).resolve().parents[3]


def _serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())",
         "serve", *args],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HEARTH_API_KEY": ""},
    )  # fmt: skip


def test_a_cache_for_all_parallel_requests_that_does_not_fit_is_refused(starter_model):
    run = _serve(str(starter_model), "--parallel", "64", "--ctx", "1000000", "--port", "1")
    assert run.returncode == 1
    assert "64,000,000 tokens" in run.stderr and "fewer --parallel" in run.stderr


def test_fill_gpu_with_a_chosen_context_is_refused(starter_model):
    run = _serve(str(starter_model), "--fill-gpu", "--ctx", "2048", "--port", "1")
    assert run.returncode == 1 and "--fill-gpu chooses the context itself" in run.stderr


def test_no_key_off_loopback_is_refused_before_the_model_loads():
    run = _serve("--host", "192.168.1.10", "--port", "8741")
    assert run.returncode == 2 and "needs an API key" in run.stderr


def test_a_library_model_is_found_by_its_name(tmp_path, monkeypatch, starter_model):
    models = tmp_path / "models"
    (models / "owner" / "repo").mkdir(parents=True)
    target = models / "owner" / "repo" / "Tiny-Model.Q4_1.gguf"
    target.write_bytes(starter_model.read_bytes())
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))
    from engine.hub import settings

    monkeypatch.setattr(settings, "load_settings", lambda *a: settings.HubSettings(models))
    assert resolve_model("tiny-model.q4_1") == target
    with pytest.raises(ServerConfigError, match=r"Tiny-Model\.Q4_1\.gguf"):
        resolve_model("no-such-model")
