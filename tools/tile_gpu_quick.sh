#!/usr/bin/env bash
# On a GPU machine: builds kiln, runs the tile model's GPU tests, then times the tile layernorm
# (bench_tile_probe: wall time of synchronized calls, device events around calls, the host's part)
# and reads each kernel's duration and throughput under Nsight Compute.
# Usage: tools/tile_gpu_quick.sh [build dir] [test filter]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
FILTER=${2:-TileCuda*}
OUT=${OUT:-$BUILD/quick}
mkdir -p "$OUT"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/$BUILD/cache}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
cmake --build "$BUILD" -j "$(nproc)" --target kiln_tests bench_tile_probe 2>&1 | grep -E "error|warning"
"$BUILD"/tests/kiln_tests --gtest_filter="$FILTER" > "$OUT/tests.log" 2>&1
grep -E "^\[  (FAILED|PASSED) |Failure|rror" "$OUT/tests.log" | head -30
P="$BUILD/bench/bench_tile_probe"
for shape in "32768 768 30 12 22" "8192 4096 30 8 16"; do "$P" $shape; done | tee "$OUT/probe.txt"
command -v ncu >/dev/null || exit 0
ncu --clock-control none --kernel-name kiln_tile_main --launch-skip 2 --launch-count 4 --metrics \
  gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_shared_mem \
  "$P" 32768 768 3 > "$OUT/ncu_metrics.txt" 2>&1
grep -E "\(|duration|dram__|inst_executed|issue_active|occupancy" "$OUT/ncu_metrics.txt" | grep -v "==PROF=="
