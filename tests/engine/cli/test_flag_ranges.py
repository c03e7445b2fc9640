"""Every number a command takes is range-checked at the command line, with a message naming
the range (argparse's exit status 2), instead of a traceback, a segfault or a server that
refuses every request later."""

import io
import math
from contextlib import redirect_stderr

import pytest

from engine.cli import build_parser, main
from engine.cli.remote_cmd import print_helpers


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "--timeout", "0"], "out of range"),
        (["serve", "--timeout", "-1"], "out of range"),
        (["serve", "--timeout", "nan"], "out of range"),
        (["serve", "--queue", "-1000"], "out of range"),
        (["serve", "--max-tokens", "0"], "out of range"),
        (["serve", "--threads", "100000"], "out of range"),
        (["serve", "--ctx", "0"], "out of range"),
        (["serve", "--ctx", "1"], "out of range"),
        (["serve", "--port", "0"], "out of range"),
        (["serve", "--parallel", "65"], "out of range"),
        (["serve", "--gpu-layers", "-7"], "out of range"),
        (["host", "--port", "-1"], "out of range"),
        (["host", "--port", "65536"], "out of range"),
        (["host", "--port", str(2**64 + 1)], "out of range"),
        (["host", "--memory-limit", "nan"], "out of range"),
        (["host", "--memory-limit", "inf"], "out of range"),
        (["host", "--threads", "100000"], "out of range"),
        (["hw", "--timeout", "inf"], "out of range"),
        (["hw", "--timeout", "1e309"], "out of range"),
        (["hw", "--timeout", "x"], "not a number"),
        (["plan", "model.gguf", "--kv", "bogus"], "unknown KV cache type"),
        (["plan", "model.gguf", "--kv", ","], "unknown KV cache type"),
    ],
)  # fmt: skip
def test_an_out_of_range_flag_is_refused_with_its_range(argv, says):
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert says in err.getvalue() and "Traceback" not in err.getvalue()


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["serve", "--timeout", "30"], "timeout", 30.0),
        (["serve", "--queue", "0"], "queue", 0),
        (["host", "--port", "50052"], "port", 50052),
        (["host", "--memory-limit", "0.5"], "memory_limit", 0.5),
        (["hw", "--timeout", "2.5"], "timeout", 2.5),
        (["plan", "m.gguf", "--kv", "f16, q8_0"], "kv", "f16,q8_0"),
    ],
)  # fmt: skip
def test_values_in_range_pass(argv, field, value):
    got = getattr(build_parser().parse_args(argv), field)
    assert got == value and (not isinstance(got, float) or math.isfinite(got))


def test_bench_with_an_empty_model_name_refuses_at_once_instead_of_benchmarking():
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["bench", ""]) == 2
    assert "empty" in err.getvalue()


def test_bench_with_a_missing_file_says_so():
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["bench", "/no/such/model.gguf"]) == 2
    assert "No GGUF file" in err.getvalue()


def test_a_helper_address_is_printed_with_its_escapes_shown():
    out = io.StringIO()
    address = "127.0.0.1:\x1b[2J"
    print_helpers([(address, f"'{address}': the port must be a number.")], out)
    assert "\x1b" not in out.getvalue() and "\\x1b[2J" in out.getvalue()
