"""`hearth plan`: the printed plan, --json, and the exit statuses."""

from __future__ import annotations

import argparse
import json

import pytest

from engine.cli import plan_cmd
from engine.session import MachineSnapshot


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="hearth plan")
    plan_cmd.add_arguments(parser)
    return plan_cmd.run(parser.parse_args(list(argv)))


@pytest.fixture
def llama_files(synthetic_info) -> list[str]:
    return [synthetic_info("llama3-8b", q).source for q in ("Q8_0", "Q4_K_M")]


def test_prints_a_plan_that_fits(llama_files, capsys) -> None:
    assert run(*llama_files, "--vram", "24", "--ram", "32", "--ctx", "16384") == 0
    out = capsys.readouterr().out
    assert out.startswith("Plan: Q8_0, 16384 tokens, KV f16/f16, flash attention on\n")
    assert "33/33 layers on GPU" in out
    assert "24 GiB GPU" in out and "system RAM" in out
    assert "load with: n_ctx=16384 n_gpu_layers=33 flash_attn=on" in out


def test_json(llama_files, capsys) -> None:
    assert run(llama_files[1], "--vram", "8", "--ram", "32", "--prefer", "context", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "fits" and data["choice"]["quant"] == "Q4_K_M"
    gpu = data["devices"][0]
    assert gpu["total_bytes"] <= gpu["budget_bytes"]
    assert data["settings"]["flash_attn"] in ("on", "off")


def test_nothing_fits_exits_1_with_options(llama_files, capsys) -> None:
    assert run(llama_files[0], "--vram", "2", "--ram", "4") == 1
    out = capsys.readouterr().out
    assert "Plan: nothing fits" in out and "nearest options:" in out
    assert "system RAM" in out


def test_a_file_that_is_not_gguf_exits_2(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all")
    assert run(str(bad), "--vram", "8") == 2
    assert "hearth plan:" in capsys.readouterr().err


def test_kv_types_can_be_limited(llama_files, capsys) -> None:
    code = run(
        llama_files[1], "--vram", "6", "--ram", "32", "--ctx", "65536", "--kv", "f16", "--json"
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["choice"]["type_k"] == "f16"


def test_by_default_it_plans_for_this_machines_free_memory(tmp_path, capsys, monkeypatch) -> None:
    """No --ram/--vram: the machine as detected now (made up here: 20 GiB of RAM free, no GPU)."""
    import engine.session
    from engine.hardware import Detection, Device
    from engine.hardware.records import CPU
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

    gib = 1024**3
    machine = Detection(
        devices=(Device("cpu", "other", "CPU", CPU, ("cpu",), "psutil", 24 * gib, 20 * gib),)
    )
    monkeypatch.setattr(engine.session, "snapshot_machine", lambda: MachineSnapshot(machine))
    mixtral = write_sparse_gguf(tmp_path / "mixtral.gguf", SHAPES["mixtral-8x7b"], "Q4_K_M")
    assert mixtral.stat().st_size > 24 * gib  # more than the whole RAM
    assert run(str(mixtral)) == 1
    out = capsys.readouterr().out
    assert "nothing fits" in out and "more on system RAM" in out
    llama = write_sparse_gguf(tmp_path / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    assert run(str(llama)) == 0
    assert "20.00" in capsys.readouterr().out  # the budget column: the free RAM, not the total


def test_a_cpu_probe_that_fails_still_leaves_the_ram_to_check() -> None:
    from engine.hardware.detection import detect

    found = detect(probes={})  # no probe at all ran: the fallback CPU device
    cpu = found.devices[-1]
    assert cpu.free_bytes and cpu.free_bytes > 0 and cpu.total_bytes >= cpu.free_bytes
    assert MachineSnapshot(found).plan_request().host_budget_bytes == cpu.free_bytes


def test_auto_engine_says_why_llama_cpp_and_hearth_plans_its_own_formats(llama_files, capsys):
    assert run(llama_files[1], "--vram", "24", "--ram", "32", "--ctx", "65536",
               "--compute-capability", "8.9") == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "engine: llama.cpp\n" in out and "not been measured" in out
    assert run(llama_files[1], "--vram", "24", "--ram", "32", "--ctx", "65536",
               "--engine", "hearth") == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("Plan: Q4_K_M, ") and ", Hearth engine\n" in out
    assert "engine: Hearth engine\n" in out and "engine=hearth" in out
    assert "the output and the token embedding on" in out


def test_the_hearth_engine_refuses_an_old_gpu(llama_files, capsys):
    assert run(llama_files[1], "--vram", "24", "--engine", "hearth",
               "--compute-capability", "7.5") == 1  # fmt: skip
    assert "compute capability 7.5" in capsys.readouterr().out


def _this_machine_has(monkeypatch, free_gib: float) -> None:
    """This machine, made up: no GPU and `free_gib` of free RAM."""
    import engine.session
    from engine.hardware import Detection, Device
    from engine.hardware.records import CPU

    gib = 1024**3
    cpu = Device("cpu", "other", "CPU", CPU, ("cpu",), "psutil", int((free_gib + 4) * gib),
                 int(free_gib * gib))  # fmt: skip
    snapshot = MachineSnapshot(Detection(devices=(cpu,)))
    monkeypatch.setattr(engine.session, "snapshot_machine", lambda: snapshot)


def test_vram_alone_still_counts_this_machines_ram(synthetic_info, capsys, monkeypatch) -> None:
    """An 8 GiB card beside 23.6 GiB of free RAM: a 70B at Q4_K_M (40 GiB) fits nowhere."""
    _this_machine_has(monkeypatch, 23.6)
    big = synthetic_info("llama3-70b", "Q4_K_M").source
    assert run(big, "--vram", "8") == 1
    out = capsys.readouterr().out
    assert "Plan: nothing fits" in out and "more on system RAM" in out
    assert run(big, "--vram", "8", "--ram", "64") == 0  # --ram plans for another machine


def test_the_smallest_setup_is_the_one_the_window_uses() -> None:
    from engine.session import MIN_CONTEXT

    parser = argparse.ArgumentParser()
    plan_cmd.add_arguments(parser)
    assert parser.parse_args(["m.gguf"]).min_ctx == MIN_CONTEXT == 512


def test_nothing_fits_names_the_smaller_file_beside_it(tmp_path, capsys, monkeypatch) -> None:
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

    _this_machine_has(monkeypatch, 5.5)
    big = write_sparse_gguf(tmp_path / "Llama-3-8B-Q8_0.gguf", SHAPES["llama3-8b"], "Q8_0")
    small = write_sparse_gguf(tmp_path / "Llama-3-8B-Q3_K_M.gguf", SHAPES["llama3-8b"], "Q3_K_M")
    write_sparse_gguf(tmp_path / "Mistral-Q3_K_M.gguf", SHAPES["mistral-7b"], "Q3_K_M")  # another
    assert run(str(big)) == 1
    out = capsys.readouterr().out
    assert "other files of this model beside it that fit:" in out
    assert f"  - {small}: " in out and "Mistral" not in out
    assert run(str(big), "--json") == 1
    (found,) = json.loads(capsys.readouterr().out)["other_files_that_fit"]
    assert found["path"] == str(small)
