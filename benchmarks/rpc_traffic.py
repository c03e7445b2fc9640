"""What each decoded token sends over llama.cpp's RPC link, counted: the figures behind the
planner's network model (engine/planner/remote_link.py) and the paper estimate in
docs/multi-machine.md.

A `hearth host` on 127.0.0.1 serves the CPU; a counting relay sits between it and the engine
worker; the model is loaded with its last layers (and the output layer) on the helper. Per
decoded token: bytes each way and answered requests, from the difference between a long and a
short generation (different prompts of the same length, so neither reuses the other's cache
and both prefill alike).

    PYTHONPATH=$PWD python -m benchmarks.rpc_traffic [--model PATH] [--layers 1 4 8 16]
        [--out docs/measurements/DATE-rpc-traffic-cpu.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

from engine.gguf import read_model_info
from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue
from engine.starter_model import starter_model_path
from testkit.rpc_helpers import CountingRelay, local_helper

SHORT, LONG = 8, 40
PROMPT_TOKENS = 24
TIMEOUT_S = 300


def generate(client: EngineClient, events: EventQueue, tokens: tuple[int, ...], n: int):
    request = client.generate(
        prompt_tokens=tokens,
        sampling=p.SamplingParams(temperature=0.0),
        max_tokens=n,
        ignore_eos=True,
    )
    while True:
        event = events.get(timeout=TIMEOUT_S)
        if isinstance(event, p.GenerationDone) and event.request_id == request:
            return event
        if isinstance(event, p.GenerationFailed | EngineCrashed):
            raise RuntimeError(f"generation failed: {event}")


def measure(model: str, n_gpu_layers: int, prompt_tokens: int = PROMPT_TOKENS) -> dict:
    with local_helper() as helper:
        relay = CountingRelay(helper.port)
        events = EventQueue()
        client = EngineClient(events)
        client.start()
        try:
            events.wait_for(p.Ready, timeout=TIMEOUT_S)
            client.load(
                p.ModelParams(
                    path=model, n_ctx=4096, n_gpu_layers=n_gpu_layers,
                    rpc_servers=(relay.address,),
                )
            )  # fmt: skip
            loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=TIMEOUT_S)
            if not isinstance(loaded, p.ModelLoaded):
                raise RuntimeError(f"load failed: {loaded}")
            rng = random.Random(n_gpu_layers)
            prompts = [
                tuple(rng.randrange(100, 1000) for _ in range(prompt_tokens)) for _ in range(2)
            ]
            rows = []
            for prompt, n in zip(prompts, (SHORT, LONG), strict=True):
                before = relay.snapshot()
                began = time.perf_counter()
                done = generate(client, events, prompt, n)
                after = relay.snapshot()
                rows.append(
                    {
                        "tokens": done.stats.n_generated,
                        "seconds": time.perf_counter() - began,
                        "sent": after["sent"] - before["sent"],
                        "received": after["received"] - before["received"],
                        "answered": after["answered"] - before["answered"],
                        "commands": {
                            k: v - before["commands"].get(k, 0)
                            for k, v in after["commands"].items()
                            if v - before["commands"].get(k, 0)
                        },
                    }
                )
        finally:
            client.close()
            relay.close()
    short, long = rows
    steps = long["tokens"] - short["tokens"]
    return {
        "n_gpu_layers": n_gpu_layers,
        "prompt_tokens": prompt_tokens,
        "repeating_layers_on_helper": n_gpu_layers - 1,
        "decode_tokens": steps,
        "sent_per_token": (long["sent"] - short["sent"]) / steps,
        "received_per_token": (long["received"] - short["received"]) / steps,
        "answered_per_token": (long["answered"] - short["answered"]) / steps,
        "commands_per_token": {
            k: (v - short["commands"].get(k, 0)) / steps for k, v in long["commands"].items()
        },
        "runs": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a GGUF (default: the starter model)")
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument(
        "--prompt-tokens", type=int, nargs="+", default=[PROMPT_TOKENS],
        help="prompt lengths: how deep in the context the counted tokens are",
    )  # fmt: skip
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    model = args.model or str(starter_model_path())
    info = read_model_info(model)
    results = {
        "model": Path(model).name,
        "n_embd": info.embedding_length,
        "n_vocab": info.vocab_size,
        "machine": f"{platform.node()} {platform.machine()} (CPU, loopback)",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rows": [],
    }
    for layers, depth in [(n, d) for n in args.layers for d in args.prompt_tokens]:
        row = measure(model, layers, depth)
        results["rows"].append(row)
        print(
            f"n_gpu_layers {layers:3d}, after {depth:4d} tokens: "
            f"{row['sent_per_token']:9.0f} B sent, "
            f"{row['received_per_token']:7.0f} B received, "
            f"{row['answered_per_token']:.2f} answered requests per token  "
            f"{ {k: round(v, 2) for k, v in row['commands_per_token'].items()} }",
            flush=True,
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
