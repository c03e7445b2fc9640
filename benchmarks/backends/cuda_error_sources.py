"""Where the CUDA build's logits leave exact arithmetic on the starter model: one variant per
kernel choice, each measured against the CPU build's recorded reference and against exact f32
arithmetic (docs/backends.md, "The CUDA check").

Runs on the GPU machine with the CUDA build (benchmarks/gpu_run.sh cuda-sources):

    python3 benchmarks/backends/cuda_error_sources.py MODEL --out DIR [--quantized OTHER.gguf]

MODEL is the starter model's GGUF; the reference is tests/engine/runtime/data/cpu_reference.json
(recorded with the CPU build on the CI machine). "Exact" is this build with the GPU hidden
running an F32 copy of the model (every tensor dequantized: the same weights, and no kernel
quantizes activations) with an F32 KV cache and flash attention off (nothing rounds to f16).
Every variant is teacher-forced on the reference's tokens; a variant changes one thing from the
engine's defaults (all layers on the GPU, flash attention on, f16 KV cache): flash attention, the
KV type, the prompt's batch path, ggml-cuda's fusion and graphs, cuBLAS's compute type, where the
output matrix runs, or the weights (F32). `--quantized` runs the variants on another quantization
of the same model (e.g. a Q4_K_M made from MODEL's F32 copy) instead of MODEL, fed the same
tokens and measured against exact arithmetic on its own weights; the rules' columns, which need
the CPU build's trace of that file, are then left empty.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from distance_from_exact import distances, write_f32_copy

from engine.runtime import greedy_check

REFERENCE = Path(__file__).resolve().parents[2] / "tests/engine/runtime/data/cpu_reference.json"
HIDE_GPU = {"CUDA_VISIBLE_DEVICES": ""}


@dataclass(frozen=True)
class Variant:
    name: str
    weights: str = "quantized"  # or "f32": the F32 copy
    n_gpu_layers: int = -1
    flash_attn: str = "on"
    kv: str = "f16"
    env: dict[str, str] = field(default_factory=dict)
    by_token: bool = False


# F32 weights, an F32 KV cache and attention without flash attention (whose CPU kernel keeps
# V and its sums in f16), on the CPU: nothing rounds below f32.
EXACT = Variant("exact", weights="f32", n_gpu_layers=0, flash_attn="off", kv="f32", env=HIDE_GPU)


def variants(n_layer: int) -> list[Variant]:
    return [
        Variant("defaults: all on CUDA, FA on, KV f16"),
        Variant("flash attention off", flash_attn="off"),
        Variant("KV f32, FA off", flash_attn="off", kv="f32"),
        Variant("KV q8_0", kv="q8_0"),
        Variant("KV q4_0", kv="q4_0"),
        Variant("prompt one token at a time", by_token=True),
        Variant("fusion off", env={"GGML_CUDA_DISABLE_FUSION": "1"}),
        Variant("CUDA graphs off", env={"GGML_CUDA_DISABLE_GRAPHS": "1"}),
        Variant("cuBLAS compute f32", env={"GGML_CUDA_CUBLAS_COMPUTE_TYPE": "f32"}),
        Variant(f"output matrix on the CPU (ngl {n_layer})", n_gpu_layers=n_layer),
        Variant(f"first half on the CPU (ngl {n_layer // 2})", n_gpu_layers=n_layer // 2),
        Variant("F32 weights, FA on", weights="f32"),
        Variant("F32 weights, FA off, KV f32", weights="f32", flash_attn="off", kv="f32"),
        Variant("GPU hidden (this machine's CPU)", n_gpu_layers=0, env=HIDE_GPU),
    ]


def kl_divergence(exact: np.ndarray, other: np.ndarray) -> np.ndarray:
    """KL(exact || other) per position, over the whole vocabulary, in nats."""

    def log_softmax(x: np.ndarray) -> np.ndarray:
        shifted = x - x.max(axis=1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

    p, q = log_softmax(exact.astype(np.float64)), log_softmax(other.astype(np.float64))
    return (np.exp(p) * (p - q)).sum(axis=1)


def rule_problems(reference: dict, forced: dict) -> tuple[list[int], list[int], float]:
    """greedy_check's rules 1 and 2 (rule 3 needs the engine's text): positions whose argmax
    differs from the CPU's, those that are not near-ties, and the largest logit difference."""
    steps = zip(reference["steps"], forced["steps"], strict=True)
    differs, not_ties, worst = [], [], 0.0
    for i, (ref, dev) in enumerate(steps):
        pairs = zip(dev["watched_logits"], ref["top_logits"], strict=True)
        worst = max(worst, max(abs(a - b) for a, b in pairs))
        if dev["argmax"] != ref["argmax"]:
            differs.append(i)
            ids = ref["top_ids"]
            tied = dev["argmax"] in ids and (
                ref["top_logits"][0] - ref["top_logits"][ids.index(dev["argmax"])]
                <= greedy_check.NEAR_TIE
            )
            if not tied:
                not_ties.append(i)
    return differs, not_ties, worst


