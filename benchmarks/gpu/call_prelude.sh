# Sourced by a device call's script (benchmarks/archive/*-call-*.sh), from the repository root:
#
#   source benchmarks/gpu/call_prelude.sh o1      # outputs under /tmp/o1, tarred to $OUT/all.tgz
#
# Sets R ($OUT), o (/tmp/NAME), start and DEADLINE (DEADLINE_S, default 560 s: a call's 600 s
# less the time to hand the outputs back); defines `left` (seconds to the deadline), `cap N
# [MARGIN]` (N, or what is left less MARGIN if that is less: a step's timeout) and `since WHAT`
# (a line in steps.txt with the seconds since the start); on exit copies the servers' logs into
# $o and tars $o into $R/all.tgz, whatever failed. Then:
#
#   install_wheels    .whl's wheels (benchmarks/gpu/make_bundle.sh: the server's and the tests'
#                     packages, gguf and diskcache among them) into /tmp/site, on PYTHONPATH
#   llama_from_pack   llama.cpp from a carried .llama-pack (pack_llama_build.sh), then env.sh
#   write_random SHAPE QUANT VOCAB FILE
#                     a random-block GGUF of a shape (benchmarks.hearth_speed --write-random)
#                     with the vocabulary of llama.cpp's models/VOCAB, unless FILE exists
set -uo pipefail
R=$OUT
o=/tmp/${1:?usage: source call_prelude.sh NAME}
mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-560}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
_finish() {
  cp /tmp/logs/hearth-*.log /tmp/logs/*server*.log "$o/" 2>/dev/null
  tar czf "$R/all.tgz" -C /tmp "$(basename "$o")"
}
trap _finish EXIT

install_wheels() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >"$o/pip.txt" 2>&1 || tail -3 "$o/pip.txt" >>"$o/steps.txt"
  export PYTHONPATH="$PWD:${PYTHONPATH:-}:/tmp/site"
  python3 -c "import fastapi, uvicorn, keyring, gguf, tests.conftest" 2>&1 | tail -1 \
    | sed 's/^/imports: /' >>"$o/steps.txt"
}

llama_from_pack() {
  mkdir -p /tmp/bundle/wheels
  cp .whl/gguf-*.whl .whl/diskcache-*.whl /tmp/bundle/wheels/
  bash benchmarks/gpu/build_llama_cuda.sh /tmp/bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
    || tail -20 /tmp/logs/build.txt >>"$o/steps.txt"
  source /tmp/llama/env.sh
  export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/site"
}

write_random() {
  local vocab
  vocab=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/$3
  [ -f "$4" ] && return 0
  python3 -m benchmarks.hearth_speed --write-random "$1" "$4.part" --quant "$2" --vocab "$vocab" \
    >>"$o/write.txt" 2>&1 && mv "$4.part" "$4" && sync
}
