#!/usr/bin/env bash
# A/B timing of two builds of the CUDA backend on one GPU: the benchmark
# (TestGPUBench, 30 layers: the bundle model's layers repeated) of a new
# and a baseline test binary, alternated so that a drift of the card or
# the machine falls on both, then the figures that decide a change side by
# side. Build the baseline with `make gpu-baseline REV=<commit>`.
#
#   tests/gpu/ab.sh [new.test] [base.test] [rounds] [log-dir]
set -u
new=${1:-build/gpu/cuda.test}
base=${2:-build/gpu-base/cuda.test}
rounds=${3:-2}
log=${4:-build/gpu-ab}
mkdir -p "$log"
export LMSTREAM_TEST_MODEL=${LMSTREAM_TEST_MODEL:-build/gpu/model.gguf}
for r in $(seq 1 "$rounds"); do
  for side in new base; do
    bin=$new
    [ "$side" = base ] && bin=$base
    LMSTREAM_GPU_BENCH=1 LMSTREAM_BENCH_LAYERS=${LMSTREAM_BENCH_LAYERS:-30} LMSTREAM_CACHE_DIR="$log/cubin-$side" \
      "$bin" -test.run '^TestGPUBench$' -test.v > "$log/$side-$r.txt" 2>&1 || echo "$side round $r failed: see $log/$side-$r.txt"
  done
done
# One line a run: decode (graphs, dependent launch, argmax) tok/s, T(1)
# and T(64) at ctx 256 with the argmax (ms), prefill pp512 tok/s.
printf '%-10s %10s %8s %8s %10s\n' run decode T1 T64 pp512
for f in "$log"/new-*.txt "$log"/base-*.txt; do
  dec=$(sed -n 's/^decode tg128 (graphs + dependent launch, argmax): \([0-9]*\) tok\/s.*/\1/p' "$f")
  t1=$(sed -n 's/.*N=1 .*, \([0-9.]*\) ms with the argmax/\1/p' "$f")
  t64=$(sed -n 's/^  N=64 .* argmax \([0-9.]*\) ms.*/\1/p' "$f")
  pp=$(sed -n 's/^prefill pp512: \([0-9]*\) tok\/s.*/\1/p' "$f")
  printf '%-10s %10s %8s %8s %10s\n' "$(basename "$f" .txt)" "$dec" "$t1" "$t64" "$pp"
done
