#!/usr/bin/env bash
# Per-kernel GPU time under Nsight Compute, for one build or two side by
# side: the passes TestGPUProfilePasses launches one kernel at a time (a
# 256-token prefill, then at ctx 256 two one-token passes and two 64-token
# passes, over the bundle model's layers), each kernel timed alone with cold
# caches and the clocks left alone (--clock-control none). It prints a line
# a launch (the kernel, its grid, its µs in each build: the k-th launch of
# a kernel in one build beside the k-th in the other, so the two line up
# where a grid changed), then each kernel's total. Eager timings
# (TestGPUBench's tables) carry event overhead; these do not, and they say
# which kernel of a pass a change moved. NCU_ARGS adds ncu options (say
# --launch-skip 84 --launch-count 40: the first 64-token pass of the
# 4-layer bundle model alone).
#
#   tests/gpu/ncu.sh [new.test] [base.test] [log-dir]
set -u
new=${1:-build/gpu/cuda.test}
base=${2:-}
log=${3:-build/gpu-ncu}
mkdir -p "$log"
export LMSTREAM_TEST_MODEL=${LMSTREAM_TEST_MODEL:-build/gpu/model.gguf} LMSTREAM_GPU_PROFILE=1
status=0
# profile SIDE BINARY writes SIDE.txt (ncu's report) and SIDE.kernels: a
# line a launch, in launch order: name, grid x block, µs.
profile() {
  # shellcheck disable=SC2086 # NCU_ARGS is a list of options
  LMSTREAM_CACHE_DIR="$log/cubin-$1" ncu --clock-control none --section SpeedOfLight ${NCU_ARGS:-} \
    "$2" -test.run '^TestGPUProfilePasses$' -test.v > "$log/$1.txt" 2>&1 ||
    { echo "ncu on $2 failed: see $log/$1.txt"; status=1; }
  awk '
    /^  [A-Za-z_0-9]+ \(/ { name = $1; shape = $0; sub(/^  [A-Za-z_0-9]+ /, "", shape); sub(/, Context.*/, "", shape); gsub(/ /, "", shape) }
    $1 == "Duration" { d = $NF; if ($(NF-1) == "ms") d *= 1000; if ($(NF-1) == "ns") d /= 1000; print name, shape, d }
  ' "$log/$1.txt" > "$log/$1.kernels"
}
# table NEW [BASE]: the launches side by side, then the totals a kernel.
table() {
  awk -v base="${2:-}" '
    BEGIN {
      if (base != "") while ((getline l < base) > 0) { split(l, f, " "); bn[f[1]]++; b[f[1] "#" bn[f[1]]] = f[3]; bt[f[1]] += f[3] }
      printf "%-24s %-26s %10s %10s\n", "kernel", "grid (new)", "new µs", (base != "") ? "base µs" : ""
    }
    { n[$1]++; k = $1 "#" n[$1]; t[$1] += $3; if (!($1 in seen)) { seen[$1] = 1; order[++m] = $1 }
      printf "%-24s %-26s %10.2f %10s\n", $1, $2, $3, (k in b) ? sprintf("%.2f", b[k]) : "" }
    END {
      printf "\n%-24s %-26s %10s %10s\n", "kernel", "launches (new)", "new µs", (base != "") ? "base µs" : ""
      for (i = 1; i <= m; i++) printf "%-24s %-26d %10.2f %10s\n", order[i], n[order[i]], t[order[i]], (order[i] in bt) ? sprintf("%.2f", bt[order[i]]) : ""
      for (x in bt) if (!(x in seen)) printf "%-24s %-26s %10s %10.2f\n", x, "(base only)", "", bt[x]
    }' "$1"
}
profile new "$new"
if [ -n "$base" ]; then
  profile base "$base"
  table "$log/new.kernels" "$log/base.kernels"
else
  table "$log/new.kernels"
fi
exit $status
