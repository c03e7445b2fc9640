# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callH*
# (3 files); kept as it ran, so it may name code removed since.
set -uo pipefail
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
SECONDS=0
pip install --no-index --no-deps --target /tmp/site $(ls .dev/wheels/gguf*.whl | head -1) >/dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site"
model=/tmp/m.gguf
(python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model" --vocab .vocab/ggml-vocab-llama-bpe.gguf && sync) > "$OUT/write.log" 2>&1 &
writer=$!
timeout 80 python3 -m pytest tests/kernels/test_kv_kivi.py tests/kernels/test_kv_cache_positions.py -m gpu -k "kivi" -v -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s): $(grep -c PASSED "$OUT/tests.log") passed"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -6
wait $writer; tail -1 "$OUT/write.log"
timeout 90 python3 -m benchmarks.hearth_speed "$model" --kv kivi4/rot4 rot4 --json "$OUT/hearth-speed.json" > "$OUT/hearth-speed.txt" 2>&1
echo "== hearth_speed ($SECONDS s)"; tail -8 "$OUT/hearth-speed.txt"
