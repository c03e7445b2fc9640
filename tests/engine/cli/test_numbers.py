"""CLI numbers are range-checked before anything reaches llama.cpp."""

from __future__ import annotations

import argparse

import pytest

from engine.cli import build_parser, numbers


@pytest.mark.parametrize("text", ["1099511627776", "0", "-5", "63", "16777217", "4k", ""])
def test_context_lengths_out_of_range_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"out of range|not a whole number"):
        numbers.context_tokens(text)


@pytest.mark.parametrize("text", ["64", "4096", "16777216"])
def test_context_lengths_in_range_pass(text: str) -> None:
    assert numbers.context_tokens(text) == int(text)


def test_gpu_layers_take_minus_one_for_all_and_nothing_else_negative() -> None:
    assert numbers.gpu_layers("-1") == -1
    assert numbers.gpu_layers("0") == 0
    with pytest.raises(argparse.ArgumentTypeError, match=r"use 0 to .* \(or -1\)"):
        numbers.gpu_layers("-2")


@pytest.mark.parametrize("text", ["nan", "inf", "-0.1", "101", "warm"])
def test_temperatures_must_be_finite_and_in_range(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        numbers.float_in_range(0.0, 100.0)(text)


def test_seeds_are_uint32() -> None:
    assert numbers.seed("4294967295") == 2**32 - 1
    with pytest.raises(argparse.ArgumentTypeError):
        numbers.seed("-1")
    with pytest.raises(argparse.ArgumentTypeError):
        numbers.seed("4294967296")


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "--ctx", "1099511627776"],
        ["chat", "--max-tokens", "0"],
        ["plan", "m.gguf", "--vram", "nan"],
        ["plan", "m.gguf", "--ram", "-1"],
        ["plan", "m.gguf", "--ctx", "0"],
        ["plan", "m.gguf", "--min-ctx", "-5"],
        ["bench", "--reps", "0"],
        ["bench", "--gpu-layers", "-7"],
        ["bench", "--decode", "128", "0"],
    ],
)
def test_every_command_checks_its_numbers(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert "is out of range: use" in capsys.readouterr().err
