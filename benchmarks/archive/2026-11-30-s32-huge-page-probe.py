"""Where the split's ggml repack buffers get no huge pages (docs/decisions/2026-11-30-huge-
pages-for-ggml-experts.md): load Qwen3-30B-A3B with 20 layers' experts in RAM, split 3 of 8
(or every pick on the CPU), then report the process's THP state, every mapping that asked for
huge pages (VmFlags hg: the repack buffers) with its AnonHugePages and THPeligible, the
system's free blocks by order (buddyinfo) and THP settings. One JSON line.

    python benchmarks/archive/2026-11-30-s32-huge-page-probe.py MODEL split|cpu [--thp-on]

--thp-on: prctl(PR_SET_THP_DISABLE, 0) after CUDA starts and before the load, in case
something in the process turned THP off for it.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from pathlib import Path


def _status_thp() -> str:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("THP_enabled"):
            return line.split(":", 1)[1].strip()
    return "?"


def _hg_mappings() -> list[dict]:
    """Mappings of /proc/self/smaps with hg (MADV_HUGEPAGE) or nh in VmFlags."""
    found, current = [], None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0] if line else ""
        if "-" in head and not head.endswith(":"):
            current = {"range": head, "fields": {}}
            continue
        if current is None:
            continue
        key, _, value = line.partition(":")
        if key == "VmFlags":
            flags = value.split()
            if "hg" in flags or "nh" in flags:
                f = current["fields"]
                found.append(
                    {
                        "range": current["range"],
                        "flags": "hg" if "hg" in flags else "nh",
                        "size_kb": int(f.get("Size", "0 kB").split()[0]),
                        "rss_kb": int(f.get("Rss", "0 kB").split()[0]),
                        "anon_huge_kb": int(f.get("AnonHugePages", "0 kB").split()[0]),
                        "thp_eligible": f.get("THPeligible", "?").strip(),
                    }
                )
            current = None
        else:
            current["fields"][key] = value.strip()
    return found


def main() -> None:
    import torch

    from engine.gguf import read_model_info
    from engine.hearth.config import model_config
    from engine.hearth.expert_offload import ExpertPlacement
    from engine.hearth.forward import Transformer
    from engine.hearth.ops import select_ops
    from engine.hearth.weights import GGUFTensors

    model_path, how = sys.argv[1], sys.argv[2]
    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a check of the probe
    torch.zeros(1, device=device)
    row = {"how": how, "thp_after_cuda": _status_thp()}
    if "--thp-on" in sys.argv:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        row["prctl"] = libc.prctl(41, 0, 0, 0, 0)  # PR_SET_THP_DISABLE, 0
        row["thp_after_prctl"] = _status_thp()
    info = read_model_info(model_path)
    placement = (ExpertPlacement(20, split_picks=3) if how == "split"
                 else ExpertPlacement(20, on_cpu=True))  # fmt: skip
    started = time.perf_counter()
    model = Transformer.load(model_config(info), GGUFTensors(model_path, info),
                             select_ops(device), experts=placement)  # fmt: skip
    row["load_s"] = round(time.perf_counter() - started, 1)
    row["thp_after_load"] = _status_thp()
    maps = _hg_mappings()
    row["hg_mappings"] = len([m for m in maps if m["flags"] == "hg"])
    row["nh_mappings"] = len([m for m in maps if m["flags"] == "nh"])
    row["hg_size_gib"] = round(sum(m["size_kb"] for m in maps if m["flags"] == "hg") / 2**20, 2)
    row["hg_anon_huge_gib"] = round(sum(m["anon_huge_kb"] for m in maps) / 2**20, 2)
    row["thp_eligible"] = sorted({m["thp_eligible"] for m in maps})
    row["first_mappings"] = maps[:4]
    row["smaps_rollup_anon_huge"] = [
        line for line in Path("/proc/self/smaps_rollup").read_text().splitlines()
        if line.startswith("AnonHugePages")
    ]  # fmt: skip
    row["buddyinfo"] = Path("/proc/buddyinfo").read_text().splitlines()
    thp = Path("/sys/kernel/mm/transparent_hugepage")
    row["thp"] = {n: (thp / n).read_text().strip() for n in ("enabled", "defrag")}
    del model
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