def differing(a: list[int], b: list[int]) -> list[int]:
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def n_layers(model: Path) -> int:
    import gguf

    reader = gguf.GGUFReader(model)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    return int(reader.fields[f"{arch}.block_count"].contents())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quantized", type=Path, help="run the variants on this file instead")
    parser.add_argument("--name", default="cuda-error-sources", help="of the JSON written")
    args = parser.parse_args()
    reference = json.loads(args.reference.read_text())
    digest = hashlib.sha256(args.model.read_bytes()).hexdigest()
    if digest != reference["model_sha256"]:
        raise SystemExit(f"{args.model} is not the model the reference was recorded from")
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/hearth-cuda-sources")
    work.mkdir(exist_ok=True)
    tested = args.quantized or args.model
    f32 = work / f"{tested.stem}-f32.gguf"  # exact arithmetic on the weights of the file tested
    if not f32.exists():
        write_f32_copy(tested, f32)

    def run(variant: Variant, name: str) -> tuple[dict, np.ndarray]:
        logits_file = work / f"{name}.npy"
        extra = ["--kv", variant.kv, "--save-logits", str(logits_file)]
        if variant.by_token:
            extra.append("--prompt-by-token")
        forced = greedy_check.run_trace(
            sys.executable,
            str(f32 if variant.weights == "f32" else tested),
            n_gpu_layers=variant.n_gpu_layers,
            reference=reference,
            env=variant.env,
            flash_attn=variant.flash_attn,
            extra_args=tuple(extra),
        )
        return forced, np.load(logits_file)

    exact_trace, exact_all = run(EXACT, "exact")
    exact = np.array([step["watched_logits"] for step in exact_trace["steps"]])
    exact_argmax = [step["argmax"] for step in exact_trace["steps"]]
    rows = []
    same_file = args.quantized is None  # the recorded reference is a trace of this file
    if same_file:
        cpu = np.array([step["top_logits"] for step in reference["steps"]])
        cpu_diff, cpu_gap = distances(cpu, exact)
        cpu_argmax = [step["argmax"] for step in reference["steps"]]
        rows.append(
            {
                "variant": "CPU build (recorded reference)",
                "vs_exact_max": cpu_diff,
                "vs_exact_gap": cpu_gap,
                "argmax_vs_exact": differing(cpu_argmax, exact_argmax),
            }
        )
    for number, variant in enumerate(variants(n_layers(args.model))):
        try:
            forced, every = run(variant, f"variant{number}")
        except RuntimeError as exc:
            rows.append({"variant": variant.name, "error": str(exc).splitlines()[0]})
            continue
        watched = np.array([step["watched_logits"] for step in forced["steps"]])
        diff, gap = distances(watched, exact)
        argmax = [step["argmax"] for step in forced["steps"]]
        kl = kl_divergence(exact_all, every)
        devices = sorted({a["device"] for a in forced["allocations"] if a["kind"] == "model"})
        row = {"variant": variant.name, "devices": devices}
        if same_file:
            differs, not_ties, worst = rule_problems(reference, forced)
            row |= {
                "vs_cpu_max": worst,
                "argmax_vs_cpu": differs,
                "not_near_ties": not_ties,
                "passes_rules_1_2": not not_ties and worst <= greedy_check.LOGIT_TOLERANCE,
            }
        rows.append(
            row
            | {
                "vs_exact_max": diff,
                "vs_exact_gap": gap,
                "argmax_vs_exact": differing(argmax, exact_argmax),
                "kl_mean": float(kl.mean()),
                "kl_max": float(kl.max()),
            }
        )
    (args.out / f"{args.name}.json").write_text(json.dumps(rows, indent=1))
    print(f"model: {tested.name}; reference: {reference['system_info']}")
    print(f"exact arithmetic's argmax on the reference's tokens: {exact_argmax}")
    header = (
        f"{'variant':44s} {'|d| cpu':>8s} {'|d| exact':>9s} {'gap err':>8s} {'KL mean':>9s} "
        f"{'KL max':>8s}  rules 1-2  argmax differs from CPU (not near-ties) / from exact"
    )
    print(header)
    for row in rows:
        if "error" in row:
            print(f"{row['variant']:44s} FAILED: {row['error']}")
            continue
        cpu_cols = f"{row['vs_cpu_max']:8.3f}" if "vs_cpu_max" in row else f"{'-':>8s}"
        kl_cols = f"{'-':>9s} {'-':>8s}"
        if "kl_mean" in row:
            kl_cols = f"{row['kl_mean']:9.5f} {row['kl_max']:8.5f}"
        verdict = ("pass" if row["passes_rules_1_2"] else "FAIL") if "vs_cpu_max" in row else "-"
        against_cpu = (
            f"{row['argmax_vs_cpu']} ({row['not_near_ties']})" if "argmax_vs_cpu" in row else "-"
        )
        exact_cols = f"{row['vs_exact_max']:9.3f} {row['vs_exact_gap']:8.3f}"
        print(
            f"{row['variant']:44s} {cpu_cols} {exact_cols} {kl_cols}  {verdict:9s}  "
            f"{against_cpu} / {row['argmax_vs_exact']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
