#!/usr/bin/env bash
# Why `import torch` aborts in a process that has loaded llama.cpp's CUDA build (H100 machine,
# session 6: "free(): invalid pointer" in torch's TorchScript source parser; see
# engine/runtime/torch_beside_llama.py and docs/hearth-engine.md, Not done). One device call,
# after the llama.cpp build (gpu_run.sh builds it; this script too unless /tmp/llama/env.sh
# exists). Each variant runs in its own process; the output says which orders survive and
# which shared libraries and symbols the two sides share.
#
#   OUT=... bash benchmarks/backends/torch_beside_llama.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}; mkdir -p "$out"
[ -f /tmp/llama/env.sh ] || bash .gpu-bundle/build-cuda.sh .gpu-bundle /tmp/llama >"$out/build.log" 2>&1
source /tmp/llama/env.sh
export PYTHONFAULTHANDLER=1
lib=$(python3 -c "import importlib.util as u, os; print(os.path.join(os.path.dirname(u.find_spec('llama_cpp').origin), 'lib'))")
variant() {  # name, python source
  timeout 120 python3 -c "$2" >"$out/variant-$1.log" 2>&1
  echo "$1: exit $? $(tail -1 "$out/variant-$1.log")"
}
variant llama-then-torch "import llama_cpp; import torch; print('ok')"
variant torch-then-llama "import torch; import llama_cpp; print('ok')"
vocab=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf
variant torch-then-vocab "import torch, llama_cpp.llama_cpp as C; C.llama_backend_init(); p = C.llama_model_default_params(); p.vocab_only = True; print('ok' if C.llama_model_load_from_file(b'$vocab', p) else 'no model')"
variant numpy-then-llama "import numpy; import llama_cpp; print('ok')"
# llama-cpp-python loads libllama with RTLD_LOCAL on Linux, but its dependencies (libcudart,
# libcublas, libgomp, ...) are then loaded by SONAME: torch's own copies of the same SONAMEs
# are never loaded after that. The list below shows which SONAMEs both sides need.
echo "== libraries each side maps (ldd), shared SONAMEs"
ldd "$lib"/libggml-cuda.so "$lib"/libllama.so "$lib"/libggml-cpu.so 2>/dev/null | awk '{print $1}' | sort -u >"$out/llama-libs.txt"
tlib=$(python3 -c "import importlib.util as u, os; print(os.path.join(os.path.dirname(u.find_spec('torch').origin), 'lib'))")
ldd "$tlib"/libtorch_python.so "$tlib"/libtorch_cuda.so 2>/dev/null | awk '{print $1}' | sort -u >"$out/torch-libs.txt"
comm -12 "$out/llama-libs.txt" "$out/torch-libs.txt" | tee "$out/shared-libs.txt"
echo "== symbols torch's libraries bind into llama.cpp's (LD_DEBUG=bindings)"
LD_DEBUG=bindings timeout 120 python3 -c "import llama_cpp; import torch" 2>&1 \
  | grep -E "binding file .*(libtorch|libc10|_C\.cpython).* to .*(libggml|libllama|libmtmd)" \
  | head -40 | tee "$out/bindings.txt"
echo "== the reverse: llama.cpp's libraries bound to torch's"
LD_DEBUG=bindings timeout 120 python3 -c "import torch; import llama_cpp" 2>&1 \
  | grep -E "binding file .*(libggml|libllama).* to .*(libtorch|libc10|torch/lib)" \
  | head -40 | tee "$out/bindings-reverse.txt"
