#!/usr/bin/env bash
# On an NVIDIA machine without network (see docs/performance.md, docs/planner-accuracy.md): build
# the engine's llama.cpp with CUDA, then run the given steps.
#
# Usage: benchmarks/gpu_run.sh STEP...
#   bench, bench-q8, bench-cpu-sampling, diag-prefill, tests   need a Llama-3-8B-shaped Q4_K_M
#       with random weights (written and quantized here on first use, about 80 s)
#   matrix, cards   the planner's accuracy benchmark on sparse GGUFs (weights read as zeros:
#       memory depends on shapes and types only) of Llama-3-8B, Gemma-3-12B and Qwen3-30B-A3B
#       at Q4_K_M and Q8_0
#   gui   decode with the main window attached and rendering markdown (needs .gui-carry/)
#   starter-a, starter-check   the starter model travels in two halves (.starter-a/, .starter-b/,
#       each under the transfer limit) to two calls on the same machine, or in three parts
#       (starter-a, starter-b, then .starter-c/ beside .gpu-bundle's calls); starter-check joins
#       them and runs the CUDA check (tests/engine/runtime/test_gpu_matches_cpu.py, which checks
#       the file's SHA-256)
#   cuda-sources   (after starter-a, with .starter-b/) which CUDA kernel choices move the starter
#       model's logits from exact arithmetic (benchmarks/backends/cuda_error_sources.py)
#   sources-q4k   the same on a Q4_K_M made from the starter model's F32 copy (after cuda-sources)
#   llama-bench   llama.cpp's own speed figures (pp512, tg128, flash attention on) on the random
#       8B Q4_K_M and, when it is here, the starter model (Q4_1)
#   server   benchmarks/server_concurrency.py: 1, 4 and 16 streaming clients against `hearth serve`
#       and the same build's llama-server (the server's Python packages travel as wheels in .whl/)
#   gui-server   benchmarks/gui_server_load.py: the window's chat while 16 API clients stream
#       through its Server page (needs .gui-carry/ and .whl/)
#   speculative   speculative decoding: checking k tokens against one step, beside llama-bench,
#       and prompt lookup on the four tasks, on the starter model when it is here (then the
#       random 8B Q4_K_M for the cost and the rewrite task), else on the 8B (speculative_gpu.py)
#   hearth   the Hearth engine beside llama-bench (benchmarks/hearth_show.sh); later steps then
#       use its random-block 8B Q4_K_M as their random 8B model (no llama-quantize pass)
#   hearth-memory   the Hearth engine's memory, predicted against measured, and the longest
#       context on simulated 12 and 24 GiB cards per KV format (benchmarks/hearth_memory.py)
#   hearth-starter   (after starter-a, with .starter-b/) the Hearth engine's greedy starter
#       model against the CPU build's recorded reply, and the llama.cpp CUDA check beside it
#   speculative-hearth   (after starter-a, with .starter-b/) speculative decoding on the Hearth
#       engine: its checks equal decode steps bit for bit (the gpu tests of test_verify.py and
#       test_gemv_rows_alike.py), then the starter model's four tasks plain against prompt
#       lookup, 5 pairs back to back, with its checks' cost (speculative_gpu.py --engine hearth)
#   rpc-show   decode with half the layers on the GPU behind llama.cpp's RPC link (a `hearth host`
#       on loopback) against the same split all local, planner's figures beside (rpc_show.py)
#   patched   builds llama.cpp again with installers/patches/ applied (by the code that
#       installers/build_engine.py uses) and makes the steps after it use that build; their outputs are named *-patched
# Needs .gpu-bundle/ (made by benchmarks/gpu/make_bundle.sh) in the repository root. Results go
# to $OUT (or ./out).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
if [ ! -f /tmp/llama/env.sh ]; then
  bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/dev/null
