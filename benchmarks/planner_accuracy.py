"""How close the planner's memory prediction is to what llama.cpp really takes on an NVIDIA GPU.

    # the accuracy matrix: each model file x context x KV type x offload
    python benchmarks/planner_accuracy.py matrix MODEL.gguf... [--ctx 4096,32768,131072]
        [--kv f16,q8_0,q4_0] [--offload all,half,experts] [--out DIR]

    # consumer cards: leave 8, 12 or 24 GiB free (the rest held by a second process), plan,
    # load the plan, prefill 512 tokens, and compare with llama.cpp's llama-fit-params
    python benchmarks/planner_accuracy.py cards FILES... [--cards 8,12,24]
        [--fit-params /path/to/llama-fit-params] [--out DIR]

In `cards`, each FILES argument is one model: its quantizations joined with commas
(a-q8_0.gguf,a-q4_k_m.gguf), among which the planner chooses.

Every load runs in a child process (benchmarks/planner_accuracy_child.py), so an out-of-memory abort
ends only that cell, and each cell starts from a fresh CUDA context. The child captures
llama.cpp's log through llama_log_set ("CUDA0 model buffer size = ...", "CUDA0 KV buffer
size", "CUDA0 compute buffer size") and reads the GPU memory its process uses (NVML, or
nvidia-smi) after loading and again after a 512-token prefill. "Measured" is that per-process
figure after the prefill (the CUDA context, cuBLAS and the scratch pools included); where the
driver does not report per-process memory, the device's used memory minus what was used
before the child started. A cell is within tolerance when |predicted - measured| <=
max(3% of measured, 128 MiB). Results: DIR/planner-accuracy.json and DIR/planner-accuracy.md.

Needs a CUDA build of llama-cpp-python and the NVIDIA driver; nothing else beyond the repo.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.gguf import read_model_info
from engine.planner import (
    Config,
    DeviceBudget,
    Planner,
    PlanRequest,
    build_profile,
    estimate,
    expert_override_pattern,
    safety_margin,
)
from engine.planner.backends import BACKENDS
from engine.planner.memory import layer_ranges
from engine.planner.speed import bytes_read_per_token, tokens_per_second

sys.path.insert(0, str(Path(__file__).resolve().parent))
from planner_accuracy_child import PREFILL, device_memory

MIB = 1024**2
GIB = 1024**3
TOLERANCE = 0.03
TOLERANCE_FLOOR = 128 * MIB
CHILD_TIMEOUT_S = 900
CHILD = str(Path(__file__).with_name("planner_accuracy_child.py"))
ENV = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTHONUNBUFFERED": "1"}


def run_child(spec: dict) -> dict:
    before = device_memory()[0]
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, CHILD, "load", json.dumps(spec)],
        capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=ENV, check=False,
    )  # fmt: skip
    result: dict = {"ok": False, "exit_status": proc.returncode}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            result["exit_status"] = proc.returncode
            break
    else:
        result["stderr_tail"] = proc.stderr[-3000:]
    result["device_used_before"] = before
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def measured_bytes(result: dict) -> int | None:
    after = result.get("after_prefill") or {}
    if after.get("process"):
        return after["process"]
    if after.get("device_used") is not None and result.get("device_used_before") is not None:
        return after["device_used"] - result["device_used_before"]
    return None


# -- predictions -------------------------------------------------------------------------------


def spec_for(path: str, config: Config, overrides=()) -> dict:
    return {
        "path": path,
        "n_ctx": config.n_ctx,
        "n_gpu_layers": config.n_gpu_layers,
        "flash_attn": "on" if config.flash_attn else "off",
        "type_k": config.type_k,
        "type_v": config.type_v,
        "n_ubatch": config.n_ubatch,
        "swa_full": config.swa_full,
        "n_outputs_max": config.n_outputs_max,
        "overrides": list(overrides),
    }


def offload_config(profile, name: str, n_ctx: int, kv: str) -> tuple[Config, tuple] | None:
    n = profile.n_layer
    if name == "all":
        ngl, experts = n + 1, 0
    elif name == "half":
        ngl, experts = n // 2 + 1, 0
    elif name == "experts" and profile.is_moe:
        ngl, experts = n + 1, n
    else:
        return None
    config = Config(n_ctx=n_ctx, type_k=kv, type_v=kv, flash_attn=True, n_gpu_layers=ngl,
                    n_cpu_expert_layers=experts)  # fmt: skip
    overrides = ((expert_override_pattern(range(n)), "CPU"),) if experts else ()
    return config, overrides


def predicted_speed(profile, config: Config, bandwidth: float | None) -> float:
    """Decode tokens/s the bandwidth model predicts for the weights alone (the cells decode at
    a depth of 512 tokens, where KV reads are negligible): compare with the measured figure to
    calibrate BackendProfile.decode_efficiency."""
    n = profile.n_layer
    ranges = layer_ranges(n, config.n_gpu_layers, (config.n_gpu_layers,))
    cuda = BACKENDS["cuda"]
    per_gpu, host = bytes_read_per_token(profile, config, ranges, [cuda], kv=False)
    return tokens_per_second(per_gpu, host, [cuda], [bandwidth], None)


def gpu_bandwidth() -> float | None:
    try:
        from engine.hardware import detect_devices

        return next((d.memory_bandwidth_gbps for d in detect_devices() if d.is_gpu), None)
    except Exception:
        return None


def within(predicted: int, measured: int) -> bool:
    return abs(predicted - measured) <= max(TOLERANCE * measured, TOLERANCE_FLOOR)


def matrix(args: argparse.Namespace) -> list[dict]:
    rows = []
    for path in args.models:
        profile = build_profile(read_model_info(path))
        for n_ctx in args.ctx:
            for kv in args.kv:
                for offload in args.offload:
                    made = offload_config(profile, offload, n_ctx, kv)
                    if made is None:
                        continue
                    config, overrides = made
                    est = estimate(profile, config, [BACKENDS["cuda"]])
                    gpu = est.gpus[0]
                    speed = predicted_speed(profile, config, args.bandwidth)
                    result = run_child(spec_for(path, config, overrides))
                    measured = measured_bytes(result) if result.get("ok") else None
                    row = {
                        "model": Path(path).name, "arch": profile.info.architecture,
                        "quant": profile.quant, "n_ctx": n_ctx, "kv": kv, "offload": offload,
                        "predicted": {"weights": gpu.weights, "kv": gpu.kv,
                                      "compute": gpu.compute, "overhead": gpu.overhead,
                                      "total": gpu.total, "host": est.host.total},
                        "measured_total": measured, "result": result,
                        "predicted_tokens_per_second": speed,
                        "within": measured is not None and within(gpu.total, measured),
                    }  # fmt: skip
                    rows.append(row)
                    print(_matrix_line(row), flush=True)
    return rows


def _mib(n) -> str:
    return "-" if n is None else f"{n / MIB:.0f}"


def _matrix_line(row: dict) -> str:
    p, r = row["predicted"], row["result"]
    b = r.get("buffers_mib", {})
    logged = "/".join(f"{b.get(f'CUDA0 {kind}', 0):.0f}" for kind in ("model", "KV", "compute"))
    status = "ok" if r.get("ok") else f"FAILED({r.get('stage')})"
    measured = row["measured_total"]
    err = f"{(p['total'] - measured) / MIB:+.0f}" if measured else "-"
    return (
        f"{row['model'][:28]:28} {row['n_ctx']:>6} {row['kv']:4} {row['offload']:7} "
        f"pred {_mib(p['total']):>6} meas {_mib(measured):>6} err {err:>5} MiB "
        f"{'IN ' if row['within'] else 'OUT'} w/kv/c pred {_mib(p['weights'])}/{_mib(p['kv'])}/"
        f"{_mib(p['compute'])} logged {logged} {status}"
    )


# -- consumer cards: a memory hog, the plan, and llama-fit-params ---------------------------------


def start_hog(leave_gib: float) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, CHILD, "hog", str(int(leave_gib * GIB))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        proc.kill()
        raise RuntimeError(f"the memory hog did not start: {line!r}")
    return proc, int(line.split()[1])


def fit_params(binary: str, path: str, margin: int, min_ctx: int) -> dict:
    """llama.cpp's own fit for the same free memory: -c 0 (from the training context down to
    min_ctx), then fewer layers or experts."""
    cmd = [binary, "-m", path, "-c", "0", "-fitt", str(margin // MIB), "-fitc", str(min_ctx)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV, check=False)
    out = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    found = {
        "ctx": re.search(r"-c (\d+)", out),
        "ngl": re.search(r"-ngl (-?\d+)", out),
        "ot": re.search(r'-ot "?([^"]+)"?', out),
    }
    return {
        "exit_status": proc.returncode,
        "args": out,
        "n_ctx": int(found["ctx"].group(1)) if found["ctx"] else None,
        "n_gpu_layers": int(found["ngl"].group(1)) if found["ngl"] else None,
        "overrides": found["ot"].group(1).split(",") if found["ot"] else [],
    }


def _gpu_weights_of(profile, n_ctx: int, ngl: int, override_layers: int) -> int:
    config = Config(n_ctx=n_ctx, n_gpu_layers=ngl, n_cpu_expert_layers=override_layers)
    return estimate(profile, config, [BACKENDS["cuda"]]).gpus[0].weights


def cards(args: argparse.Namespace) -> list[dict]:
    rows = []
    for card in args.cards:
        proc, free = start_hog(card)
        try:
            for group in args.models:
                rows.extend(_card_rows(args, card, free, group.split(",")))
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
    return rows


def _card_rows(args, card: float, free: int, paths: list[str]) -> list[dict]:
    infos = [read_model_info(p) for p in paths]
    planner = Planner(infos)
    margin = safety_margin(int(card * GIB))
    budget = DeviceBudget("cuda0", f"{card:g} GiB card", "cuda", max(0, free - margin))
    import psutil

    host = int(psutil.virtual_memory().available * 0.9)
    out = []
    train = max(info.context_length or 4096 for info in infos)
    requests = {
        "hearth": PlanRequest(gpus=(budget,), host_budget_bytes=host, target_ctx=args.target_ctx),
        "fit-comparable": PlanRequest(gpus=(budget,), host_budget_bytes=host, target_ctx=train,
                                      min_ctx=args.min_ctx, kv_types=("f16",), flash_attn="on",
                                      preference="context"),
    }  # fmt: skip
    for label, request in requests.items():
        plan = planner.plan(request)
        row: dict = {"card_gib": card, "free": free, "request": label, "plan": plan.to_dict()}
        if plan.fits:
            s = plan.settings
            spec = {**s.model_params().__dict__, "overrides": list(s.tensor_buft_overrides),
                    "tensor_split": list(s.tensor_split), "swa_full": s.swa_full,
                    "n_outputs_max": s.n_outputs_max}  # fmt: skip
            result = run_child(spec)
            measured = measured_bytes(result) if result.get("ok") else None
            predicted = plan.devices[0].total_bytes
            row.update(result=result, measured_total=measured, predicted_total=predicted,
                       within=measured is not None and within(predicted, measured))  # fmt: skip
        if label == "fit-comparable" and args.fit_params:
            choice = plan.choice
            for path in paths:
                if choice is not None and path != choice.source:
                    continue
                fit = fit_params(args.fit_params, path, margin, args.min_ctx)
                row["fit_params"] = fit
                if choice is not None and fit["n_ctx"] is not None:
                    profile = next(p for p in planner.profiles if p.source == path)
                    n_ov = sum(1 for o in fit["overrides"] if "exps" in o)
                    ngl = fit["n_gpu_layers"] if fit["n_gpu_layers"] >= 0 else profile.n_layer + 1
                    theirs = _gpu_weights_of(profile, fit["n_ctx"], ngl, n_ov)
                    ours = _gpu_weights_of(profile, choice.n_ctx, choice.n_gpu_layers,
                                           choice.n_cpu_expert_layers)  # fmt: skip
                    row["at_least_fit"] = choice.n_ctx > fit["n_ctx"] or (
                        choice.n_ctx == fit["n_ctx"] and ours >= theirs
                    )
                break
        out.append(row)
        print(_card_line(row), flush=True)
    return out


def _card_line(row: dict) -> str:
    c = row["plan"]["choice"]
    head = f"{row['card_gib']:>4g} GiB {row['request']:14}"
    if c is None:
        return f"{head} nothing fits: {row['plan']['reasons'][:1]}"
    ok = "loaded+prefilled" if row.get("result", {}).get("ok") else "FAILED"
    fit = row.get("fit_params")
    fit_text = f" fit-params: -c {fit['n_ctx']} -ngl {fit['n_gpu_layers']}" if fit else ""
    verdict = {True: " ours>=fit", False: " ours<fit"}.get(row.get("at_least_fit"), "")
    return (
        f"{head} {Path(c['source']).name[:26]:26} ctx {c['n_ctx']:>6} kv {c['type_k']:4} "
        f"ngl {c['n_gpu_layers']:>3} exp {c['n_cpu_expert_layers']:>2} pred "
        f"{_mib(row.get('predicted_total'))} meas {_mib(row.get('measured_total'))} "
        f"{'IN' if row.get('within') else 'OUT'} {ok}{fit_text}{verdict}"
    )


# -- report ------------------------------------------------------------------------------------


def markdown(matrix_rows: list[dict], card_rows: list[dict]) -> str:
    lines = []
    if matrix_rows:
        done = [r for r in matrix_rows if r["measured_total"] is not None]
        inside = sum(r["within"] for r in done)
        lines += [
            f"Cells within max(3%, 128 MiB): **{inside}/{len(done)}**"
            f" ({100 * inside / max(1, len(done)):.0f}%); {len(matrix_rows) - len(done)} failed.",
            "",
            "| model | ctx | KV | offload | predicted MiB | measured MiB | error | in | "
            "weights pred/log | KV pred/log | compute pred/log | tok/s pred/meas |",
            "|---|---:|---|---|---:|---:|---:|---|---|---|---|---|",
        ]
        for r in matrix_rows:
            p, b = r["predicted"], r["result"].get("buffers_mib", {})
            if r["measured_total"]:
                err = f"{100 * (p['total'] - r['measured_total']) / r['measured_total']:+.1f}%"
            else:
                err = "not measured" if r["result"].get("ok") else "failed"
            lines.append(
                f"| {r['model']} | {r['n_ctx']} | {r['kv']} | {r['offload']} | {_mib(p['total'])} "
                f"| {_mib(r['measured_total'])} | {err} | {'yes' if r['within'] else 'no'} | "
                f"{_mib(p['weights'])}/{b.get('CUDA0 model', 0):.0f} | "
                f"{_mib(p['kv'])}/{b.get('CUDA0 KV', 0):.0f} | "
                f"{_mib(p['compute'])}/{b.get('CUDA0 compute', 0):.0f} | "
                f"{r['predicted_tokens_per_second']:.1f}/"
                f"{r['result'].get('decode_tokens_per_second') or 0:.1f} |"
            )
    if card_rows:
        loaded = [r for r in card_rows if "result" in r]
        ok = sum(bool(r["result"].get("ok")) for r in loaded)
        compared = [r for r in card_rows if "at_least_fit" in r]
        better = sum(r["at_least_fit"] for r in compared)
        lines += [
            "",
            f"Plans that loaded and prefilled {PREFILL} tokens: **{ok}/{len(loaded)}**; "
            f"plan at least as large as llama-fit-params: **{better}/{len(compared)}**.",
            "",
            "| card | request | file | ctx | KV | GPU layers | experts in RAM | predicted MiB | "
            "measured MiB | ok | fit-params |",
            "|---:|---|---|---:|---|---:|---:|---:|---:|---|---|",
        ]
        for r in card_rows:
            c = r["plan"]["choice"]
            if c is None:
                lines.append(
                    f"| {r['card_gib']:g} | {r['request']} | nothing fits | | | | | | | | |"
                )
                continue
            fit = r.get("fit_params") or {}
            lines.append(
                f"| {r['card_gib']:g} | {r['request']} | {Path(c['source']).name} | {c['n_ctx']} "
                f"| {c['type_k']} | {c['n_gpu_layers']} | {c['n_cpu_expert_layers']} | "
                f"{_mib(r.get('predicted_total'))} | {_mib(r.get('measured_total'))} | "
                f"{'yes' if r.get('result', {}).get('ok') else 'no'} | "
                f"{fit.get('args', '')} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("matrix", "cards"))
    parser.add_argument("models", nargs="+")
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    parser.add_argument("--ctx", type=ints, default=[4096, 32768, 131072])
    parser.add_argument("--kv", type=lambda t: t.split(","), default=["f16", "q8_0", "q4_0"])
    parser.add_argument(
        "--offload", type=lambda t: t.split(","), default=["all", "half", "experts"]
    )
    parser.add_argument(
        "--cards", type=lambda t: [float(x) for x in t.split(",")], default=[8, 12, 24]
    )
    parser.add_argument("--fit-params", help="path of llama.cpp's llama-fit-params binary")
    parser.add_argument("--target-ctx", type=int, default=32768)
    parser.add_argument("--min-ctx", type=int, default=4096)
    parser.add_argument(
        "--bandwidth", type=float, help="GPU memory bandwidth, GB/s (default: NVML)"
    )
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.bandwidth is None:
        args.bandwidth = gpu_bandwidth()
    args.out.mkdir(parents=True, exist_ok=True)
    matrix_rows = matrix(args) if args.mode == "matrix" else []
    card_rows = cards(args) if args.mode == "cards" else []
    stem = f"planner-accuracy-{args.mode}"
    (args.out / f"{stem}.json").write_text(
        json.dumps({"matrix": matrix_rows, "cards": card_rows}, indent=1) + "\n"
    )
    (args.out / f"{stem}.md").write_text(markdown(matrix_rows, card_rows))
    print(markdown(matrix_rows, card_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
