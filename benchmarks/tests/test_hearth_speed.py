"""benchmarks/hearth_speed.py's report and hearth_speed_files.py's random-block GGUF, on the
CPU (the measuring itself needs a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")

from benchmarks import hearth_speed
from benchmarks.hearth_speed_files import write_random_quantized

RESULT = {
    "gpu": "NVIDIA H100 80GB HBM3",
    "copy_GBps": 3000.0,
    "cuda_init_s": 0.3,
    "cuda_context_MiB": 621.0,
    "load_s": 0.9,
    "weights_GiB": 4.33,
    "pp512_tok_s": 12000.0,
    "ttft_512_ms": 45.0,
    "tokens": 128,
    "tg": {
        "paged-f16": {
            "tok_s": 300.0,
            "sequential_tok_s": 290.0,
            "kv_slots": 256,
            "bound_fraction": 0.5,
            "replay_ms": 3.2,
            "eager_tok_s": 30.0,
            "graph_pool_MiB": 6.0,
            "device_embedding_MiB": 282.0,
        }
    },
    "depth_rot4": {
        "kv": "rot4",
        "depth": 32768,
        "tok_s": 210.0,
        "graph": True,
        "bound_fraction": 0.4,
        "eager_tok_s": 25.0,
        "kv_cache_GiB": 1.25,
    },
    "llama_bench": {
        "pp512_tok_s": 9600.0,
        "tg128_tok_s": 250.0,
        "tg32_at_32768_f16_tok_s": 168.0,
        "load_s": 1.0,
        "ttft_512_ms": 60.0,
    },
}


def test_the_report_sets_each_figure_beside_llama_cpp_s():
    text = hearth_speed.report(RESULT)
    assert "pp512 12000.0 tok/s   llama.cpp 9600.00  ->  our speed 1.25x theirs" in text
    assert "llama.cpp 250.00  ->  our speed 1.20x theirs; bandwidth-bound fraction 50%" in text
    # times: lower is better, and the ratio says ours over theirs
    assert "ttft (512-token prompt) 45.0 ms   llama.cpp 60.00  ->  our time 0.75x theirs" in text
    assert "llama.cpp 1.00  ->  our time 1.20x theirs" in text  # load: 0.9 s + 0.3 s context
    assert "depth 32768 KV rot4: 210.0 tok/s" in text and "our speed 1.25x theirs" in text


def test_a_part_that_failed_is_said_and_the_rest_still_reported():
    result = {k: v for k, v in RESULT.items() if k != "tg"}
    result["tg_paged-f16_error"] = "OutOfMemoryError: CUDA out of memory"
    text = hearth_speed.report(result)
    assert text.startswith("tg_paged-f16_error: OutOfMemoryError")
    assert "pp512 12000.0 tok/s" in text


def _load_and_run_three_tokens(path):
    """The file on the Hearth engine's torch path: (the model, its info), after checking that
    three tokens give finite, varied logits."""
    import torch

    from engine.gguf import read_model_info
    from engine.hearth.config import model_config
    from engine.hearth.forward import Transformer
    from engine.hearth.kv_cache import TorchKVCache
    from engine.hearth.ops import TorchOps
    from engine.hearth.weights import GGUFTensors

    info = read_model_info(path)
    config = model_config(info)
    model = Transformer.load(config, GGUFTensors(str(path), info), TorchOps("cpu"))
    cache = TorchKVCache(
        n_layer=config.n_layer, n_head_kv=config.n_head_kv, head_dim=config.head_dim, n_ctx=8
    )
    logits = model.forward(torch.tensor([1, 2, 3]), torch.arange(3), cache, n_keys=3)
    assert np.isfinite(logits.numpy()).all() and logits.std() > 0
    return model, info


def test_the_random_file_loads_and_runs_finite(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_random_quantized(str(path), "llama-tiny")
    _, info = _load_and_run_three_tokens(path)
    assert {t.type_name for t in info.tensors} >= {"Q4_K", "Q6_K"}  # Q4_K_M's mix


@pytest.mark.parametrize(
    ("shape", "quant", "expert_type"),
    [("qwen3-30b-a3b", "Q4_K_M", "Q4_K"), ("gpt-oss-20b", "MXFP4_MOE", "MXFP4")],
)
def test_a_random_moe_file_runs_finite_and_its_bound_reads_k_experts(
    tmp_path, monkeypatch, shape, quant, expert_type
):
    """The MoE shapes, made small (2 layers, 8 experts of 256, 2 used): the random blocks
    (MXFP4's exponents made small) give finite logits, and the bandwidth bound counts the 2
    experts a token reads of each layer, not all 8."""
    from dataclasses import replace

    from testkit.synthetic_gguf import SHAPES

    small = replace(
        SHAPES[shape], n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, head_dim=64,
        n_vocab=512, n_expert=8, n_expert_used=2, n_ff_exp=256,
    )  # fmt: skip
    monkeypatch.setitem(SHAPES, "moe-small", small)
    path = tmp_path / "moe.gguf"
    write_random_quantized(str(path), "moe-small", quant)
    model, info = _load_and_run_three_tokens(path)
    assert info.tensor("blk.0.ffn_gate_exps.weight").type_name == expert_type
    dense = (
        sum(w.source.nbytes for layer in model.layers for w in layer.matrices())
        + model.output.source.nbytes
    )
    experts = sum(
        info.tensor(f"blk.{i}.ffn_{k}_exps.{part}").n_bytes
        for i in range(2)
        for k in ("gate", "up", "down")
        for part in ("weight", "bias")
        if info.tensor(f"blk.{i}.ffn_{k}_exps.{part}") is not None
    )
    assert hearth_speed.weight_bytes(model) == dense + experts * 2 // 8
