# Archived: a one-off measurement; its figures are in
# docs/measurements/2026-11-29-engine-threads.txt and docs/decisions/2026-11-29-engine-threads.md.
"""The starter model's decode and prefill through the engine worker on T llama.cpp threads,
alone and beside B busy processes (each a Python loop on one core, as another program or the
other pytest-xdist worker is), on the CPU.

    python benchmarks/archive/2026-11-29-engine-threads.py [--threads 2 1] [--busy 0 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EventQueue
from engine.starter_model import starter_model_path

STORY = "Tell me a long story about a lighthouse keeper."
LONG = " ".join(
    f"The keeper lit lamp number {i} as the storm rose over the rocks." for i in range(120)
)


def one(threads: int, busy: int, decode_tokens: int) -> str:
    events = EventQueue()
    client = EngineClient(events)
    client.start()
    events.wait_for(p.Ready, timeout=60)
    params = p.ModelParams(
        path=str(starter_model_path()), n_ctx=4096, n_gpu_layers=0, n_threads=threads
    )
    client.load(params)
    loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=60)
    assert isinstance(loaded, p.ModelLoaded), loaded
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.5)
        client.generate(
            messages=(p.ChatMessage(role="user", content=STORY),),
            max_tokens=decode_tokens,
            sampling=p.SamplingParams(temperature=0.7),
            ignore_eos=True,
        )
        decode = events.wait_for(p.GenerationDone, p.GenerationFailed, timeout=900).stats
        client.generate(messages=(p.ChatMessage(role="user", content=LONG),), max_tokens=1)
        prefill = events.wait_for(p.GenerationDone, p.GenerationFailed, timeout=900).stats
    finally:
        for hog in hogs:
            hog.kill()
        client.close()
    return (
        f"threads={threads} busy={busy}: decode {decode.n_generated} tokens "
        f"{decode.decode_tokens_per_second:.1f} tok/s; prefill {prefill.n_prompt_tokens} tokens "
        f"{prefill.prefill_tokens_per_second:.0f} tok/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--decode-tokens", type=int, default=200)
    args = parser.parse_args()
    for busy in args.busy:
        for threads in args.threads:
            print(one(threads, busy, args.decode_tokens), flush=True)


if __name__ == "__main__":
    main()
