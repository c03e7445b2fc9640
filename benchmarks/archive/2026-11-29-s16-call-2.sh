#!/usr/bin/env bash
# Session 16, call 2 (the same warm H200; carry .whl, .gpu-bundle/wheels; llama.cpp's build is
# in /tmp/llama from call 1, else .llama-pack): issue 38 on branch s16-gpu. The dequantizing MMA
# (kernels/dequant_mma.py): its GPU tests, the batch tests with it forced, its rows beside
# dequantize + torch, the integer GEMV and the integer MMA, and the launch-shape sweep
# (benchmarks/kernels/gpu_dequant_mma.sh); then `hearth serve --engine hearth` beside
# llama-server at 1, 4, 8, 16, 64 clients with the ROWS_WON table those rows gave
# (HEARTH_DEQUANT_MMA_ROWS), 8B-shaped Q4_K_M random, 512-token replies.
set -uo pipefail
R=$OUT; o=/tmp/o2; mkdir -p "$o/mma" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( ${DEADLINE_S:-560} - ($(date +%s) - start) )); }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$o/steps.txt"
OUT=$o source benchmarks/gpu/show_env.sh
export PYTHONPATH="$PYTHONPATH:/tmp/site"
since unpacked
model=/tmp/models/llama3-8b-random-q4_k_m.gguf
( random_model "$model" llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf ) >/tmp/logs/write-8b.txt 2>&1 &
writer=$!
OUT="$o/mma" SWEEP_S=70 timeout 300 bash benchmarks/kernels/gpu_dequant_mma.sh >"$o/mma/console.txt" 2>&1
since "dequant mma (exit $?)"
table=$(python3 - "$o/mma/rows.txt" <<'PY'
import ast, re, sys
text = open(sys.argv[1]).read()
m = re.findall(r"ROWS_WON from these figures: (\{.*\})", text)
table = ast.literal_eval(m[-1]) if m else {}
print(",".join(f"{k}:{a}-{b}" for k, (a, b) in table.items()))
PY
)
echo "HEARTH_DEQUANT_MMA_ROWS=$table" | tee -a "$o/steps.txt"
wait $writer; since "8B written"
HEARTH_DEQUANT_MMA_ROWS="$table" timeout $(( $(left) - 5 )) python3 benchmarks/server_concurrency.py \
  "$model" --llama-server "$(command -v llama-server)" --hearth-engines hearth \
  --clients 1 4 8 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 --rounds 1 \
  --level-timeout 45 --logs /tmp/logs --json "$o/server-concurrency.json" \
  >"$o/server-concurrency.txt" 2>&1
since "serving (exit $?)"
tar czf "$R/all.tgz" -C /tmp o2
