"""How close the planner's memory prediction is to what llama.cpp really takes on an NVIDIA GPU.

    # the accuracy matrix: each model file x context x KV type x offload
    python benchmarks/planner_accuracy.py matrix MODEL.gguf... [--ctx 4096,32768,131072]
        [--kv f16,q8_0,q4_0] [--offload all,half,experts] [--out DIR]

    # the recorded cells predicted again by the planner as it is now (after a calibration)
    python benchmarks/planner_accuracy.py rescore RESULT.json --models-dir DIR [--out DIR]

    # consumer cards: leave 8, 12 or 24 GiB free (the rest held by a second process), plan,
    # load the plan, prefill 512 tokens, and compare with llama.cpp's llama-fit-params
    python benchmarks/planner_accuracy.py cards FILES... [--cards 8,12,24]
        [--fit-params /path/to/llama-fit-params] [--out DIR]

In `cards`, each FILES argument is one model: its quantizations joined with commas
(a-q8_0.gguf,a-q4_k_m.gguf), among which the planner chooses.

Every cell is loaded by Hearth's own engine worker (engine/runtime), with the ModelParams the
app would send, so what is measured is what a person gets: the worker's buffer-type overrides,
one output row per batch, sampling in the graph, its warm-up. The cells of one file and
placement share one worker: the worker keeps the weights and makes only the context anew, as it
does when a person changes the context length (the first cell of each group is measured again
at the end, to show that nothing of the earlier contexts stays behind).

"Measured" is the GPU's memory in use (NVML) after a 512-token prefill and 32 decoded tokens,
minus what was in use before the worker started: the CUDA context, cuBLAS, the scratch pools,
the weights, the KV cache and the compute buffers, all of it. llama.cpp's own buffer sizes
(captured by the worker through its log callback) are reported beside it. A cell is within
tolerance when |predicted - measured| <= max(3% of measured, 128 MiB).
Results: DIR/planner-accuracy-MODE.json and .md.

Needs a CUDA build of llama-cpp-python and the NVIDIA driver; nothing else beyond the repo.
"""

from __future__ import annotations

import argparse
import json
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
from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_memory import device_used

MIB = 1024**2
GIB = 1024**3
TOLERANCE = 0.03
TOLERANCE_FLOOR = 128 * MIB
PREFILL = 512
DECODE = 32
CELL_TIMEOUT_S = 900
HOG = str(Path(__file__).with_name("gpu_memory.py"))


class Worker:
    """One engine worker, measured from outside; started again after a crash."""

    def __init__(self) -> None:
        self.client: EngineClient | None = None
        self.events = EventQueue()
        self.baseline: int | None = None

    def _start(self) -> None:
        self.baseline = device_used()
        self.events = EventQueue()
        self.client = EngineClient(self.events)
        self.client.start()
        ready = self.events.wait_for(p.Ready, timeout=120)
        if not isinstance(ready, p.Ready):
            raise RuntimeError(f"the engine worker did not start: {ready}")

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def run(self, params: p.ModelParams) -> dict:
        if self.client is None or not self.client.alive:
            self.close()
            self._start()
        assert self.client is not None
        started = time.perf_counter()
        self.client.load(params)
        loaded = self.events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=CELL_TIMEOUT_S)
        result: dict = {"ok": False, "stage": "load"}
        if not isinstance(loaded, p.ModelLoaded):
            return self._failed(result, loaded)
        result["after_load"] = self._used()
        result["stage"] = "prefill"
        n_vocab = loaded.n_vocab
        prompt = tuple((i * 7919 + 17) % n_vocab for i in range(PREFILL))
        self.client.generate(
            prompt_tokens=prompt,
            sampling=p.SamplingParams(temperature=0.0),
            max_tokens=DECODE + 1,
            ignore_eos=True,
        )
        done = self.events.wait_for(p.GenerationDone, p.GenerationFailed, timeout=CELL_TIMEOUT_S)
        if not isinstance(done, p.GenerationDone):
            return self._failed(result, done)
        result["measured"] = self._used()
        buffers: dict[str, float] = {}
        for a in loaded.allocations:
            key = f"{a.device} {a.kind}"
            buffers[key] = round(buffers.get(key, 0.0) + a.bytes / MIB, 2)
        result.update(
            ok=True,
            stage="done",
            seconds=round(time.perf_counter() - started, 1),
            load_seconds=round(loaded.load_seconds, 2),
            weights_kept=loaded.weights_kept,
            buffers_mib=buffers,
            device_used_delta={d.device: d.used_bytes for d in loaded.device_used_delta},
            runs_on=list(loaded.runs_on),
            flash_attn=loaded.flash_attn,
            n_ctx_real=loaded.n_ctx,
            tensors_in_ram=len(loaded.tensors_in_ram),
            prefill_tokens_per_second=round(done.stats.prefill_tokens_per_second, 1),
            decode_tokens_per_second=round(done.stats.decode_tokens_per_second, 1),
        )
        return result

    def _used(self) -> int | None:
        now = device_used()
        return None if now is None or self.baseline is None else now - self.baseline

    def _failed(self, result: dict, event) -> dict:
        if isinstance(event, EngineCrashed):
            result["error"] = event.message
            result["last_lines"] = list(event.last_lines)[-12:]
            self.close()
        else:
            result["error"] = getattr(event, "message", repr(event))
        return result


# -- predictions -------------------------------------------------------------------------------


def params_for(path: str, config: Config, cpu_tensors: tuple[str, ...] = ()) -> p.ModelParams:
    return p.ModelParams(
        path=path,
        n_ctx=config.n_ctx,
        n_gpu_layers=config.n_gpu_layers,
        flash_attn="on" if config.flash_attn else "off",
        type_k=config.type_k,
        type_v=config.type_v,
        n_ubatch=config.n_ubatch,
        swa_full=config.swa_full,
        cpu_tensors=cpu_tensors,
    )