fi
source /tmp/llama/env.sh
tag=""  # "-patched" after the patched step
export PYTHONPATH="$PWD:$PYTHONPATH" PYTHONUNBUFFERED=1
src=$(ls -d /tmp/llama/llama_cpp_python-*)
vocabs="$src/vendor/llama.cpp/models"
models=/tmp/models; mkdir -p "$models"
q4="$models/llama3-8b-q4_k_m.gguf"
sparse=/tmp/sparse
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

random_q4() {
  if [ ! -f "$q4" ]; then
    python3 -m testkit.synthetic_gguf llama3-8b "$models/llama3-8b-f16.gguf" \
      --vocab "$vocabs/ggml-vocab-llama-bpe.gguf"
    llama-quantize "$models/llama3-8b-f16.gguf" "$q4" Q4_K_M 16 >"$out/quantize.log" 2>&1
    rm -f "$models/llama3-8b-f16.gguf"
  fi
}

sparse_models() {
  mkdir -p "$sparse"
  local shape vocab quant
  for pair in llama3-8b:llama-bpe gemma3-12b:gemma-4 qwen3-30b-a3b:qwen2; do
    shape=${pair%%:*}; vocab=${pair##*:}
    vocab="$vocabs/ggml-vocab-$vocab.gguf"
    # the bundle leaves some vocabularies out: those travel in .vocab/
    [ -f "$vocab" ] || vocab=".vocab/$(basename "$vocab")"
    for quant in Q4_K_M Q8_0; do
      [ -f "$sparse/$shape-$quant.gguf" ] || python3 -m testkit.synthetic_gguf "$shape" \
        "$sparse/$shape-$quant.gguf" --sparse "$quant" --vocab "$vocab"
    done
  done
}

server_wheels() {  # FastAPI, uvicorn, pydantic: not on the GPU machine's image
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/server-site .whl/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/server-site"
}

join_starter() {  # the parts carried by starter-a (and starter-b), then .starter-b/ or .starter-c/
  [ -f /tmp/starter/model.gguf ] && return
  if [ -f /tmp/starter/part.b ]; then
    cat /tmp/starter/part.a /tmp/starter/part.b .starter-c/part > /tmp/starter/model.gguf
  else
    cat /tmp/starter/part.a .starter-b/part > /tmp/starter/model.gguf
  fi
}

for step in "$@"; do
  case "$step" in
    bench) random_q4; python3 -m app.launcher bench "$q4" --kv f16 | tee "$out/bench-f16.txt" ;;
    bench-q8) random_q4; python3 -m app.launcher bench "$q4" --kv q8_0 | tee "$out/bench-q8_0.txt" ;;
    bench-cpu-sampling)
      random_q4
      python3 -m app.launcher bench "$q4" --cpu-sampling --decode 128 --depth 0 \
        | tee "$out/bench-cpu-sampling.txt" ;;
    diag-prefill)
      random_q4
      python3 benchmarks/diag_prefill.py "$q4" 2>/dev/null | tee "$out/diag-prefill.txt"
      llama-bench -m "$q4" -p 512 -n 0 -fa 1 -r 5 | tee -a "$out/diag-prefill.txt"
      python3 -m app.launcher bench "$q4" --decode 128 --depth 0 | tee "$out/bench-small-ctx.txt" ;;
    tests)  # the GPU machine has no PySide6 or Hypothesis: collect only the GPU test files
      random_q4
      mapfile -t files < <(grep -rl "pytestmark = pytest.mark.gpu" tests)
      starter=/tmp/starter/model.gguf; [ -f "$starter" ] || starter=  # after starter-check only
      HEARTH_GPU_TESTS=1 HEARTH_GPU_TEST_MODEL="$q4" HEARTH_GPU_STARTER_MODEL="$starter" \
        python3 -m pytest -v -p no:cacheprovider "${files[@]}" 2>&1 | tee "$out/gpu-tests.log" \
        || echo "GPU TESTS FAILED" ;;
    matrix)
      sparse_models
      python3 benchmarks/planner_accuracy.py matrix \
        "$sparse"/llama3-8b-Q4_K_M.gguf "$sparse"/gemma3-12b-Q4_K_M.gguf \
        "$sparse"/qwen3-30b-a3b-Q4_K_M.gguf "$sparse"/llama3-8b-Q8_0.gguf \
        "$sparse"/gemma3-12b-Q8_0.gguf "$sparse"/qwen3-30b-a3b-Q8_0.gguf \
        --out "$out" 2>&1 | tee "$out/matrix.log" ;;
    cards)
      sparse_models
      python3 benchmarks/planner_accuracy.py cards --fit-params "$(command -v llama-fit-params)" \
        "$sparse"/llama3-8b-Q4_K_M.gguf,"$sparse"/llama3-8b-Q8_0.gguf \
        "$sparse"/gemma3-12b-Q4_K_M.gguf,"$sparse"/gemma3-12b-Q8_0.gguf \
        "$sparse"/qwen3-30b-a3b-Q4_K_M.gguf,"$sparse"/qwen3-30b-a3b-Q8_0.gguf \
        --out "$out" 2>&1 | tee "$out/cards.log" ;;
    gui)  # decode with the main window attached (the GUI's libraries travel in .gui-carry/)
      random_q4
      eval "$(bash benchmarks/gui_carry_install.sh .gui-carry)"
      QT_QPA_PLATFORM=offscreen python3 benchmarks/gui_decode.py "$q4" --tokens 1024 \
        --json "$out/gui-decode.json" --screenshot "$out/gui-decode.png" | tee "$out/gui-decode.txt" ;;
    server)
      random_q4; server_wheels
      python3 benchmarks/server_concurrency.py "$q4" --llama-server "$(command -v llama-server)" \
        --clients 1 4 16 --ctx 1024 --max-tokens 128 --rounds 2 --logs "$out" \
        --json "$out/server-concurrency.json" 2>&1 | tee "$out/server-concurrency.txt" ;;
    gui-server)
      random_q4; server_wheels
      eval "$(bash benchmarks/gui_carry_install.sh .gui-carry)"
      QT_QPA_PLATFORM=offscreen python3 benchmarks/gui_server_load.py "$q4" --clients 16 \
        --tokens 256 --json "$out/gui-server-load.json" --screenshot "$out/gui-server-load.png" \
        2>&1 | tee "$out/gui-server-load.txt" ;;
    hearth)
      OUT="$out" bash benchmarks/hearth_show.sh
      [ -f "$q4" ] || ln -s /tmp/models/llama3-8b-random-q4_k_m.gguf "$q4" ;;
    hearth-memory)
      python3 -m benchmarks.hearth_memory --out "$out" 2>&1 | tee "$out/hearth-memory.log" ;;
    hearth-starter)
      join_starter
      HEARTH_GPU_TESTS=1 HEARTH_GPU_STARTER_MODEL=/tmp/starter/model.gguf python3 -m pytest -v \
        -rP -p no:cacheprovider tests/engine/hearth/test_gpu.py -k "starter or cpu_build" \
        tests/engine/runtime/test_gpu_matches_cpu.py 2>&1 | tee "$out/hearth-starter.log" \
        || echo "STARTER CHECK FAILED" ;;
    speculative-hearth)
      join_starter
      HEARTH_GPU_TESTS=1 python3 -m pytest -q -rf -p no:cacheprovider -m gpu \
        tests/engine/hearth/test_verify.py tests/kernels/test_gemv_rows_alike.py 2>&1 \
        | tee "$out/speculative-hearth-tests.log" || echo "SPECULATIVE HEARTH TESTS FAILED"
      python3 -m pytest -q -rf -p no:cacheprovider tests/kernels/test_gemv_rows_alike.py \
        tests/kernels/test_kv_cache.py -k "rows_alike or splits_as_one" 2>&1 \
        | tee -a "$out/speculative-hearth-tests.log" || echo "SPECULATIVE KERNEL TESTS FAILED"
      timeout 240 python3 -m benchmarks.speculative_gpu /tmp/starter/model.gguf --engine hearth \
        --out "$out" 2>&1 | grep -v "^llama_\|^print_info\|^load" \
        | tee "$out/speculative-hearth.txt" || echo "SPECULATIVE HEARTH BENCHMARK FAILED" ;;
    starter-a) mkdir -p /tmp/starter && cp .starter-a/part /tmp/starter/part.a && echo "kept part a" ;;
    starter-b) mkdir -p /tmp/starter && cp .starter-b/part /tmp/starter/part.b && echo "kept part b" ;;
    starter-check)  # the CUDA build against the CPU build's recorded greedy reference
      join_starter
      HEARTH_GPU_TESTS=1 HEARTH_GPU_STARTER_MODEL=/tmp/starter/model.gguf \
        python3 -m pytest -v -rP -p no:cacheprovider tests/engine/runtime/test_gpu_matches_cpu.py \
        2>&1 | tee "$out/starter-check$tag.log" || echo "STARTER CHECK FAILED" ;;
    cuda-sources)
      join_starter
      python3 benchmarks/backends/cuda_error_sources.py /tmp/starter/model.gguf --out "$out" \
        --name "cuda-error-sources$tag" 2>&1 | tee "$out/cuda-error-sources$tag.txt" ;;
    sources-q4k)
      join_starter
      q4k=/tmp/starter/q4_k_m.gguf
      [ -f "$q4k" ] || llama-quantize /tmp/hearth-cuda-sources/model-f32.gguf "$q4k" Q4_K_M \
        >"$out/quantize-starter.log" 2>&1
      python3 benchmarks/backends/cuda_error_sources.py /tmp/starter/model.gguf --out "$out" \
        --quantized "$q4k" --name "cuda-error-sources-q4k$tag" 2>&1 \
        | tee "$out/cuda-error-sources-q4k$tag.txt" ;;
    llama-bench)
      random_q4
      models_to_bench=("$q4"); [ -f /tmp/starter/model.gguf ] && models_to_bench+=(/tmp/starter/model.gguf)
      for m in "${models_to_bench[@]}"; do
        llama-bench -m "$m" -p 512 -n 128 -fa 1 -r 5 2>/dev/null | tee -a "$out/llama-bench$tag.txt"
      done ;;
    speculative)
      random_q4
      if [ -f /tmp/starter/model.gguf ]; then  # real weights for the tasks, the 8B for the cost
        spec_args=(/tmp/starter/model.gguf --cost-model "$q4")
      else
        spec_args=("$q4")
      fi
      python3 -m benchmarks.speculative_gpu "${spec_args[@]}" --out "$out" 2>&1 \
        | tee "$out/speculative-gpu$tag.txt" ;;
    rpc-show)  # half the layers on the GPU behind llama.cpp's RPC link (benchmarks/rpc_show.py)
      random_q4
      python3 benchmarks/rpc_show.py "$q4" --out "$out" --llama-bench | tee "$out/rpc-show.txt" ;;
    patched)
      if [ ! -f /tmp/llama-patched/env.sh ]; then
        mkdir -p /tmp/llama-patched
        cp -r "$src" /tmp/llama-patched/
        psrc=/tmp/llama-patched/$(basename "$src")
        rm -rf "$psrc/build"
        python3 installers/source_patches.py "$psrc/vendor/llama.cpp" cuda
        arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.[:space:]')
        cmake -S "$psrc/vendor/llama.cpp" -B "$psrc/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
          -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
          -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
          >/tmp/llama-patched/configure.log
        cmake --build "$psrc/build" -j"$(nproc)" --target llama llama-bench llama-quantize \
          >/tmp/llama-patched/build.log
        printf 'export LLAMA_CPP_LIB_PATH="%s"\nexport PATH="%s:$PATH"\n' \
          "$psrc/build/bin" "$psrc/build/bin" >/tmp/llama-patched/env.sh
      fi
      source /tmp/llama-patched/env.sh
      tag="-patched"; echo "using the patched build: $LLAMA_CPP_LIB_PATH" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
