#!/usr/bin/env bash
# The GPU check: one invocation on a machine with an NVIDIA GPU verifies the
# CUDA backend and measures it. It runs test binaries built elsewhere (no Go
# toolchain needed there) with LMSTREAM_REQUIRE_GPU=1, so nothing passes by
# skipping. Build them first with `make gpu-bundle` (on any machine).
# LMSTREAM_PEER_LLAMA_BENCH=path/to/llama-bench adds llama.cpp's figures on
# the same file.
#
#   tests/gpu/check.sh [bundle-dir] [log-dir]
set -u
bundle=${1:-build/gpu}
log=${2:-build/gpu-log}
mkdir -p "$log"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
  ldconfig -p | grep -E 'libcuda\.so|libnvrtc' 2>&1
  ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null
} | tee "$log/env.txt"
export LMSTREAM_REQUIRE_GPU=1 LMSTREAM_REQUIRE_NVRTC=1
export LMSTREAM_TEST_MODEL=${LMSTREAM_TEST_MODEL:-$bundle/model.gguf}
export LMSTREAM_CACHE_DIR=${LMSTREAM_CACHE_DIR:-$log/cubin}
status=0
for t in "$bundle"/*.test; do
  [ -e "$t" ] || continue
  echo "== $t"
  "$t" -test.v -test.count=1 -test.timeout=8m 2>&1 | tee "$log/$(basename "$t").log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
# Through the C ABI: the conformance vectors (the replay backend) and a
# stream from the model on the GPU, with the library built elsewhere.
if ls "$bundle"/liblmstream.so.* >/dev/null 2>&1; then
  echo "== C ABI: conformance vectors"
  LD_LIBRARY_PATH="$bundle" "$bundle/conformance" tests/conformance 2>&1 | tee "$log/conformance.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "== C ABI: a stream with \"backend\": \"cuda\""
  "$bundle/stream" --backend cuda --model "$LMSTREAM_TEST_MODEL" "What is the capital of France?" 2>&1 | tee "$log/stream.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] && grep -q '^\[length\|^\[stop' "$log/stream.txt" || status=1
fi
if [ -e "$bundle/cuda.test" ]; then
  echo "== benchmark"
  LMSTREAM_GPU_BENCH=1 "$bundle/cuda.test" -test.run '^TestGPUBench$' -test.v 2>&1 | tee "$log/bench.txt"
  echo "== benchmark, 30 layers (the 4 real ones repeated)"
  LMSTREAM_GPU_BENCH=1 LMSTREAM_BENCH_LAYERS=30 "$bundle/cuda.test" -test.run '^TestGPUBench$' -test.v 2>&1 | tee "$log/bench30.txt"
fi
# The peer, where LMSTREAM_PEER_LLAMA_BENCH names a llama.cpp llama-bench
# built for this GPU (built elsewhere: nothing here builds it), on the
# same 30-layer file the benchmark above times.
if [ -n "${LMSTREAM_PEER_LLAMA_BENCH:-}" ] && [ -x "$bundle/trim" ]; then
  echo "== peer: llama.cpp llama-bench, 30 layers"
  m30="$log/model-30-layers.gguf"
  "$bundle/trim" -layers 30 "$LMSTREAM_TEST_MODEL" "$m30" &&
    "$LMSTREAM_PEER_LLAMA_BENCH" -m "$m30" -ngl 99 -fa 0,1 -p 512 -n 128 -r 5 2>&1 | tee "$log/peer.txt"
  rm -f "$m30"
fi
echo "== summary"
grep -hE '^(--- FAIL|--- PASS|--- SKIP|FAIL|ok|PASS)' "$log"/*.test.log 2>/dev/null
exit $status
