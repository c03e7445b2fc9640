#!/usr/bin/env bash
# Session 19's second device call, on the machine call 1 left warm (its /tmp/llama build and
# /tmp/models files): gpt-oss-20b and the 8B beside llama-bench (issues 34, 35: the dense decode
# fraction, load cold and warm), serving at 1 4 8 16 64 clients beside llama-server (issue 38:
# the 8-client stall of session 17 call 3), experts in RAM on a 12 GiB card beside llama-bench's
# --n-cpu-moe (issue 34), the memory cards (issue 35).
set -uo pipefail
R=$OUT; o=/tmp/o2; mkdir -p "$o" /tmp/logs
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-565}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
finish() { cp /tmp/logs/hearth-*.log /tmp/logs/*server*.log "$o/" 2>/dev/null; tar czf "$R/all.tgz" -C /tmp o2; }
trap finish EXIT
[ -f /tmp/llama/env.sh ] || bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1
source /tmp/llama/env.sh
[ -d /tmp/site/fastapi ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/site"
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
ls -la /tmp/models > "$o/models.txt"
timeout $(cap 60) python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 \
  --tokens 128 --profile --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss (exit $?)"; grep -h "pp512\|tg128" "$o/gpt-oss.txt" >>"$o/steps.txt"
timeout $(cap 80) python3 -m benchmarks.hearth_speed $L --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --load-runs 2 --json "$o/llama8b.json" >"$o/llama8b.txt" 2>&1
since "llama 8b (exit $?)"; grep -h "load\|pp512\|tg128\|depth" "$o/llama8b.txt" >>"$o/steps.txt"
timeout $(cap 200) python3 benchmarks/server_concurrency.py $L --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth --clients 1 4 8 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 1 --level-timeout 45 --logs /tmp/logs --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; tail -8 "$o/server.txt" >>"$o/steps.txt"
mkdir -p "$o/offload" "$o/memory"
[ "$(left)" -gt 60 ] && { timeout $(cap 120) python3 -m benchmarks.moe_offload show --model $Q --card 12 \
  --out "$o/offload" --skip-cache --hearth-timeout 60 >"$o/offload/show.txt" 2>&1; since "offload (exit $?)"; tail -15 "$o/offload/show.txt" >>"$o/steps.txt"; }
[ "$(left)" -gt 40 ] && { timeout $(cap 90) python3 -m benchmarks.hearth_memory cards --cards 12 24 \
  --shapes qwen3-30b-a3b llama3-8b --kv f16/f16 kivi4/rot4 --budget-s $(( $(left) - 20 )) \
  --out "$o/memory" >"$o/memory/log.txt" 2>&1; since "memory (exit $?)"; }
since end
