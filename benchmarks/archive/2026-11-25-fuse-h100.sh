#!/bin/bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-25-fuse-h100*
# (1 files); kept as it ran, so it may name code removed since.
# Issue 17's decode fusions on one H100, one call: this branch (.dev/fuse) and, as "before",
# main's checkout at the repo root (its engine/ and kernels/ are this branch's base), on the
# same random-block Llama-3-8B Q4_K_M file. tg128 + profile + pp512; no 32k depth, no llama.cpp.
# Run from the repo root with carry .dev/fuse and .gpu-bundle; results under $OUT.
set -o pipefail
root=$PWD
out=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-bundle/wheels/*.whl
tar -xzf .gpu-bundle/llama-cpp-python-src.tgz -C /tmp --wildcards '*/models/ggml-vocab-llama-bpe.gguf'
vocab=$(ls /tmp/*/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf | head -1)
export PYTHONUNBUFFERED=1
cd "$root/.dev/fuse"
PYTHONPATH=$PWD:/tmp/site timeout 70 python3 -m benchmarks.hearth_speed \
  --write-random llama3-8b /tmp/m.gguf --vocab "$vocab" 2>&1 | tee "$out/write.log"
PYTHONPATH=$PWD:/tmp/site timeout 80 python3 -m benchmarks.hearth_speed /tmp/m.gguf --kv \
  --profile --json "$out/after.json" 2>&1 | tee "$out/after.txt"
PYTHONPATH=$PWD:/tmp/site HEARTH_GPU_TESTS=1 timeout 60 python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_norms_and_activations.py tests/kernels/test_rope.py \
  tests/engine/hearth/test_gpu.py -k "not starter" 2>&1 | tee "$out/tests.log"
cd "$root"
PYTHONPATH=$root:/tmp/site timeout 60 python3 -m benchmarks.hearth_speed /tmp/m.gguf --kv \
  --profile --json "$out/before.json" 2>&1 | tee "$out/before.txt"
cd "$root/.dev/fuse"
# gemv's opt-in pipelined kernel (programmatic dependent launches) in place of the default,
# everything else as above: a measurement only, the product's default is unchanged
PYTHONPATH=$PWD:/tmp/site timeout 60 python3 -c "
import dataclasses, sys
import kernels.gemv as gemv
default = gemv.default_config
def pipelined(fmt, rows):
    c = default(fmt, rows)
    return dataclasses.replace(c, pipelined=True) if c.path == 'dp4a' else c
gemv.default_config = pipelined
from benchmarks import hearth_speed
sys.exit(hearth_speed.main(['/tmp/m.gguf', '--kv', '--json', '$out/pipelined.json']))
" 2>&1 | tee "$out/pipelined.txt"
for f in before after pipelined; do echo "== $f"; grep -h "tg128\|replay\|pp512" "$out/$f.txt"; done
tail -3 "$out/tests.log"
