"""Headless command line: `hearth chat|info|hw|plan|bench|serve|host|keys|service ...`.

Each subcommand lives in its own module with two functions: `add_arguments(parser)` and
`run(args) -> int` (the exit status). Add a new one to SUBCOMMANDS.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from engine.untrusted_text import printable_line

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "chat": ("engine.cli.chat_cmd", "chat with a model in the terminal, or answer one --prompt"),
    "info": ("engine.cli.info_cmd", "show what a GGUF file holds (header only, no weights read)"),
    "hw": ("engine.cli.hw_cmd", "show the GPUs and memory Hearth can use"),
    "plan": ("engine.cli.plan_cmd", "show how a model fits your GPU: quant, context, KV, layers"),
    "bench": ("engine.cli.bench_cmd", "measure Hearth's speed beside llama.cpp's llama-bench"),
    "serve": ("engine.cli.serve_cmd", "serve a model over an OpenAI- and Ollama-compatible API"),
    "host": ("engine.cli.host_cmd", "lend this machine's GPU to Hearth on another computer"),
    "keys": ("engine.cli.keys_cmd", "create, list and revoke the local server's API keys"),
    "service": (
        "engine.cli.service_cmd",
        "the API server in the background: install, status, stop",
    ),
}


WINDOW_EPILOG = """\
The window:
  hearth                   open the window
  hearth --model PATH      open the window and load PATH (a .gguf file); -m for short

None of the commands above opens the window: they run in this terminal only.
`hearth COMMAND --help` tells more about one of them."""


def hearth_version() -> str:
    """The installed distribution's version; a source tree that was never installed says so."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hearth")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hearth",
        description="Run GGUF models on your GPU: a desktop window, and the commands below.",
        epilog=WINDOW_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hearth {hearth_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    from engine.cli.planning import EngineDidNotStart

    try:
        return args._run(args)
    except KeyboardInterrupt:
        return 130
    except EngineDidNotStart as exc:
        print(printable_line(str(exc)), file=sys.stderr)
        return 1
