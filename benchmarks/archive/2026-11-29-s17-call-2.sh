#!/usr/bin/env bash
# Session 17, calls 2-4 (one H200, warm between them): the speculative show on the starter model
# (issue 38), whose file travels in three parts, and the prefill profile of the MoE shapes
# (issue 34's pp512) while the first parts land.
#   call 2 (carry .llama-pack .whl .gpu-bundle/wheels): `bash THIS prefill`
#   call 3 (carry .starter-a .starter-c):                 `bash THIS parts-ac`
#   call 4 (carry .starter-b):                            `bash THIS speculative`
set -uo pipefail
o=/tmp/os; mkdir -p "$o" /tmp/logs /tmp/models /tmp/starter
export PYTHONUNBUFFERED=1
case "$1" in
  prefill)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
    OUT=$o source benchmarks/gpu/show_env.sh
    export PYTHONPATH="$PYTHONPATH:/tmp/site"
    Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
    G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
    random_model $Q qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf >/tmp/logs/write.txt 2>&1
    timeout 100 python3 -m benchmarks.prefill_profile $Q --runs 8 >"$o/prefill-qwen3.txt" 2>&1
    echo "qwen3 prefill profile: exit $?"
    random_model $G gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf >>/tmp/logs/write.txt 2>&1
    timeout 80 python3 -m benchmarks.prefill_profile $G --runs 8 >"$o/prefill-gpt-oss.txt" 2>&1
    echo "gpt-oss prefill profile: exit $?"
    cp "$o"/prefill-*.txt "$OUT/" ;;
  parts-ac)
    cp .starter-a/part /tmp/starter/part.a && cp .starter-c/part /tmp/starter/part.c && ls -la /tmp/starter ;;
  speculative)
    cat /tmp/starter/part.a .starter-b/part /tmp/starter/part.c >/tmp/starter/model.gguf
    sha256sum /tmp/starter/model.gguf
    export PYTHONPATH="$PWD:/tmp/site"
    OUT=$o bash benchmarks/gpu_run.sh speculative-hearth >"$o/run.txt" 2>&1
    echo "speculative-hearth: exit $?"
    cp "$o"/speculative-hearth* "$OUT/" 2>/dev/null; tail -40 "$o/run.txt" ;;
esac
