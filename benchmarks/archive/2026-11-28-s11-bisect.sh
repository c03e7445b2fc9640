#!/usr/bin/env bash
# Issue 31's prefill/load bisect (run from the repository root with .gpuwork/old = commit
# 0d902b8 and the bundle's wheels in /tmp/site, as call A's script sets up).
# Question: pp512 8184.7 -> 7140.0 tok/s and load 0.77 -> 1.01 s between 0d902b8 and the
# current tree. Suspect for pp512: benchmarks/hearth_speed.py's prefill_time builds its cache
# with new_cache(model, "f16"), which at 0d902b8 was the plain TorchKVCache and now is what the
# engine builds on a GPU (cache_layout: kernels' paged f16 cache, as the driver already did at
# 0d902b8); so the probe below times pp512 with BOTH caches in BOTH trees, and loads twice.
# Then hearth_speed itself (no llama-bench) for each tree: load, pp512 and the rot4 depth line.
set -uo pipefail
export PYTHONUNBUFFERED=1
MODEL=/tmp/models/llama3-8b-random-q4_k_m.gguf
SITE=${SITE:-/tmp/site}
SECONDS=0
if [ ! -f "$MODEL" ]; then
  mkdir -p /tmp/models
  vocab=$(ls /tmp/llama/llama_cpp_python-*/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf 2>/dev/null | head -1)
  # hearth_speed writes the file without --vocab too (then only Hearth can load it)
  PYTHONPATH="$SITE:$PWD" python3 -m benchmarks.hearth_speed --write-random llama3-8b "$MODEL" \
    ${vocab:+--vocab "$vocab"} && sync
  echo "model written at $SECONDS s"
fi

# load twice, then pp512 with the plain f16 cache and the paged f16 cache (both trees have both)
PROBE=/tmp/bisect_probe.py
cat > "$PROBE" <<'PY'
import sys, time, torch
from benchmarks import hearth_speed as hs
from engine.gguf import read_model_info
from engine.hearth.config import model_config
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.ops import select_ops
from engine.hearth.paged_cache import PagedCacheAdapter
from engine.hearth.weights import GGUFTensors

path = sys.argv[1]
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
loads = []
for _ in range(2):
    model = None
    torch.cuda.empty_cache()
    started = time.perf_counter()
    info = read_model_info(path)
    model = Transformer.load(model_config(info), GGUFTensors(path, info), select_ops("cuda"))
    torch.cuda.synchronize()
    loads.append(time.perf_counter() - started)
print("  load s (twice):", " ".join(f"{t:.3f}" for t in loads))
cfg = model.config
dims = dict(n_layer=cfg.n_layer, n_head_kv=cfg.n_head_kv, head_dim=cfg.head_dim, device="cuda")
caches = {
    "plain f16 (TorchKVCache)": lambda n: TorchKVCache(**dims, n_ctx=n),
    "paged f16 (PagedCacheAdapter)": lambda n: PagedCacheAdapter(
        **dims, n_ctx=n, k_format="f16", v_format="f16"),
}
for name, build in list(caches.items()) * 2:  # each twice, interleaved
    hs.new_cache = lambda model, kv, n_ctx, build=build: build(n_ctx)
    pp, ttft, runs = hs.prefill_time(model, 512)
    print(f"  pp512 {name}: {512 / pp:.1f} tok/s (runs {min(runs)*1e3:.1f}-{max(runs)*1e3:.1f}"
          f" ms), ttft {ttft * 1e3:.1f} ms")
PY

speed() {  # hearth_speed as hearth_show runs it, minus llama-bench
  timeout 150 python3 -m benchmarks.hearth_speed "$MODEL" --kv rot4 --tg-kv paged-f16 \
    --depth 32768 > "$1" 2>&1
  echo "  hearth_speed: exit $? at $SECONDS s"
  grep -E "^(load|pp512|ttft|depth 32768 (KV )?rot4)" "$1" | sed 's/^/  /'
  grep -E "FAILED|Error" "$1" | head -5 | sed 's/^/  /'
}

new_dir=$PWD
for tree in new old new-again; do
  case $tree in
    old) dir=.gpuwork/old ;;
    *) dir=$new_dir ;;
  esac
  echo "== $tree tree ($dir: $(cd "$dir" && git rev-parse --short HEAD 2>/dev/null || cat .gpuwork/new_commit 2>/dev/null || echo '?')) at $SECONDS s"
  (cd "$dir" && export PYTHONPATH="$SITE:$PWD" && timeout 150 python3 "$PROBE" "$MODEL")
  echo "  probe: exit $? at $SECONDS s"
  if [ "$tree" != new-again ]; then
    (cd "$dir" && export PYTHONPATH="$SITE:$PWD" && speed "${OUT:-/tmp}/bisect-$tree-speed.txt")
  fi
done
echo "done at $SECONDS s"
