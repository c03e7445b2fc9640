#!/usr/bin/env bash
# Why `import torch` aborted in a process that had loaded llama.cpp's CUDA build (H100 machine:
# "free(): invalid pointer" in torch's TorchScript source parser; see
# engine/runtime/torch_beside_llama.py and docs/hearth-engine.md, Not done), and which import
# orders work: one device call, after the llama.cpp build (this script builds it unless
# /tmp/llama/env.sh exists). Each variant runs in its own process; everything is written to
# $OUT/diag.txt (the device returns at most 8 files), the native backtrace of the abort from
# cuda-gdb (the machine has no gdb) among it. The build itself comes back too, packed in parts
# of 15 MiB ($OUT/llama-build.tar.xz.part-*), so that later calls can carry it instead of
# building again (cat the parts | xz -d | tar -C / -x).
#
#   OUT=... [PACK=0] [GDB=0] bash benchmarks/backends/torch_beside_llama.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}; mkdir -p "$out"
log="$out/diag.txt"
[ -f /tmp/llama/env.sh ] || bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/build.log 2>&1 \
  || { tail -30 /tmp/build.log >"$log"; exit 1; }
source /tmp/llama/env.sh
export PYTHONPATH="$PYTHONPATH:$PWD" PYTHONFAULTHANDLER=1
exec > >(tee -a "$log") 2>&1
src=$(ls -d /tmp/llama/llama_cpp_python-*)
if [ "${PACK-1}" = 1 ]; then
echo "== pack the build for later calls"
du -sh "$src/build/bin"; ls -la "$src/build/bin" | sort -k5 -n | tail -6
tar -C / -cf - tmp/llama/env.sh tmp/llama/site "${src#/}/build/bin" "${src#/}/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  | xz -T16 -6 >/tmp/llama-build.tar.xz
ls -la /tmp/llama-build.tar.xz
split -b 15M /tmp/llama-build.tar.xz "$out/llama-build.tar.xz.part-"
ls -la "$out"
fi
echo "== versions"
nvcc --version | tail -2
python3 -c "import sys, numpy; print(sys.version.split()[0], 'numpy', numpy.__version__)"
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|triton|numpy|nvidia)" | tr -s ' '
vocab=$src/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf
model=/tmp/m8.gguf
[ -f $model ] || python3 -m benchmarks.hearth_speed --write-random llama3-8b $model --vocab "$vocab" >/dev/null
variant() {  # name, python source: prints its exit status and last line
  timeout 180 python3 -c "$2" >"/tmp/variant-$1.log" 2>&1
  echo "-- $1: exit $? | $(grep -v '^\s*$' "/tmp/variant-$1.log" | tail -1)"
}
VOCAB="import llama_cpp.llama_cpp as C; C.llama_backend_init(); p = C.llama_model_default_params(); p.vocab_only = True; m = C.llama_model_load_from_file(b'$vocab', p); assert m; print('vocab ok')"
LOAD="from llama_cpp import Llama; llm = Llama('$model', n_gpu_layers=-1, n_ctx=512, verbose=False); llm.eval(llm.tokenize(b'Hello there, general')); print('cuda load+eval ok')"
TORCH_GPU="import torch; a = torch.randn(256, 256, device='cuda'); print('torch ok', float((a @ a).sum().item()) != 0)"
echo "== import orders"
variant llama-then-torch "import llama_cpp; import torch; import torch.nn.functional; print('ok')"
variant lowlevel-then-torch "import llama_cpp.llama_cpp; import torch; import torch.nn.functional; print('ok')"
variant torch-then-llama "import torch; import torch.nn.functional; import llama_cpp; print('ok')"
variant torch-then-vocab "import torch, torch.nn.functional; $VOCAB"
variant torchgpu-then-vocab "$TORCH_GPU; $VOCAB; $TORCH_GPU"
variant llama-load-alone "$LOAD"
variant numpy-then-load "import numpy; $LOAD"
variant torch-then-load "import torch, torch.nn.functional; $LOAD"
variant torchgpu-then-load "$TORCH_GPU; $LOAD; $TORCH_GPU"
variant load-then-torch "$LOAD; import torch; import torch.nn.functional; $TORCH_GPU"
echo "== Hearth's own trace with torch imported first (random 8B, 8 tokens)"
variant hearth-torch-first "import torch, torch.nn.functional, sys, runpy; sys.argv = ['hearth_trace', '$model', '--prompt', 'Hello there', '--tokens', '8']; runpy.run_module('engine.runtime.hearth_trace', run_name='__main__')"
tail -5 /tmp/variant-hearth-torch-first.log
[ "${GDB-1}" = 1 ] && echo "== the abort's native backtrace (cuda-gdb)" && timeout 240 cuda-gdb -batch -ex "set pagination off" -ex "set print thread-events off" -ex run \
  -ex "bt 30" -ex "info sharedlibrary" --args python3 -c "import llama_cpp; import torch; import torch.nn.functional" 2>&1 \
  | grep -v -E "^\[(New|Thread)|^warning: (Unable|Could not)" | head -150
echo "== libraries in load order, llama first (LD_DEBUG=libs, 'calling init')"
LD_DEBUG=libs timeout 120 python3 -c "import llama_cpp; import torch" 2>&1 | grep "calling init" | awk '{print $NF}' | head -120
echo "== same SONAME loaded from two places? (torch alone vs llama alone)"
LD_DEBUG=libs timeout 120 python3 -c "import torch" 2>&1 | grep "calling init" | awk '{print $NF}' | sort -u >/tmp/t.libs
LD_DEBUG=libs timeout 120 python3 -c "import llama_cpp" 2>&1 | grep "calling init" | awk '{print $NF}' | sort -u >/tmp/l.libs
join -j1 <(awk -F/ '{print $NF" "$0}' /tmp/t.libs | sort) <(awk -F/ '{print $NF" "$0}' /tmp/l.libs | sort) | awk '$2 != $3'
echo "== exported C++ runtime symbols in llama.cpp's libraries (operator new/delete, std::)"
for f in "$src"/build/bin/lib*.so; do
  echo "$(basename $f): $(nm -D --defined-only "$f" 2>/dev/null | grep -c -E ' (T|W|V) _Z(nw|dl|na|da)') new/delete, $(nm -D --defined-only "$f" 2>/dev/null | grep -c -E ' (T|W) _ZNS|_ZNKS|_ZSt') std"
done
echo "== symbols torch binds into llama.cpp's libraries (LD_DEBUG=bindings)"
LD_DEBUG=bindings timeout 120 python3 -c "import llama_cpp; import torch" 2>&1 \
  | grep -E "binding file .*(torch|libc10|_C\.cpython|numpy).* to .*(libggml|libllama|libmtmd|/tmp/llama)" | head -40
