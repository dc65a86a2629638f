#!/usr/bin/env bash
# The GPU check: one invocation on a machine with an NVIDIA GPU verifies the
# CUDA backend and measures it. It runs test binaries built elsewhere (no Go
# toolchain needed there) with LMSTREAM_REQUIRE_GPU=1, so nothing passes by
# skipping. Build them first with `make gpu-bundle` (on any machine); the
# bundle travels as build/gpu.tar.xz, unpacked here when build/gpu is not.
# LMSTREAM_PEER_LLAMA_BENCH=path/to/llama-bench adds llama.cpp's figures on
# the same files.
#
#   tests/gpu/check.sh [bundle-dir] [log-dir] [phases]
#
# phases (all four by default; a device call runs at most 10 minutes, so a
# session with little device time runs "verify bench" in one call and
# "shapes adaserve" in the next):
#   verify    every GPU test binary, the conformance vectors and a C-ABI
#             stream with "backend": "cuda"
#   bench     TestGPUBench on the 4-layer model and on its 30-layer copy
#             (decode, prefill, T(N)/T(1), n-gram speculation), the peer
#   shapes    full-size files of Qwen2.5-Coder-1.5B's and -0.5B's exact
#             shapes and tensor types, random values (shape -fill from the
#             bundle's skeletons): TestGPUBench and the peer on each
#   adaserve  lmsadaserve -engine -backend cuda on the 30-layer file: every
#             policy at loads 0.5-2, the simulator's replay beside each
# Every phase has its own time limit; every table lands in log-dir.
set -u
bundle=${1:-build/gpu}
log=${2:-build/gpu-log}
phases=" ${3:-verify bench shapes adaserve} "
mkdir -p "$log"
if [ ! -d "$bundle" ] && [ -f "$bundle.tar.xz" ]; then
  tar -C "$(dirname "$bundle")" -xJf "$bundle.tar.xz" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle.tar.xz" "$(dirname "$bundle")" ||
    { echo "check.sh: cannot unpack $bundle.tar.xz"; exit 1; }
fi
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
  ldconfig -p | grep -E 'libcuda\.so|libnvrtc' 2>&1
  ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null
  nproc
} | tee "$log/env.txt"
export LMSTREAM_REQUIRE_GPU=1 LMSTREAM_REQUIRE_NVRTC=1
export LMSTREAM_TEST_MODEL=${LMSTREAM_TEST_MODEL:-$bundle/model.gguf}
export LMSTREAM_CACHE_DIR=${LMSTREAM_CACHE_DIR:-$log/cubin}
status=0
phase() { case "$phases" in *" $1 "*) return 0 ;; esac; return 1; }
# step NAME LIMIT CMD...: one step under its own time limit, its output in
# log-dir/NAME.txt; a failure or a timeout fails the check.
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$log/$name.txt"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "== $name: exit status $rc$([ "$rc" -eq 124 ] && echo ' (time limit)')" | tee -a "$log/$name.txt"
    status=1
  fi
}
# peer NAME MODEL: llama.cpp's llama-bench on MODEL, where
# LMSTREAM_PEER_LLAMA_BENCH names one built for this GPU (built elsewhere:
# nothing here builds it).
peer() {
  [ -n "${LMSTREAM_PEER_LLAMA_BENCH:-}" ] || return 0
  step "$1" 300 "$LMSTREAM_PEER_LLAMA_BENCH" -m "$2" -ngl 99 -fa 0,1 -p 512 -n 128 -r 5
}
m30="$log/model-30-layers.gguf"
if phase bench || phase adaserve; then
  "$bundle/trim" -layers 30 "$LMSTREAM_TEST_MODEL" "$m30" || status=1
fi

if phase verify; then
  for t in "$bundle"/*.test; do
    [ -e "$t" ] || continue
    step "$(basename "$t")" 540 "$t" -test.v -test.count=1 -test.timeout=8m
  done
  # Through the C ABI: the conformance vectors (the replay backend) and a
  # stream from the model on the GPU, with the library built elsewhere.
  if ls "$bundle"/liblmstream.so.* >/dev/null 2>&1; then
    LD_LIBRARY_PATH="$bundle" step conformance 120 "$bundle/conformance" tests/conformance
    step stream 120 "$bundle/stream" --backend cuda --model "$LMSTREAM_TEST_MODEL" "What is the capital of France?"
    grep -q '^\[length\|^\[stop' "$log/stream.txt" || status=1
  fi
fi

if phase bench; then
  LMSTREAM_GPU_BENCH=1 step bench 240 "$bundle/cuda.test" -test.run '^TestGPUBench$' -test.v
  LMSTREAM_GPU_BENCH=1 LMSTREAM_TEST_MODEL="$m30" step bench30 240 "$bundle/cuda.test" -test.run '^TestGPUBench$' -test.v
  peer peer30 "$m30"
fi

if phase shapes; then
  for skel in "$bundle"/*.skel.gguf; do
    [ -e "$skel" ] || continue
    name=$(basename "$skel" .skel.gguf)
    m="$log/$name-shaped.gguf"
    step "fill-$name" 120 "$bundle/shape" -fill -vocab "$bundle/${name%-*}.vocab.gguf" "$skel" "$m"
    LMSTREAM_GPU_BENCH=1 LMSTREAM_TEST_MODEL="$m" step "bench-$name" 300 "$bundle/cuda.test" -test.run '^TestGPUBench$' -test.v
    peer "peer-$name" "$m"
    rm -f "$m"
  done
fi

if phase adaserve; then
  # The paper's setting: many requests at once on a device where a
  # verify pass of tens of tokens costs about one decode step. Real
  # weights (the bundle's 4 real layers, repeated to the default model's
  # 30), the n-gram drafter, so acceptance is the model's own.
  step adaserve 420 "$bundle/lmsadaserve" -engine -backend cuda -model "$m30" -prompts core/engine/testdata \
    -out "$log/adaserve" -slots 16 -requests 40 -max-tokens 128 -loads 0.5,1,1.5,2 \
    -policies adaserve,specinfer,equal_greedy,global_greedy,incremental,sarathi,vllm
fi
rm -f "$m30"

echo "== summary"
grep -hE '^(--- FAIL|--- PASS|--- SKIP|FAIL|ok|PASS)' "$log"/*.test.txt 2>/dev/null
grep -h '^== .*exit status' "$log"/*.txt 2>/dev/null
exit $status
