"""The Hearth engine loaded and driven the way the worker does, for benchmarks/hearth_memory.py:
the weights placed as the driver places them, the cache the driver makes, the cache filled
through the forward pass's write call, a prefill chunk, and decode steps in the CUDA graph
where the driver captures one.
"""

from __future__ import annotations

import time

from engine.gguf import read_model_info
from engine.planner.hearth_plan import ON_GPU


class Engine:
    def __init__(self, path: str, device: str = "cuda", experts: tuple[int, ...] = ON_GPU):
        """`experts`: (layers whose experts stay in RAM, cache slots per such layer[, picks
        the CPU computes]), the placement handed to Transformer.load as the driver does
        (hearth_load.py load_transformer)."""
        import torch

        from engine.hearth.config import model_config
        from engine.hearth.expert_offload import ExpertPlacement
        from engine.hearth.forward import Transformer
        from engine.hearth.ops import select_ops
        from engine.hearth.weights import GGUFTensors

        self.torch = torch
        self.device = device
        self.info = read_model_info(path)
        self.config = model_config(self.info)
        self.tensors = GGUFTensors(path, self.info)
        self.ops = select_ops(device)
        ram, slots, *picks = experts
        k = self.config.moe.n_expert_used if self.config.moe is not None else 0
        cpu = picks[0] if picks else 0
        if cpu not in (0, k):
            raise ValueError(f"{cpu} of {k} picks on the CPU: all ({k}) or none (0)")
        placement = ExpertPlacement(ram, slots, on_cpu=cpu > 0)
        if self.config.moe is not None:
            placement.check(self.config.moe.n_expert, self.config.moe.n_expert_used)
        self.transformer = Transformer.load(self.config, self.tensors, self.ops, experts=placement)
        self.sync()

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def new_cache(self, n_ctx: int, type_k: str, type_v: str):
        """The cache the driver builds for these types on this device (cache_layout.py)."""
        from engine.hearth.cache_layout import engine_cache_layout
        from engine.hearth.caches import new_kv_cache

        cfg = self.config
        layout = engine_cache_layout(type_k, type_v, ops_name=self.ops.name, device=self.device)
        return new_kv_cache(layout, n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv,
                            head_dim=cfg.head_dim, n_ctx=n_ctx, device=self.device)  # fmt: skip

    def fill(self, cache, n: int) -> None:
        """Random K and V rows at positions 0..n-1, through the write call the forward pass
        makes (chunk by chunk, every layer: the order a prefill writes in)."""
        torch, cfg = self.torch, self.config
        gen = torch.Generator(device=self.device).manual_seed(0)
        step = 4096
        with torch.inference_mode():
            for start in range(0, n, step):
                rows = min(step, n - start)
                positions = torch.arange(start, start + rows, device=self.device)
                shape = (rows, cfg.n_head_kv, cfg.head_dim)
                for layer in range(cfg.n_layer):
                    k = torch.randn(shape, generator=gen, device=self.device, dtype=torch.float16)
                    v = torch.randn(shape, generator=gen, device=self.device, dtype=torch.float16)
                    cache.write(layer, positions, k, v)
        self.sync()

    def decode(self, cache, start: int, steps: int, graph=None) -> float:
        """`steps` decode steps from position `start`, over the whole cache, as the worker
        decodes on a GPU: the step captured in a CUDA graph where the engine has one
        (engine/hearth/decode_graph.py; `graph`, or captured here), else one forward pass per
        token. Tokens per second."""
        torch = self.torch
        graph = graph if graph is not None else decode_graph(self, cache, start)
        token = torch.tensor([1], device=self.device)
        began = time.perf_counter()
        with torch.inference_mode():
            for i in range(steps):
                if graph is not None:
                    _, greedy = graph.step(int(token), start + i, launch_ahead=False)
                    token = torch.tensor([greedy], device=self.device)
                    continue
                position = torch.tensor([start + i], device=self.device)
                logits = self.transformer.forward(token, position, cache, n_keys=cache.n_ctx)
                token = logits.argmax().view(1)
        self.sync()
        return steps / (time.perf_counter() - began)

    def can_prefill(self, cache) -> bool:
        """Whether a prefill chunk over this cache runs on the device (the paged cache's
        prefill attention read its pages back through numpy before kernels' attend_prefill)."""
        inner = getattr(cache, "cache", None)
        return inner is None or hasattr(inner, "attend_prefill")

    def prefill_graphs(self, cache, rows: int):
        """The prefill graphs the driver keeps for this cache (None where it keeps none), with
        their pool made as a session's first prompt makes it: a chunk of `rows` at position 0
        run twice, eagerly and then captured (a chunk shape is captured the second time it
        runs). A later chunk deeper than the graphs' key bound runs eagerly beside that pool,
        which is the peak the memory model predicts (prefill_graph_pool + prefill_workspace)."""
        from engine.hearth.prefill_graph import PrefillGraphs

        if not self.device.startswith("cuda") or not PrefillGraphs.can_capture(
            self.transformer, cache
        ):
            return None
        graphs = PrefillGraphs(self.transformer, cache, max_rows=rows)
        ids = self.torch.ones(rows, dtype=self.torch.long, device=self.device)
        with self.torch.inference_mode():
            for _ in range(2):
                graphs.forward(ids, 0)
        self.sync()
        return graphs

    def prefill_chunk(self, cache, start: int, rows: int) -> None:
        torch = self.torch
        with torch.inference_mode():
            positions = torch.arange(start, start + rows, device=self.device)
            ids = torch.ones(rows, dtype=torch.long, device=self.device)
            self.transformer.forward(ids, positions, cache, n_keys=start + rows)
        self.sync()


def decode_graph(engine: Engine, cache, position: int):
    """The decode step captured where the driver captures it: on a GPU, unless a step reads
    its routing back to the host (experts in RAM behind a cache: Transformer.routes_on_host),
    which the driver then runs eagerly."""
    if not engine.device.startswith("cuda") or engine.transformer.routes_on_host:
        return None
    try:
        from engine.hearth.decode_graph import DecodeGraph, can_capture
    except ImportError:  # an engine without CUDA graphs yet
        return None
    return DecodeGraph(engine.transformer, cache, position=position) if can_capture(cache) else None
