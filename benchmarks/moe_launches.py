"""What one decode step of a mixture-of-experts model launches, layer by layer, on KernelsOps.

    TRITON_INTERPRET=1 python -m benchmarks.moe_launches [--model qwen3moe,gpt-oss,llama] [--json P]
    python -m benchmarks.moe_launches --device cuda        (the same count on a GPU)

A decode step runs as one CUDA graph (engine/hearth/decode_graph.py), so a launch costs no host
time there, but each kernel node still costs the GPU a gap of a few microseconds: at ~25
launches a layer that is a large part of a Qwen3-30B-A3B layer's ~65 us. This counts them
without a GPU: a small file of the real model's tensor types (Q4_K_M's Q4_K / Q6_K for the
qwen3moe shape, MXFP4 experts and Q8_0 for gpt-oss), written with random blocks by
benchmarks/hearth_speed_files.py, loaded on KernelsOps (f16 activations, as on a GPU) with
kernels' paged f16 KV cache, one step warmed up, then one step recorded:

- Triton kernels: every launch (the interpreter's and the compiled launcher's `run`), by name;
- torch ops: every aten op dispatched outside the Triton launches that launches a kernel on a
  GPU (views and allocations, which launch nothing, are left out), with the engine or kernels
  function that called it; `_local_scalar_dense` (a value read back to the host) is flagged,
  since a CUDA graph cannot hold one.

Layer i is everything from its attention's start to the next layer's: its attention, the
feed-forward norm (with the residual add), the routed experts, and the next layer's input
norm (the last layer's: the output norm and the logits).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

if "--device" not in sys.argv or "cpu" in sys.argv:  # Triton reads it at its first import
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.hearth_speed_files import write_random_quantized
from testkit.synthetic_gguf import SHAPES

# The real shapes' architectures and tensor types, small enough for the interpreter: k-quant
# rows whole 256-blocks, power-of-two heads; two layers, so that Q4_K_M gives one layer V and
# ffn_down in Q4_K (layer 0) and one in Q6_K (layer 1), as its 48 layers alternate.
MODELS = {
    "qwen3moe": (
        dataclasses.replace(
            SHAPES["qwen3-30b-a3b"], n_layer=2, n_embd=256, n_head=4, n_head_kv=2, head_dim=64,
            n_vocab=512, n_expert=4, n_expert_used=2, n_ff_exp=256,
        ),
        "Q4_K_M",
    ),
    "gpt-oss": (
        dataclasses.replace(
            SHAPES["gpt-oss-20b"], n_layer=2, n_embd=256, n_ff=256, n_head=4, n_head_kv=2,
            head_dim=64, n_vocab=512, n_expert=4, n_expert_used=2, n_ff_exp=256,
        ),
        "MXFP4_MOE",
    ),
    # dense: the 8B's Q4_K_M tensor types (the launches between its weight reads are the
    # ones a Llama-3-8B step has)
    "llama": (
        dataclasses.replace(
            SHAPES["llama3-8b"], n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2,
            head_dim=64, n_vocab=512,
        ),
        "Q4_K_M",
    ),
}  # fmt: skip

ROOT = Path(__file__).resolve().parents[1]
# ops that launch nothing on a GPU: allocations (a graph's pool) and aliasing
_NO_KERNEL = {
    "empty", "empty_strided", "empty_like", "new_empty", "lift_fresh", "detach", "detach_",
    "alias",
}  # fmt: skip


def _caller() -> str:
    """The innermost engine/ or kernels/ function on the stack (module.function)."""
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(ROOT) and path.parts[len(ROOT.parts)] in ("engine", "kernels"):
            return f"{path.stem}.{frame.f_code.co_name}"
        frame = frame.f_back
    return "?"


def _launches_a_kernel(func) -> bool:
    name = func.overloadpacket.__name__
    if name in _NO_KERNEL:
        return False
    returns = func._schema.returns
    aliased = returns and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns
    )
    return not aliased


class Recorder(TorchDispatchMode):
    """Events in order: ("layer", i), ("triton", kernel name, caller), ("torch", op, caller)."""

    def __init__(self):
        super().__init__()
        self.events: list[tuple] = []
        self.on = False
        self._in_triton = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.on and not self._in_triton and _launches_a_kernel(func):
            self.events.append(("torch", func.overloadpacket.__name__, _caller()))
        return func(*args, **(kwargs or {}))

    def wrap_launcher(self, cls) -> None:
        run = cls.run
        recorder = self

        def recorded(fn_self, *args, **kwargs):
            if recorder.on and not recorder._in_triton:
                name = getattr(fn_self, "__name__", None) or fn_self.fn.__name__
                recorder.events.append(("triton", name, _caller()))
            recorder._in_triton += 1
            try:
                return run(fn_self, *args, **kwargs)
            finally:
                recorder._in_triton -= 1

        cls.run = recorded


def _patch_launchers(recorder: Recorder) -> None:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    recorder.wrap_launcher(InterpretedFunction)
    recorder.wrap_launcher(JITFunction)


def _marked_layers(model, recorder: Recorder) -> None:
    attention = model._attention

    def marked(layer, i, *args):
        if recorder.on:
            recorder.events.append(("layer", i))
        return attention(layer, i, *args)

    model._attention = marked


def count_step(name: str, device: str, workdir: Path) -> dict:
    """One recorded decode step of MODELS[name]: {"head": [...], "layers": [[...], ...]}."""
    from engine.gguf import read_model_info
    from engine.hearth.config import model_config
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import KernelsOps
    from engine.hearth.paged_cache import PagedCacheAdapter
    from engine.hearth.weights import GGUFTensors

    shape, quant = MODELS[name]
    path = workdir / f"{name}.gguf"
    write_random_quantized(str(path), shape, quant)
    info = read_model_info(path)
    config = model_config(info)
    ops = KernelsOps(device)
    ops.activation_dtype = torch.float16  # as on a GPU: f16 between the matrices
    model = Transformer.load(config, GGUFTensors(str(path), info), ops)
    n_ctx = 64
    cache = PagedCacheAdapter(n_layer=config.n_layer, n_head_kv=config.n_head_kv,
                              head_dim=config.head_dim, n_ctx=n_ctx, device=device,
                              k_format="f16", v_format="f16")  # fmt: skip
    recorder = Recorder()
    _patch_launchers(recorder)
    _marked_layers(model, recorder)
    table = model.device_embedding()
    with torch.inference_mode(), recorder:
        for position, token in enumerate((1, 2)):  # the first compiles and fills caches
            recorder.on = position == 1
            tokens = torch.tensor([token], device=device)
            positions = torch.tensor([position], device=device)
            recorder.on and recorder.events.append(("embed",))
            h = model.embed_on_device(table, tokens)
            model.forward_embedded(h, positions, cache, n_keys=n_ctx)
            recorder.on = False
    head, layers, current = [], [], None
    for event in recorder.events:
        if event[0] == "layer":
            current = []
            layers.append(current)
        elif event[0] != "embed":
            (head if current is None else current).append(list(event))
    return {"model": name, "quant": quant, "shape": dataclasses.asdict(shape), "head": head,
            "layers": layers}  # fmt: skip


def summary(events: list[list]) -> str:
    triton = sum(e[0] == "triton" for e in events)
    syncs = sum(e[1] == "_local_scalar_dense" for e in events)
    return f"{len(events)} launches ({triton} Triton, {len(events) - triton} torch)" + (
        f", {syncs} host reads" if syncs else ""
    )


def show(step: dict) -> None:
    print(f"\n{step['model']} ({step['quant']}): before layer 0: {summary(step['head'])}")
    for i, events in enumerate(step["layers"]):
        print(f"  layer {i}: {summary(events)}")
        for (kind, op, caller), n in Counter(tuple(e) for e in events).items():
            times = f" x{n}" if n > 1 else ""
            print(f"    {kind:6} {op:42} {caller}{times}")
        # the order, which shows what runs between what
        print("    order: " + " > ".join(e[1].lstrip("_").removesuffix("_kernel") for e in events))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.moe_launches")
    parser.add_argument(
        "--model", default="qwen3moe,gpt-oss", help="qwen3moe, gpt-oss, llama (dense)"
    )
    parser.add_argument("--device", default="cpu", help="cpu (Triton's interpreter) or cuda")
    parser.add_argument("--json", help="write every step's events here")
    args = parser.parse_args(argv)
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        print("the CPU needs TRITON_INTERPRET=1 (set before triton is imported)", file=sys.stderr)
        return 2
    steps = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.model.split(","):
            if name not in MODELS:
                print(f"unknown model {name!r}: use {', '.join(MODELS)}", file=sys.stderr)
                return 2
            steps.append(count_step(name, args.device, Path(tmp)))
            show(steps[-1])
    if args.json:
        Path(args.json).write_text(json.dumps(steps, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
