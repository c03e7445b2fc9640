"""What checking k tokens in one llama_decode costs against one plain decode step, measured the
way the speculative loop decodes: the sampler in the graph where the load has it there (only
token ids come back), every checked row's token read.

Two figures per k:
- repeated: the same batch shape step after step, so llama.cpp reuses its graph (and a CUDA build
  replays a captured CUDA graph) - the cost a run of checking steps of one length sees;
- after a plain step, and the plain steps after it: the loop changes shape between one token and
  k, llama.cpp then builds its graph again and a CUDA build runs the first step of a new shape
  directly and captures the second. The loop prices a checking step with the extra time of the
  plain steps after it (engine/runtime/speculative/setup.py), so this is the price it sees.

A step here is a decode and the token reads, without the loop's Python around it.
"""

from __future__ import annotations

import statistics
import time

from engine.runtime import protocol as p

KS = (2, 3, 4, 6, 8, 12, 16)
PLAIN_AFTER = 3  # plain steps timed after a checking step


def checking_cost(
    model_path: str,
    ks: tuple[int, ...] = KS,
    *,
    depth: int = 512,
    reps: int = 10,
    gpu_layers: int = -1,
    threads: int = 0,
) -> dict:
    """Median seconds of a plain step, of a step checking k tokens, and of the switch between
    them, after `depth` cached tokens (figures in ms and in plain steps)."""
    from engine.llama.batch import SequenceBatch
    from engine.llama.driver import Context, Model
    from engine.llama.params import SamplerSettings
    from engine.llama.sampler import Sampler
    from engine.runtime.to_llama import context_settings, model_settings

    params = p.ModelParams(
        path=model_path, n_ctx=depth + max(ks) + 64, n_gpu_layers=gpu_layers, n_threads=threads,
        flash_attn="on", speculative=p.SpeculativeParams(method="prompt_lookup", max_draft=max(ks)),
    )  # fmt: skip
    model = Model(model_settings(params))
    ctx = Context(model, context_settings(params))
    sampler = Sampler(model, SamplerSettings(temperature=0))
    in_graph = ctx.info.backend_sampling and sampler.attach(ctx)
    batch = SequenceBatch(max(ks) + 1)
    n_vocab = model.n_vocab

    def plain(token: int) -> float:
        started = time.perf_counter()
        ctx.decode_one(token % n_vocab)
        sampler.sample(ctx, -1)
        return time.perf_counter() - started

    def checking(k: int, position: int, seed: int) -> float:
        batch.clear()
        for i in range(k):
            batch.add((13 * (seed + i) + 5) % n_vocab, position + i, 0, output=True)
        started = time.perf_counter()
        batch.decode(ctx)
        for i in range(k):
            sampler.sample(ctx, i)
        return time.perf_counter() - started

    try:
        ctx.decode([(7 * i + 11) % n_vocab for i in range(depth)])
        ctx.synchronize()

        def repeated_plain() -> float:
            samples = []
            for rep in range(reps + 2):  # the first two: graph built, CUDA graph captured
                samples.append(plain(rep))
                ctx.forget_from(depth)
            return statistics.median(samples[2:])

        def repeated(k: int) -> float:
            samples = []
            for rep in range(reps + 2):
                samples.append(checking(k, depth, rep))
                ctx.forget_from(depth)
            return statistics.median(samples[2:])

        def switching(k: int) -> list[float]:
            """Medians of: checking k after plain steps, then each plain step after it."""
            rows = []
            for rep in range(reps + 1):
                for t in range(PLAIN_AFTER):  # plain steps before: one token is the shape
                    plain(rep + t)
                row = [checking(k, depth + PLAIN_AFTER, rep)]
                row += [plain(rep + t) for t in range(PLAIN_AFTER)]
                rows.append(row)
                ctx.forget_from(depth)
            return [statistics.median(col) for col in zip(*rows[1:], strict=True)]

        # Each k against plain steps timed just before it: on a shared machine the speed of a
        # step drifts over the seconds this takes.
        one, again, switch = {}, {}, {}
        for k in ks:
            one[k], again[k], switch[k] = repeated_plain(), repeated(k), switching(k)
        return {
            "depth": depth,
            "sampling_in_graph": bool(in_graph),
            "one_step_ms": statistics.median(one.values()) * 1000,
            "checking_ms": {k: s * 1000 for k, s in again.items()},
            "cost_in_steps": {k: s / one[k] for k, s in again.items()},
            "after_plain_in_steps": {k: s[0] / one[k] for k, s in switch.items()},
            "plain_after_in_steps": {k: [x / one[k] for x in s[1:]] for k, s in switch.items()},
        }
    finally:
        batch.close()
        sampler.close()
        ctx.close()
        model.close()


def switch_price(cost: dict, k: int) -> float:
    """A checking step of k tokens between plain steps, in plain steps: its own cost after a
    plain step and what the plain steps after it cost above one step each (as the loop prices
    it)."""
    after = cost["plain_after_in_steps"][k]
    return cost["after_plain_in_steps"][k] + sum(max(0.0, x - 1.0) for x in after)


def format_cost(cost: dict) -> str:
    where = "in the graph" if cost.get("sampling_in_graph") else "on the CPU"
    lines = [
        f"checking k tokens in one llama_decode after {cost['depth']} cached tokens "
        f"(one plain step: {cost['one_step_ms']:.2f} ms, median; tokens sampled {where})",
        "k: the last sampled token and k - 1 drafts; at most k tokens come out of a step",
        f"{'k':>3} {'ms':>8} {'steps':>6} {'bound':>6} | {'after plain':>11} "
        f"{'plain 1st 2nd 3rd after':>24} {'price':>6} {'bound':>6}",
    ]
    for k, ms in cost["checking_ms"].items():
        steps = cost["cost_in_steps"][k]
        after = cost["after_plain_in_steps"][k]
        plains = " ".join(f"{x:>4.2f}" for x in cost["plain_after_in_steps"][k])
        price = switch_price(cost, k)
        lines.append(
            f"{k:>3} {ms:>8.2f} {steps:>6.2f} {k / steps:>5.2f}x | {after:>11.2f} "
            f"{plains:>24} {price:>6.2f} {k / price:>5.2f}x"
        )
    lines.append(
        "steps / bound: the same shape step after step (graph reused); after plain ... price: "
        "between plain steps, as the loop pays it (checking step + the plain steps' extra time)"
    )
    return "\n".join(lines)
