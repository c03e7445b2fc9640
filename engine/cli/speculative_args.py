"""`--speculative` and its companions, shared by `hearth chat`, `serve` and `bench`."""

from __future__ import annotations

import argparse
import os

from engine.cli import numbers
from engine.runtime import protocol as p
from engine.runtime.speculative.summary import speculation_text

# Command-line spelling -> SpeculativeParams.method
METHODS = {
    "off": "off",
    "prompt-lookup": "prompt_lookup",
    "draft-model": "draft_model",
    "mtp": "mtp",
    "auto": "auto",
}


def add_speculative_arguments(parser: argparse.ArgumentParser, *, default: str = "off") -> None:
    parser.add_argument(
        "--speculative",
        choices=list(METHODS),
        default=default,
        help="speculative decoding: draft tokens and check them several at a time (prompt-lookup: "
        "from the conversation; draft-model: a small model of the same family, --draft-model; "
        "mtp: the model's own MTP layers; auto: prompt lookup where the engine's own trial on "
        "this model says it is faster, which the Hearth engine measures once per model; off on "
        f"llama.cpp). Default: {default}",
    )
    parser.add_argument("--draft-model", metavar="GGUF", help="the draft model for draft-model")
    parser.add_argument(
        "--max-draft",
        type=numbers.int_in_range(1, 64),
        default=p.SpeculativeParams().max_draft,
        metavar="N",
        help="the most tokens drafted at once (the length adapts below it)",
    )


def speculative_from(args: argparse.Namespace) -> tuple[p.SpeculativeParams, str | None]:
    """The speculation the command line asks for, or a message saying what is missing."""
    method = METHODS[getattr(args, "speculative", "off") or "off"]
    draft = getattr(args, "draft_model", None) or ""
    if method == "draft_model" and not draft:
        return p.SpeculativeParams(), "--speculative draft-model needs --draft-model GGUF."
    if draft and method != "draft_model":
        return p.SpeculativeParams(), "--draft-model is used with --speculative draft-model only."
    if draft and not os.path.isfile(draft):
        return p.SpeculativeParams(), f"No draft model file at {draft}; give a GGUF file."
    return p.SpeculativeParams(method=method, draft_path=draft, max_draft=args.max_draft), None


def speculative_summary(stats: p.GenerationStats) -> str:
    """ ", prompt lookup: 62% of 40 drafts kept, 1.8x speed" for a reply that speculated."""
    text = speculation_text(stats)
    return f", {text}" if text else ""
