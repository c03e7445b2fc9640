# Sourced by the benchmarks' *_show.sh scripts, from the repository root: the results folder
# ($out: $OUT, else ./out), llama.cpp's CUDA build (built from .gpu-bundle/ unless
# /tmp/llama/env.sh exists: about 3 minutes) and its environment, the repository on PYTHONPATH,
# llama.cpp's vocabulary files ($vocabs), and `random_model`.
out=${OUT:-out}; mkdir -p "$out"
[ -f /tmp/llama/env.sh ] || bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/dev/null
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
vocabs="$(ls -d /tmp/llama/llama_cpp_python-* | head -1)/vendor/llama.cpp/models"
mkdir -p /tmp/models

# random_model PATH SHAPE QUANT VOCAB: a file of SHAPE (testkit/synthetic_gguf.py) with random
# blocks and llama.cpp's VOCAB, written once (a second run finds it in /tmp/models)
random_model() {
  [ -f "$1" ] && return 0
  python3 -m benchmarks.hearth_speed --write-random "$2" "$1.part" --quant "$3" \
    --vocab "$vocabs/$4"
  # (sync: the file's pages are written back before either engine's load is timed)
  mv "$1.part" "$1" && sync
}
