#!/usr/bin/env bash
# h17b (issue 34): the MoE decode step's router and FFN norm. Run from the repository root, on
# one H200, in the session's call environment (torch 2.11 + Triton 3.6, gguf on PYTHONPATH;
# the random models in /tmp/models, written by show_env.sh's random_model); $1: the output
# folder. About 2.5 minutes, every step under a time limit. /work/gpu-requests/h17b.md says what
# each figure decides.
#   tests-kernels.txt  route_from_router (both kernels) and norm_and_route compiled, against the
#                      GEMV + select_and_route and the norm apart; CUDA-graph replays
#   tests-engine.txt   every MoE architecture against the float64 reference on the GPU, and the
#                      graph replaying eager decode (the norm now in the router's launch)
#   router.txt         the FFN norm + router a layer, by router kernel: looped (main's), one-load,
#                      one-load as a dependent launch (the default)
#   qwen3-*.txt        Qwen3-30B-A3B Q4_K_M tg64 with --profile: main's kernels (old), the norm
#                      in the new router (fused); if time is left, the new router with the
#                      norm apart (router), and old again (the host's drift)
#   gpt-oss-*.txt      gpt-oss-20b MXFP4 tg64 old and fused, if time is left
set -uo pipefail
o=${1:?usage: $0 OUTPUT_FOLDER}
mkdir -p "$o"
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-180}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-3} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
T="HEARTH_GPU_TESTS=1 timeout $(cap 45) python3 -m pytest -n 8 -q -p no:cacheprovider -rfE"
env $T tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_gemv.py \
  -k "route_from_router or router or norm_and_route or selected_and_grouped" \
  >"$o/tests-kernels.txt" 2>&1
since "kernel tests (exit $?)"; tail -3 "$o/tests-kernels.txt" >>"$o/steps.txt"
T="HEARTH_GPU_TESTS=1 timeout $(cap 45) python3 -m pytest -n 8 -q -p no:cacheprovider -rfE"
env $T tests/engine/hearth/test_gpu.py -k "moe or gpt" >"$o/tests-engine.txt" 2>&1
since "engine tests (exit $?)"; tail -3 "$o/tests-engine.txt" >>"$o/steps.txt"
timeout $(cap 40) python3 -m benchmarks.kernels.router >"$o/router.txt" 2>&1
since "router (exit $?)"
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
# old: main's router kernel, the norm apart; router: the new router, the norm apart; fused: both
declare -A VARIANT=([old]="HEARTH_ROUTER_LOOPED=1 HEARTH_FUSED_NORM_ROUTER=0"
                    [router]="HEARTH_FUSED_NORM_ROUTER=0" [fused]="HEARTH_FUSED_NORM_ROUTER=1")
speed() {  # speed MODEL NAME VARIANT [TAG]
  local out="$o/$2-$3${4:-}.txt"
  [ -f "$1" ] || { echo "$1 missing" >>"$o/steps.txt"; return; }
  [ "$(left)" -gt 35 ] || { echo "no time left for $2 $3${4:-}" >>"$o/steps.txt"; return; }
  env ${VARIANT[$3]} timeout $(cap 50) python3 -m benchmarks.hearth_speed "$1" --kv paged-f16 \
    --depth 0 --tokens 64 --profile >"$out" 2>&1
  since "$2 $3${4:-} (exit $?)"
  grep -h "tg64\|_router\|_rms_norm_kernel" "$out" >>"$o/steps.txt"
}
speed $Q qwen3 old
speed $Q qwen3 fused
speed $Q qwen3 router
speed $Q qwen3 old -again
speed $G gpt-oss old
speed $G gpt-oss fused
