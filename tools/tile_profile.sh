#!/usr/bin/env bash
# Profiles the tile layernorm on a GPU machine: builds the probe, times forward / backward / both
# (wall time of synchronized calls), then Nsight Compute: per-kernel duration and throughput, and a
# per-instruction profile of one forward and one backward (SASS with executed-instruction counts
# and stall samples, summarized by tools/sass_summary.py). Usage: tools/tile_profile.sh [build dir]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$BUILD/profile}
mkdir -p "$OUT"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$PWD/$BUILD/cache}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
cmake --build "$BUILD" -j "$(nproc)" --target bench_tile_probe 2>&1 | grep -E "error|warning"
P="$BUILD/bench/bench_tile_probe"
"$P" 32768 768 30 | tee "$OUT/probe.txt"
"$P" 32768 768 30 | tee -a "$OUT/probe.txt"
command -v ncu >/dev/null || { echo "no ncu"; exit 0; }
# tile launches of the probe: 0 forward, 1-3 forward, 4-6 backward, then forward/backward pairs
NCU="ncu --clock-control none --kernel-name kiln_tile_main"
$NCU --launch-skip 2 --launch-count 4 --metrics \
  gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_shared_mem \
  "$P" 32768 768 3 > "$OUT/ncu_metrics.txt" 2>&1
grep -E "kiln_tile_main|duration|dram__|inst_executed|warps_active|issue_active|registers|occupancy" "$OUT/ncu_metrics.txt"
KILN_CUDA_LINEINFO=1 $NCU --launch-skip 3 --launch-count 2 --set full --import-source no \
  -o "$BUILD/ln" -f "$P" 32768 768 3 > "$OUT/ncu_full.log" 2>&1 || tail -5 "$OUT/ncu_full.log"
ncu -i "$BUILD/ln.ncu-rep" --page source --csv --print-source sass > "$OUT/sass.csv" 2> "$OUT/sass.err" ||
  head -3 "$OUT/sass.err"
python3 tools/sass_summary.py "$OUT/sass.csv" > "$OUT/sass_summary.txt" 2>&1
grep -v "^ " "$OUT/sass_summary.txt" | head -20
ncu -i "$BUILD/ln.ncu-rep" --page details --csv > "$OUT/details.csv" 2>/dev/null
gzip -f "$OUT"/sass.csv
