"""`hearth chat` in a subprocess, as a person runs it, against hostile input made here: bytes that
are not UTF-8 in the path, the prompt and typed lines; a model whose chat template is refused; a
model llama.cpp would abort on or refuses; numbers out of range; messages too long to answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import chat_cmd
from engine.runtime.client import EngineCrashed
from tests.engine.hostile_gguf import (
    UNSAFE_TEMPLATE,
    with_metadata,
    with_tensor_renamed,
    with_tensor_type,
)

ROOT = Path(__file__).resolve().parents[3]
QUICK = ("--max-tokens", "6", "--temp", "0", "--ctx", "512")


def hearth_chat(*args: str | bytes, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """Run `hearth chat ARGS` with stdin; arguments may be bytes (not UTF-8), as a shell passes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    env.pop("PYTHONIOENCODING", None)
    code = "import sys; from engine.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "chat", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def starter(starter_path) -> str:
    return starter_path


def test_a_typed_line_that_is_not_utf8_is_replaced_and_said(starter: str) -> None:
    done = hearth_chat(starter, *QUICK, stdin=b"hi\xff\n")
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert done.returncode == 0
    assert b"your message held 1 byte that is not UTF-8 text" in done.stderr


def test_a_path_and_a_prompt_that_are_not_utf8_work(starter: str, tmp_path: Path) -> None:
    link = bytes(tmp_path) + b"/model-\xff.gguf"
    os.symlink(starter, link)
    done = hearth_chat(link, "--prompt", b"hi\xfe\xfd", *QUICK)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert done.returncode == 0
    assert b"--prompt held 2 bytes that are not UTF-8 text" in done.stderr
    assert done.stdout.strip()  # a reply


def test_a_refused_template_is_printed_with_the_advice(starter: str, tmp_path: Path) -> None:
    model = with_metadata(starter, tmp_path / "t.gguf", tokenizer__chat_template=UNSAFE_TEMPLATE)
    done = hearth_chat(str(model), "--prompt", "Hi", *QUICK)
    assert done.returncode == 0, done.stderr.decode()
    err = done.stderr.decode()
    assert "[The model's chat template failed: it tried an unsafe operation" in err
    assert "consider deleting this model file" in err
    assert "Chats are written in llama.cpp's built-in 'chatml' format" in err


def test_a_file_llama_cpp_would_abort_on_is_refused_by_the_header_check(
    starter: str, tmp_path: Path
) -> None:
    bad = with_tensor_type(starter, tmp_path / "bad.gguf", "output_norm.weight", "I32")
    done = hearth_chat(str(bad), "--prompt", "Hi", *QUICK)
    assert done.returncode == 2
    assert b"output_norm.weight is typed I32, which no weight can be" in done.stderr
    assert b"Traceback" not in done.stderr


def test_a_failed_load_prints_llama_cpps_own_error_lines(starter: str, tmp_path: Path) -> None:
    bad = with_tensor_renamed(
        starter, tmp_path / "bad.gguf", "output_norm.weight", "output_norx.weight"
    )
    done = hearth_chat(str(bad), "--prompt", "Hi", *QUICK)
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "llama.cpp said:" in err and "output_norm.weight" in err.split("llama.cpp said:")[1]


def test_a_crash_shows_the_cause_before_the_tail() -> None:
    crash = EngineCrashed(
        exit_code=-6,
        last_lines=tuple(f"#{i} 0x7f in frame_{i} ()" for i in range(40)),
        cause_lines=("binary-ops.cpp:135: binary_op: unsupported types",),
    )
    text = chat_cmd._failure_text(crash).splitlines()
    assert text[0].startswith("The engine process was killed by SIGABRT")
    assert text[1:3] == ["llama.cpp said:", "  ! binary-ops.cpp:135: binary_op: unsupported types"]
    assert text[-1] == "  | #39 0x7f in frame_39 ()" and len(text) == 4 + 10


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("",), b"the model path is empty"),
        (("   ",), b"the model path is empty"),
        (("--ctx", "1099511627776"), b"1099511627776 is out of range: use 64 to 16,777,216"),
        (("--ctx", "0"), b"0 is out of range"),
        (("--ctx", "-5"), b"-5 is out of range"),
        (("--temp", "nan"), b"nan is out of range"),
        (("--seed", "-1"), b"-1 is out of range"),
    ],
)
def test_unusable_arguments_fail_at_once_with_the_range(args: tuple[str, ...], said: bytes) -> None:
    done = hearth_chat(*args, "--prompt", "Hi")
    assert done.returncode == 2
    assert said in done.stderr
    assert b"Traceback" not in done.stderr


def test_a_message_too_long_is_refused_and_the_chat_goes_on(starter: str) -> None:
    longer_than_the_context = ("word " * 2000).encode()
    larger_than_a_frame = b"x" * (17 * 1024 * 1024)
    stdin = longer_than_the_context + b"\n" + larger_than_a_frame + b"\nHi\n"
    done = hearth_chat(starter, "--max-tokens", "6", "--temp", "0", "--ctx", "256", stdin=stdin)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "no longer fit the model's context" in err
    assert "The message is too long to send" in err
    assert err.count("That message was not sent") == 2
    assert done.stdout.count(b"> ") == 4  # three messages asked for, then the end
    assert done.stdout.split(b"> ")[3].strip()  # and the last one answered


def test_speculative_decoding_keeps_the_reply_and_says_what_it_kept(starter: str) -> None:
    prompt = "Repeat exactly: red green blue red green blue red green blue"
    args = ("--prompt", prompt, "--max-tokens", "24", "--temp", "0", "--ctx", "512", "--stats")
    plain = hearth_chat(starter, *args)
    fast = hearth_chat(starter, *args, "--speculative", "prompt-lookup")
    assert fast.returncode == 0, fast.stderr.decode()
    assert fast.stdout == plain.stdout
    assert b"prompt lookup: " in fast.stderr and b"drafts kept" in fast.stderr
    assert b"prompt lookup" not in plain.stderr
    # after the load, the plan's memory and what was measured (on the CPU: said not to be)
    assert b"[System RAM: predicted " in plain.stderr and b"not measured on the CPU" in plain.stderr
    assert b"tok/s bound)" in plain.stderr  # --stats: the speed beside its speed of light


def test_a_draft_model_without_its_file_is_refused_before_loading(starter: str) -> None:
    done = hearth_chat(starter, "--prompt", "hi", *QUICK, "--speculative", "draft-model")
    assert done.returncode == 2
    assert b"--speculative draft-model needs --draft-model GGUF." in done.stderr
