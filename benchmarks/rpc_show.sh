#!/usr/bin/env bash
# The multi-machine show on one GPU machine (docs/multi-machine.md): a `hearth host` serves the
# GPU on loopback and Hearth runs a Llama-3-8B-shaped Q4_K_M (random weights) with half its layers
# on the local CPU and half on that "remote" GPU, against the same split all local, with the
# planner's predicted speed and llama-bench's figures beside. Needs .gpu-bundle/
# (benchmarks/gpu/make_bundle.sh; built with GGML_RPC=ON); results in $OUT (rpc-show.txt, rpc-show.json). About 3 minutes after the
# build (most of it writing and quantizing the model).
#
# On the device, from the repository root:  OUT=$OUT bash benchmarks/rpc_show.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash benchmarks/gpu_run.sh rpc-show
