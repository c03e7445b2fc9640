"""The Hearth engine's continuous batching in process, without the server: N generations of
`--max-tokens` tokens (ignore_eos, greedy, distinct prompts) submitted at once to
engine/runtime/hearth_batch.py's decoder, stepped until all are done; per client count the
aggregate decode speed (tokens after each reply's first over the time after the first, as
benchmarks/server_concurrency.py counts it) and the time to first token. What the server adds
(HTTP, streaming, the worker's pipe) is the difference from server_concurrency.py's rows.

    python3 -m benchmarks.hearth_batch_decode MODEL.gguf --clients 1 4 16 64 [--max-tokens 512]
        [--one-at-a-time]

Every level runs on a batch of max(--clients) sequences (a server's --parallel). With
--one-at-a-time each level runs again with the decoder's steps one at a time (no step
launched ahead of the last one's tokens: HearthBatchedDecoder.launch_ahead off), the row
marked `one-at-a-time`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from engine.runtime import protocol as p
from engine.runtime.batching import new_context
from engine.runtime.hearth_batch import HearthBatchedDecoder
from engine.runtime.hearth_batch_context import HearthBatchContext
from engine.runtime.hearth_driver import HearthModel

GREEDY = p.SamplingParams(temperature=0.0)


def prompts(n: int, length: int, n_vocab: int) -> list[list[int]]:
    """Distinct prompts of `length` tokens: no two share a first page."""
    span = n_vocab - 2
    return [[1 + (97 * i + 31 * j + i * j) % span for j in range(length)] for i in range(n)]


def run_level(model: HearthModel, clients: int, args, launch_ahead: bool = True) -> str:
    """`clients` generations on a batch of max(--clients) sequences, as a server started with
    --parallel that many runs them."""
    slots = max(args.clients)
    params = p.ModelParams(path=args.model, engine="hearth", n_ctx=args.ctx * slots,
                           n_parallel=slots, n_ubatch=512)  # fmt: skip
    ctx = new_context(model, params)
    assert isinstance(ctx, HearthBatchContext), type(ctx)
    ctx.warm_up()  # as the worker does at load: compiles, and captures the decode steps' graphs
    profile = StepProfile(ctx) if args.profile else None
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    count: dict[int, int] = {}

    def send(event) -> None:
        if isinstance(event, p.TokenText):
            now = time.perf_counter()
            first.setdefault(event.request_id, now)
            last[event.request_id] = now
            count[event.request_id] = count.get(event.request_id, 0) + event.n_tokens
        elif isinstance(event, p.GenerationFailed):
            print(f"  request {event.request_id} failed: {event.message}", flush=True)

    decoder = HearthBatchedDecoder(model, ctx, slots, send)
    decoder.launch_ahead = launch_ahead
    start = time.perf_counter()
    for rid, prompt in enumerate(prompts(clients, args.prompt_tokens, model.n_vocab)):
        sampling = p.SamplingParams(temperature=args.temperature) if args.temperature else GREEDY
        command = p.Generate(request_id=rid, prompt_tokens=tuple(prompt), sampling=sampling,
                             max_tokens=args.max_tokens, ignore_eos=True)  # fmt: skip
        decoder.submit(command, start, prompt)
    steps = 0
    while decoder.busy:
        if profile:
            profile.step(decoder)
        else:
            decoder.step()
        steps += 1
    end = time.perf_counter()
    decoder.close()
    ctx.close()
    ttft = sorted(first[r] - start for r in first)
    after_first = sum(count[r] - 1 for r in count)
    decode_s = max(last.values()) - min(first.values())
    total = sum(count.values())
    p50, p95 = 1000 * statistics.median(ttft), 1000 * ttft[int(0.95 * (len(ttft) - 1))]
    return (
        f"hearth-batch{'' if launch_ahead else ' one-at-a-time'}  clients={clients:3d} "
        f"aggregate {total / (end - start):8.1f} tok/s  "
        f"decode {after_first / decode_s:8.1f} tok/s  TTFT p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  "
        f"({steps} steps, "
        f"{total} tokens, {len(first)}/{clients} replies)"
    ) + (profile.report() if profile else "")


class StepProfile:
    """Where a level's steps go: each step's wall time, its forward pass (synchronized, so the
    GPU's work is inside it) and whether the forward replayed a CUDA graph; the rest of a step
    is the decoder's host work (sampling, detokenizing, the page index)."""

    def __init__(self, ctx: HearthBatchContext):
        self.ctx = ctx
        self.rows: list[tuple[int, bool, float, float]] = []  # rows, graph, forward s, step s
        self._forward = ctx.forward
        self._last: tuple[int, bool, float] | None = None
        ctx.forward = self._timed_forward

    def _timed_forward(self, seqs, tokens, positions, logit_rows):
        import torch

        graph = (
            self.ctx._graphs is not None
            and len(set(seqs)) == len(seqs)
            and list(logit_rows) == list(range(len(seqs)))
        )
        t0 = time.perf_counter()
        out = self._forward(seqs, tokens, positions, logit_rows)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self._last = (len(tokens), graph, time.perf_counter() - t0)
        return out

    def step(self, decoder) -> None:
        self._last = None
        t0 = time.perf_counter()
        decoder.step()
        if self._last is not None:
            self.rows.append((*self._last, time.perf_counter() - t0))

    def report(self) -> str:
        if not self.rows:
            return ""
        lines = []
        for graph in (True, False):
            part = [r for r in self.rows if r[1] == graph]
            if not part:
                continue
            fwd = statistics.mean(r[2] for r in part) * 1000
            step = statistics.mean(r[3] for r in part) * 1000
            rows = statistics.mean(r[0] for r in part)
            lines.append(
                f"\n    {'graph' if graph else 'eager'} steps {len(part):5d}: rows {rows:6.1f}  "
                f"forward {fwd:7.2f} ms  step {step:7.2f} ms  (host {step - fwd:6.2f} ms)"
            )
        slow = sorted(self.rows, key=lambda r: -r[3])[:3]
        lines.append("\n    slowest steps: " + ", ".join(
            f"{r[3] * 1000:.1f} ms ({r[0]} rows, {'graph' if r[1] else 'eager'})" for r in slow
        ))  # fmt: skip
        return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--ctx", type=int, default=1024, help="context tokens per sequence")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="per level: forward vs host time, graph or eager (each forward waited for: "
        "nothing launched ahead overlaps the host's work)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sample at this temperature (Hearth's other defaults: top-k 40, top-p 0.95, "
        "min-p 0.05); 0: greedy",
    )
    parser.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="each level again with no step launched ahead, to compare",
    )
    args = parser.parse_args(argv)
    n_ctx = args.ctx * max(args.clients)
    model = HearthModel(p.ModelParams(path=args.model, engine="hearth", n_ctx=n_ctx,
                                      n_parallel=max(args.clients)))  # fmt: skip
    try:
        for clients in args.clients:
            print(run_level(model, clients, args), flush=True)
            if args.one_at_a_time:
                print(run_level(model, clients, args, launch_ahead=False), flush=True)
    finally:
        model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
