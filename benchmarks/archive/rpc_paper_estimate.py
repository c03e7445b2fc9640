# Archived: a one-off estimate; its output is the table in docs/multi-machine.md ("on paper").
# Kept as it ran: PYTHONPATH=$PWD python benchmarks/archive/rpc_paper_estimate.py
"""A paper estimate (docs/multi-machine.md): Llama-3-70B Q4_K_M over two 24 GiB cards in two
machines, one of them a helper behind 1, 2.5 or 10 GbE, as Hearth's planner sees it: the
memory model places the layers, the bandwidth model times the weights, and the network model
(engine/planner/remote_link.py, fitted to traffic counted by benchmarks/rpc_traffic.py) adds the
link's cost per token. Nothing here is measured on such machines: the cards' bandwidth is the
RTX 4090's specification, the links' rates and round trips are typical figures (below).

    PYTHONPATH=$PWD python -m benchmarks.rpc_paper_estimate
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from engine.gguf import read_model_info
from engine.hardware.remote import RemoteDevice, RemoteHost, RemoteLink
from engine.planner import DeviceBudget, Planner, PlanRequest, safety_margin
from engine.planner.memory import layer_ranges
from engine.planner.remote import plan_with_helpers, with_helpers
from engine.planner.remote_link import network_seconds_per_token, traffic_bytes_per_token
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

GIB = 1024**3
CARD_GBPS = 1008.0  # RTX 4090 (384-bit GDDR6X at 21 Gbit/s)
# TCP goodput (about 94% of the line rate) and a typical switched-LAN round trip
LINKS = {
    "1 GbE": RemoteLink(latency_s=0.00030, bytes_per_s=0.94e9 / 8),
    "2.5 GbE": RemoteLink(latency_s=0.00025, bytes_per_s=2.35e9 / 8),
    "10 GbE": RemoteLink(latency_s=0.00015, bytes_per_s=9.4e9 / 8),
}
TARGET_CTX = 8192


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = write_sparse_gguf(Path(folder) / "70b.gguf", SHAPES["llama3-70b"], "Q4_K_M")
        info = read_model_info(path)
    planner = Planner(info)
    profile = planner.profiles[0]
    card = 24 * GIB
    local = DeviceBudget("cuda:0", "RTX 4090 here", "cuda", card - safety_margin(card), CARD_GBPS)
    request = PlanRequest(
        gpus=(local,), host_budget_bytes=48 * GIB, host_bandwidth_gbps=60.0, target_ctx=TARGET_CTX
    )
    alone = planner.plan(request)
    print(f"Llama-3-70B Q4_K_M: {info.weight_bytes / GIB:.1f} GiB of weights, {TARGET_CTX} tokens")
    print(
        f"this machine alone (24 GiB card + RAM): {alone.choice.offload_summary}, "
        f"{alone.tokens_per_second:.1f} tok/s predicted"
    )
    print("| link | placement | network per token | predicted decode |")
    print("| --- | --- | --- | --- |")
    for name, link in LINKS.items():
        card_there = RemoteDevice(
            "pc2:50052", 0, "CUDA0", "RTX 4090", "cuda", card, card, None, CARD_GBPS
        )
        helper = RemoteHost("pc2:50052", (7, 0, 0), (card_there,), link)
        plan = plan_with_helpers(planner, request, [helper])
        shared = with_helpers(request, [helper])
        config = plan.choice
        ranges = layer_ranges(profile.n_layer, config.n_gpu_layers, config.gpu_layer_counts)
        net = network_seconds_per_token(profile, config.n_ctx, ranges, shared.gpus)
        on_helper = ranges[0][1] - ranges[0][0]
        traffic = traffic_bytes_per_token(profile, config.n_ctx, on_helper, False)
        print(
            f"| {name} | {config.gpu_layer_counts[0]} layers on the helper, "
            f"{config.gpu_layer_counts[1]} here (with the output layer), {config.n_ctx} tokens | "
            f"{traffic / 1024:.0f} KiB, {net * 1e3:.2f} ms | "
            f"{plan.tokens_per_second:.1f} tok/s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