def offload_config(profile, name: str, n_ctx: int, kv: str) -> tuple[Config, tuple] | None:
    """The matrix's placements: all layers, half of them (the output layer counts as one, and
    llama.cpp offloads it first), or every layer on the GPU with the MoE experts in RAM."""
    n = profile.n_layer
    if name == "all":
        ngl, experts = n + 1, 0
    elif name == "half":
        ngl, experts = n // 2 + 1, 0
    elif name == "experts" and profile.is_moe:
        ngl, experts = n + 1, n
    else:
        return None
    # n_outputs_max = 1: the worker reserves one row of logits per batch
    config = Config(n_ctx=n_ctx, type_k=kv, type_v=kv, flash_attn=True, n_gpu_layers=ngl,
                    n_cpu_expert_layers=experts, n_outputs_max=1)  # fmt: skip
    cpu_tensors = (expert_override_pattern(range(n)),) if experts else ()
    return config, cpu_tensors


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
        for offload in args.offload:
            cells = [(n_ctx, kv) for n_ctx in args.ctx for kv in args.kv]
            if not cells or offload_config(profile, offload, cells[0][0], cells[0][1]) is None:
                continue
            worker = Worker()  # one per file and placement: the weights stay, contexts change
            try:
                group = []
                for n_ctx, kv in cells:
                    group.append(_matrix_cell(args, worker, path, profile, offload, n_ctx, kv))
                    print(_matrix_line(group[-1]), flush=True)
                rows += group
                again = _matrix_cell(args, worker, path, profile, offload, *cells[0])
                first = group[0]
                first["measured_again_at_end"] = again["measured_total"]
                print(f"  first cell again after {len(cells) - 1} other contexts: measured "
                      f"{_mib(again['measured_total'])} MiB (first: "
                      f"{_mib(first['measured_total'])})", flush=True)  # fmt: skip
            finally:
                worker.close()
            save(args, rows, [])  # a run cut short keeps what it measured
    return rows


def _matrix_cell(args, worker: Worker, path: str, profile, offload: str, n_ctx: int, kv: str):
    config, cpu_tensors = offload_config(profile, offload, n_ctx, kv)
    est = estimate(profile, config, [BACKENDS["cuda"]])
    gpu = est.gpus[0]
    result = worker.run(params_for(path, config, cpu_tensors))
    measured = result.get("measured") if result.get("ok") else None
    return {
        "model": Path(path).name, "arch": profile.info.architecture, "quant": profile.quant,
        "n_ctx": n_ctx, "kv": kv, "offload": offload, "n_gpu_layers": config.n_gpu_layers,
        "predicted": {"weights": gpu.weights, "kv": gpu.kv, "compute": gpu.compute,
                      "overhead": gpu.overhead, "total": gpu.total, "host": est.host.total},
        "measured_total": measured, "result": result,
        "predicted_tokens_per_second": predicted_speed(profile, config, args.bandwidth),
        "within": measured is not None and within(gpu.total, measured),
    }  # fmt: skip


def rescore(args: argparse.Namespace) -> list[dict]:
    """The recorded matrix cells with this planner's predictions: measurements stay as they were
    measured, only the predicted side is computed again (from the same GGUF headers)."""
    rows = json.loads(Path(args.models[0]).read_text())["matrix"]
    profiles: dict[str, object] = {}
    for row in rows:
        name = row["model"]
        if name not in profiles:
            profiles[name] = build_profile(read_model_info(str(args.models_dir / name)))
        profile = profiles[name]
        config, _ = offload_config(profile, row["offload"], row["n_ctx"], row["kv"])
        est = estimate(profile, config, [BACKENDS["cuda"]])
        gpu = est.gpus[0]
        row["predicted_at_run"] = row["predicted"]
        row["predicted"] = {"weights": gpu.weights, "kv": gpu.kv, "compute": gpu.compute,
                            "overhead": gpu.overhead, "total": gpu.total,
                            "host": est.host.total}  # fmt: skip
        row["predicted_tokens_per_second"] = predicted_speed(profile, config, args.bandwidth)
        measured = row["measured_total"]
        row["within"] = measured is not None and within(gpu.total, measured)
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
        [sys.executable, HOG, "hog", str(int(leave_gib * GIB))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
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
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
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
                save(args, [], rows)
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
            worker = Worker()  # a fresh process per plan, as the app's first load of a model
            try:
                result = worker.run(plan.settings.model_params())
            finally:
                worker.close()
            measured = result.get("measured") if result.get("ok") else None
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
            f" ({100 * inside / max(1, len(done)):.0f}%); "
            f"{sum(not r['result'].get('ok') for r in matrix_rows)} failed to load or run.",
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


def save(args: argparse.Namespace, matrix_rows: list[dict], card_rows: list[dict]) -> str:
    stem = f"planner-accuracy-{args.mode}"
    (args.out / f"{stem}.json").write_text(
        json.dumps(
            {"bandwidth_gbps": args.bandwidth, "matrix": matrix_rows, "cards": card_rows},
            indent=1,
        )
        + "\n"
    )
    text = markdown(matrix_rows, card_rows)
    (args.out / f"{stem}.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("matrix", "cards", "rescore"))
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
    parser.add_argument("--models-dir", type=Path, help="rescore: where the GGUFs are")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.bandwidth is None:
        args.bandwidth = gpu_bandwidth()
    args.out.mkdir(parents=True, exist_ok=True)
    matrix_rows = {"matrix": matrix, "rescore": rescore}.get(args.mode, lambda _: [])(args)
    card_rows = cards(args) if args.mode == "cards" else []
    print(save(args, matrix_rows, card_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
