"""The engine worker with hostile copies of the starter model, made here: a path that is not
UTF-8, a name holding terminal escapes and an unsafe chat template, a norm typed I32 that makes
llama.cpp abort, a missing tensor that makes it refuse the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.runtime import engine_output
from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed
from tests.engine.hostile_gguf import (
    TERMINAL_ATTACK,
    UNSAFE_TEMPLATE,
    with_metadata,
    with_tensor_renamed,
    with_tensor_type,
)

from .conftest import GREEDY, RunningEngine


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def hostile_model(starter_path: str, hostile_dir: Path) -> Path:
    return with_metadata(
        starter_path,
        hostile_dir / "evil.gguf",
        general__name=TERMINAL_ATTACK,
        tokenizer__chat_template=UNSAFE_TEMPLATE,
    )


def test_a_path_that_is_not_utf8_travels_to_llama_cpp_unchanged(
    engine: RunningEngine, starter_path: str, hostile_dir: Path
) -> None:
    path = os.fsdecode(bytes(hostile_dir) + b"/model-\xff\xfe.gguf")  # lone surrogates
    os.symlink(starter_path, path)
    loaded = engine.load(path, n_ctx=512)
    assert isinstance(loaded, p.ModelLoaded), loaded
    assert loaded.path == path


def test_a_refused_template_is_said_in_the_load_result_and_the_chat_goes_on(
    engine: RunningEngine, hostile_model: Path
) -> None:
    loaded = engine.load(str(hostile_model), n_ctx=512)
    assert isinstance(loaded, p.ModelLoaded), loaded
    assert loaded.chat_template.startswith("llama.cpp's built-in 'chatml' format")
    problem = loaded.chat_template_problem
    assert "tried an unsafe operation" in problem and "consider deleting this model file" in problem
    texts, done = engine.run(
        messages=(p.ChatMessage(role="user", content="Hi"),), sampling=GREEDY, max_tokens=4
    )
    assert isinstance(done, p.GenerationDone) and "".join(texts)


def test_the_models_name_reaches_the_engines_log_lines_escaped(
    hostile_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama.cpp lists the file's metadata early in a load: keep every line to see it
    monkeypatch.setattr(engine_output, "TAIL_LINES_KEPT", 10_000)
    engine = RunningEngine()
    try:
        assert isinstance(engine.load(str(hostile_model), n_ctx=512), p.ModelLoaded)
        lines = engine.client.last_lines()
    finally:
        engine.close()
    assert any("Evil\\x1b]0;pwned\\x07\\x1b[2J\\x0dFAKE" in line for line in lines)
    assert not any(c in line for line in lines for c in "\x1b\x07\r\u202e")


@pytest.fixture(scope="module")
def i32_norm_model(starter_path: str, hostile_dir: Path) -> Path:
    return with_tensor_type(starter_path, hostile_dir / "i32.gguf", "output_norm.weight", "I32")


def test_a_file_llama_cpp_would_abort_on_is_refused_before_it_sees_it(
    engine: RunningEngine, i32_norm_model: Path
) -> None:
    refused = engine.load(str(i32_norm_model), n_ctx=512)
    assert isinstance(refused, p.LoadFailed), refused
    assert "output_norm.weight is typed I32, which no weight can be" in refused.message
    assert engine.client.alive


def test_an_abort_in_llama_cpp_keeps_its_cause_apart_from_the_backtrace(
    i32_norm_model: Path, tmp_path: Path
) -> None:
    # ggml, left to itself, attaches gdb on an abort; a gdb that never returns (one waiting on
    # the network for symbols) must not hold the crash back from the person
    (tmp_path / "gdb").write_text("#!/bin/sh\nsleep 600\n")
    (tmp_path / "gdb").chmod(0o755)
    env = {
        **os.environ,
        "HEARTH_WORKER_FAULT": "no_header_check",
        "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
    }
    engine = RunningEngine(env=env)
    try:
        crashed = engine.load(str(i32_norm_model), n_ctx=512)
    finally:
        engine.close()
    assert isinstance(crashed, EngineCrashed), crashed
    assert "binary_op: unsupported types" in crashed.cause_lines[0]
    assert len(crashed.cause_lines) <= 2  # the cause, not the backtrace


def test_a_file_llama_cpp_refuses_carries_its_error_lines(
    engine: RunningEngine, starter_path: str, hostile_dir: Path
) -> None:
    bad = with_tensor_renamed(
        starter_path, hostile_dir / "no-norm.gguf", "output_norm.weight", "output_norx.weight"
    )
    failed = engine.load(str(bad), n_ctx=512)
    assert isinstance(failed, p.LoadFailed), failed
    assert any("output_norm.weight" in line for line in failed.details), failed.details
