"""What the speculative loop decides, reply by reply, on a real load: one task answered plainly
and with prompt lookup, in one process (no worker), with the draft length's choices, the
drafter's proposals, checks of padding only, and what the loop has learned of its costs.

    python3 benchmarks/speculative_trace.py [MODEL] [--task rewrite] [--reps 3] [--gpu-layers -1]

`benchmarks/speculative.py` and `speculative_gpu.py` say how fast; this says why. The prompt is
the task's text in the model's chat template, as the worker writes it. `--show` prints the
speculative reply with each check's kept drafts in [brackets] and its missed draft in {braces}.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from engine.chat.prompt import format_chat_prompt
from engine.runtime import protocol as p
from engine.runtime.generation import Session, generate
from engine.runtime.llama_engine import LlamaContext, LlamaModel
from engine.runtime.speculative.setup import open_speculation
from engine.runtime.to_llama import context_settings
from engine.starter_model import starter_model_path

TASKS = Path(__file__).resolve().parent / "data" / "speculative_tasks.json"
GREEDY = p.SamplingParams(temperature=0)


class _Traced:
    """Counts what the loop asks of its draft length and drafter (wraps, changes nothing)."""

    def __init__(self, spec):
        self.lengths, self.proposals = collections.Counter(), collections.Counter()
        self.empty_checks = 0
        self.drafts: list[tuple[int, list[int]]] = []  # (where it starts, its tokens)
        length, drafter = spec.length, spec.drafter
        next_length, propose, pad = length.next_length, drafter.propose, length.pad_empty_check

        def traced_next_length():
            k = next_length()
            self.lengths[k] += 1
            return k

        def traced_propose(tokens, n):
            drafts = propose(tokens, n)
            self.proposals[(n, len(drafts[:n]))] += 1
            if drafts:
                self.drafts.append((len(tokens), drafts[:n]))
            return drafts

        def traced_pad(n):
            padded = pad(n)
            self.empty_checks += padded
            return padded

        length.next_length, drafter.propose = traced_next_length, traced_propose
        length.pad_empty_check = traced_pad

    def clear(self):
        self.lengths.clear()
        self.proposals.clear()
        self.empty_checks = 0
        self.drafts = []

    def marked(self, model, tokens: list[int], start: int) -> str:
        """The reply from `start`, drafted tokens kept in [brackets], a missed one in {braces}."""
        mark: dict[int, str] = {}
        for at, draft in self.drafts:
            for i, token in enumerate(draft):
                if at + i >= len(tokens):
                    break
                kept = tokens[at + i] == token
                mark.setdefault(at + i, "kept" if kept else "missed")
                if not kept:
                    break
        out = []
        for position in range(start, len(tokens)):
            piece = model.token_text(tokens[position])
            kind = mark.get(position)
            out.append(f"[{piece}]" if kind == "kept" else f"{{{piece}}}" if kind else piece)
        return "".join(out)


def _reply(session, prompt, max_tokens, *, speculate):
    texts: list[str] = []
    started = time.perf_counter()
    outcome = generate(
        session,
        prompt,
        GREEDY,
        max_tokens=max_tokens,
        stop_strings=(),
        emit=texts.append,
        should_stop=lambda: False,
        started_at=started,
        speculate=speculate,
    )
    return "".join(texts), outcome.stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="GGUF (default: the starter model)")
    parser.add_argument("--task", default="rewrite")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--gpu-layers", type=int, default=-1)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--max-draft", type=int, default=16)
    parser.add_argument("--show", action="store_true", help="print the marked replies")
    args = parser.parse_args(argv)
    model_path = args.model or str(starter_model_path())
    task = next(t for t in json.loads(TASKS.read_text())["tasks"] if t["name"] == args.task)
    params = p.ModelParams(
        path=model_path,
        n_ctx=4096,
        n_gpu_layers=args.gpu_layers,
        n_threads=args.threads,
        speculative=p.SpeculativeParams(method="prompt_lookup", max_draft=args.max_draft),
    )
    model = LlamaModel(params)
    ctx = LlamaContext(model, context_settings(params))
    session = Session(model=model, ctx=ctx)
    session.speculation, note = open_speculation(params, model, ctx)
    if session.speculation is None:
        raise SystemExit(f"no speculation: {note}")
    spec = session.speculation
    traced = _Traced(spec)
    text, _template = format_chat_prompt(
        model.chat_template(),
        [{"role": "user", "content": task["user"]}],
        architecture=model.meta("general.architecture"),
        bos_token=model.bos_text(),
        eos_token=model.eos_text(),
    )
    prompt = model.tokenize(text, add_special=True)
    print(f"model: {model_path}; task {args.task}; padded checks: {spec.pad_drafts}; "
          f"lengths: {spec.length.lengths or 'any'}")  # fmt: skip
    for rep in range(args.reps):
        plain_text, plain = _reply(session, prompt, task["max_tokens"], speculate=False)
        traced.clear()
        text, fast = _reply(session, prompt, task["max_tokens"], speculate=True)
        length = spec.length
        slow, quick = plain.decode_tokens_per_second, fast.decode_tokens_per_second
        print(
            f"rep {rep}: plain {slow:.1f} tok/s, speculative {quick:.1f} ({quick / slow:.2f}x), "
            f"{fast.n_generated} tokens, drafts {fast.n_drafted} kept {fast.n_draft_accepted}, "
            f"same text: {text == plain_text}"
        )
        print(f"  lengths chosen {dict(sorted(traced.lengths.items()))}")
        print(f"  proposals (asked, got) {dict(traced.proposals.most_common(10))}")
        measured = {k: round(v, 2) for k, v in sorted(length._measured.items())}
        print(
            f"  checks of padding only {traced.empty_checks}; switch {length.switch:.2f} steps, "
            f"run {length.run_steps:.1f} checks, measured {measured}, acceptance "
            f"{length.acceptance:.2f}, plain step {spec.plain_step_seconds * 1000:.2f} ms"
        )
        if args.show:
            print(traced.marked(model, list(session.cached), len(prompt)))
    session.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
