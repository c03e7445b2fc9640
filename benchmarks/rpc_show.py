"""Decode speed with half the model on a "remote" GPU (llama.cpp's RPC backend over loopback),
against the same split all local, with the planner's predicted speed beside each and
llama.cpp's own llama-bench figures from the same run.

On one GPU machine: a `hearth host` serves the GPU on 127.0.0.1; the Hearth engine worker runs
with the GPU hidden (CUDA_VISIBLE_DEVICES=""), so its only way to the GPU is the RPC link; the
first half of the layers stays on the local CPU, the second half (and the output layer) on the
GPU. Runs (each 128 decoded tokens after a 64-token prompt, greedy):

    local-split   the same split with the GPU local (no network)
    rpc-split     the GPU behind the RPC link
    local-gpu     everything on the local GPU (for scale)

    python3 benchmarks/rpc_show.py MODEL.gguf [--out DIR] [--llama-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.gguf import read_model_info
from engine.hardware import detect
from engine.hardware.remote import probe_remote
from engine.planner import build_profile, request_for_devices
from engine.planner.memory import Config, layer_counts
from engine.planner.remote import with_helpers
from engine.planner.search import Search
from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EventQueue
from testkit.rpc_helpers import local_helper

N_CTX = 4096
PROMPT_TOKENS = 64
DECODE_TOKENS = 128
TIMEOUT_S = 600


def decode_speed(params: p.ModelParams, env: dict[str, str]) -> dict:
    events = EventQueue()
    client = EngineClient(events, env=env)
    client.start()
    try:
        events.wait_for(p.Ready, timeout=TIMEOUT_S)
        began = time.perf_counter()
        client.load(params)
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=TIMEOUT_S)
        if not isinstance(loaded, p.ModelLoaded):
            raise RuntimeError(f"load failed: {loaded}")
        load_s = time.perf_counter() - began
        rng = random.Random(0)
        prompt = tuple(rng.randrange(1000, 20000) for _ in range(PROMPT_TOKENS))
        speeds = []
        for _ in range(2):  # the first warms up
            client.generate(
                prompt_tokens=prompt,
                sampling=p.SamplingParams(temperature=0.0),
                max_tokens=DECODE_TOKENS,
                ignore_eos=True,
            )
            done = events.wait_for(p.GenerationDone, p.GenerationFailed, timeout=TIMEOUT_S)
            if not isinstance(done, p.GenerationDone):
                raise RuntimeError(f"generation failed: {done}")
            speeds.append(done.stats.decode_tokens_per_second)
            prompt = prompt[1:] + prompt[:1]  # another prompt: no cache reuse
        return {
            "decode_tokens_per_second": speeds[-1],
            "load_seconds": load_s,
            "buffers": [f"{a.device} {a.kind} {a.bytes}" for a in loaded.allocations],
        }
    finally:
        client.close()


def predicted(profile, request, n_gpu_layers: int) -> float:
    search = Search(request)
    counts = layer_counts(n_gpu_layers, len(search.gpus)) if search.gpus else ()
    config = Config(
        n_ctx=N_CTX, n_gpu_layers=n_gpu_layers, gpu_layer_counts=counts, n_outputs_max=1
    )
    return search.speed(profile, config)


def llama_bench(model: str, n_gpu_layers: int, rpc: str | None, env: dict[str, str]) -> str:
    if shutil.which("llama-bench") is None:
        return "llama-bench not on PATH"
    command = ["llama-bench", "-m", model, "-ngl", str(n_gpu_layers), "-fa", "1"]
    command += ["-p", "0", "-n", str(DECODE_TOKENS), "-r", "2", "-o", "md"]
    if rpc:
        command += ["--rpc", rpc]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    return run.stdout.strip() or run.stderr.strip()[-2000:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--llama-bench", action="store_true", help="llama.cpp's own figures too")
    parser.add_argument(
        "--device", default="CUDA0", help="the device the helper serves (CPU: a dry run)"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    profile = build_profile(read_model_info(args.model))
    half = profile.n_layer // 2 + 1  # the output layer and the last half of the layers
    everything = profile.n_layer + 1
    local_env = dict(os.environ)
    no_gpu_env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    machine = detect()
    local_request = request_for_devices(list(machine.devices), target_ctx=N_CTX)
    cpu_only = replace(local_request, gpus=())
    results: dict = {"model": Path(args.model).name, "n_gpu_layers_split": half, "runs": {}}
    with local_helper(threads=4, devices=(args.device,), cache=False) as helper:
        host = probe_remote(helper.address)
        results["helper"] = host.to_dict()
        remote_request = with_helpers(cpu_only, [host])
        runs = {
            "local-split": (
                p.ModelParams(path=args.model, n_ctx=N_CTX, n_gpu_layers=half),
                local_env,
                local_request,
            ),
            "rpc-split": (
                p.ModelParams(
                    path=args.model,
                    n_ctx=N_CTX,
                    n_gpu_layers=half,
                    rpc_servers=(helper.address,),
                ),
                no_gpu_env,
                remote_request,
            ),
            "local-gpu": (
                p.ModelParams(path=args.model, n_ctx=N_CTX, n_gpu_layers=everything),
                local_env,
                local_request,
            ),
        }
        for name, (params, env, request) in runs.items():
            measured = decode_speed(params, env)
            measured["predicted_tokens_per_second"] = predicted(
                profile, request, params.n_gpu_layers
            )
            results["runs"][name] = measured
            print(
                f"{name:12s} measured {measured['decode_tokens_per_second']:7.1f} tok/s   "
                f"planner {measured['predicted_tokens_per_second']:7.1f} tok/s   "
                f"(load {measured['load_seconds']:.1f} s)",
                flush=True,
            )
        if args.llama_bench:
            results["llama_bench"] = {
                "local-split": llama_bench(args.model, half, None, local_env),
                "rpc-split": llama_bench(args.model, half, helper.address, no_gpu_env),
            }
            for name, text in results["llama_bench"].items():
                print(f"\nllama-bench {name}:\n{text}", flush=True)
    (args.out / "rpc-show.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
