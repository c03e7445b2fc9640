"""A llama.cpp abort's cause is kept apart from the backtrace that follows it, and escaped."""

from __future__ import annotations

from engine.runtime.engine_output import (
    CAUSE_LINES_KEPT,
    TAIL_LINES_KEPT,
    EngineOutput,
    crash_report,
    is_cause_line,
)

ABORT = (
    "/src/llama.cpp/ggml/src/ggml-cpu/binary-ops.cpp:135: binary_op: unsupported types: "
    "dst: f32, src0: f32, src1: i32"
)


def gdb_backtrace(n: int) -> list[str]:
    """What ggml_print_backtrace prints through gdb: ~114 lines, some naming ggml_abort."""
    lines = [
        "[New LWP 4242]",
        "[Thread debugging using libthread_db enabled]",
        'Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".',
        "0x00007f1e0f6ea42f in __GI___wait4 () at ../sysdeps/unix/sysv/linux/wait4.c:30",
    ]
    for i in range(n - len(lines) - 1):
        lines.append(f"#{i} 0x00007f1e0d{i:06x} in ggml_abort () from libggml-base.so")
        lines.append(f"{i}\tggml/src/ggml.c: No such file or directory.")
    lines.append("[Inferior 1 (process 4241) detached]")
    return lines[:n]


def test_the_abort_line_survives_a_long_backtrace_and_is_shown_first() -> None:
    out = EngineOutput()
    out.add(b"llama_model_loader: loaded meta data with 33 key-value pairs\n")
    out.add(ABORT.encode() + b"\n")
    out.add(ABORT.encode() + b"\n")  # every thread that hits it prints it
    for line in gdb_backtrace(114):
        out.add(line.encode() + b"\n")
    assert out.cause_lines() == (ABORT,)
    tail = out.last_lines()
    assert len(tail) == TAIL_LINES_KEPT and ABORT not in tail
    report = crash_report("The engine process was killed by SIGABRT.", out.cause_lines(), tail, 10)
    lines = report.splitlines()
    assert lines[1] == "llama.cpp said:" and lines[2] == f"  ! {ABORT}"
    assert lines[3] == "Last lines from the engine:" and len(lines) == 4 + 10


def test_backtrace_frames_and_the_files_metadata_are_not_causes() -> None:
    assert is_cause_line("llama_model_load: error loading model: missing tensor 'output.weight'")
    assert is_cause_line("/ggml/src/ggml.c:1820: GGML_ASSERT(a->ne[2] == b->ne[2]) failed")
    assert is_cause_line("terminate called after throwing an instance of 'std::runtime_error'")
    assert not is_cause_line("#7 0x00007f in ggml_abort () from libggml-base.so")
    assert not is_cause_line("llama_model_loader: - kv   2: general.name str = error failed")
    assert not is_cause_line("print_info: n_ctx_train      = 8192")


def test_kept_lines_are_escaped_bounded_and_few() -> None:
    out = EngineOutput()
    out.add(b"llama_model_loader: - kv 2: general.name str = Evil\x1b]0;pwned\x07\xff\n")
    out.add(b"x" * 100_000 + b"\n")
    for i in range(CAUSE_LINES_KEPT + 5):
        out.add(f"error {i}\n".encode())
    first, long = out.last_lines()[0], out.last_lines()[1]
    assert first.endswith("Evil\\x1b]0;pwned\\x07\ufffd")  # the byte 0xff: replaced
    assert len(long) == 1000
    assert len(out.cause_lines()) == CAUSE_LINES_KEPT
