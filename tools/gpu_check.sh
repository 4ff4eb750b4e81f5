#!/usr/bin/env bash
# Builds kiln on a machine with an NVIDIA GPU, runs the CUDA tests, the whole op suite on the GPU
# (KILN_DEVICE=cuda), compute-sanitizer on the CUDA tests, and the GPU benchmarks next to PyTorch;
# prints a table last. Usage: tools/gpu_check.sh [build dir] [workloads...]
#   KILN_GTEST_SOURCE_DIR: GoogleTest sources, where the libgtest-dev package is missing
#   SKIP_SUITE=1, SKIP_SANITIZER=1, SKIP_BENCH=1, SKIP_TORCH=1: leave a part out
#   SANITIZER_FILTER: the tests compute-sanitizer runs (default: every CUDA test);
#   SANITIZER_TOOLS: its tools (default: memcheck racecheck synccheck initcheck)
#   FUZZ_GPU=N, FUZZ_CPU=N: N random graphs of the differential fuzzer on the GPU / on the CPU
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
shift || true
case "$BUILD" in /*) ABS=$BUILD ;; *) ABS=$PWD/$BUILD ;; esac
OUT=${OUT:-$ABS/gpu_check}
mkdir -p "$OUT"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$ABS/cache}
JOBS=$(nproc)
status=0
step() { echo; echo "=== $*"; }

step build
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release ${KILN_GTEST_SOURCE_DIR:+-DKILN_GTEST_SOURCE_DIR=$KILN_GTEST_SOURCE_DIR} >/dev/null || exit 1
cmake --build "$BUILD" -j "$JOBS" --target kiln_tests kiln_cli kiln_fuzz bench_gpu bench_gpt2_gpu 2>&1 | grep -E "error|warning" ; true
"$BUILD"/tools/kiln info || status=1

step "CUDA tests"
"$BUILD"/tests/kiln_tests --gtest_filter='Cuda*:RenderCuda*:CuBLASLt*:TileCuda*' 2>&1 | tee "$OUT/cuda_tests.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error" ; test "${PIPESTATUS[0]}" = 0 || status=1

if [ -z "${SKIP_SUITE:-}" ]; then
  step "op suite on the GPU (KILN_DEVICE=cuda)"
  # tests of the CPU backend itself (C source, the C compiler and its cache, the tile model's
  # CPU-only checks) do not apply
  # (and the tile tests whose CPU-sized blocks exceed a GPU block's shared memory, the CPU backend's
  # program cache and error messages, and the tile layernorm op, which applies to CPU tensors)
  cpu_only='^install|^viz\.|TileWatchdog\.|TileLimits\.|^tool\.|^example\.|^clang\.|^avx2\.|ProgramCache\.|CompilerCheck\.|Introspection\.(DotProduct|DebugLevels|Validate)|Errors\.(NoCompilerFound|KernelFailsToCompile)|TileErrors\.|TileBroadcast\.|LayerNormTile\.|TileEltwise\.SecondLaunchWithNewArgsCompilesNothing|TileCompute\.ColumnSumsAcrossBlocks'
  (cd "$BUILD" && KILN_DEVICE=cuda ctest -j "$JOBS" --timeout 300 -E "${SUITE_EXCLUDE:-$cpu_only}" \
     --output-on-failure > "$OUT/suite.log" 2>&1); rc=$?
  grep -E "tests passed|Failed|\*\*\*" "$OUT/suite.log" | tail -60; [ $rc = 0 ] || status=1
fi

if [ -z "${SKIP_SANITIZER:-}" ] && command -v compute-sanitizer >/dev/null; then
  # tile programs run many times slower under the tools: a longer no-progress limit
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}; do
    step "compute-sanitizer --tool $tool"
    filter=${SANITIZER_FILTER:-Cuda*:RenderCuda*:CuBLASLt*:TileCuda*}
    # racecheck carries the shared-memory state of a cluster launch's distributed stores into later
    # launches of the process and reports them against those kernels' reads: one tile test per process
    if [ $tool = racecheck ] && [ -z "${SANITIZER_FILTER:-}" ]; then
      filter=Cuda*:RenderCuda*:CuBLASLt*:TileCudaCompile*
      rc=0
      for t in $("$BUILD"/tests/kiln_tests --gtest_list_tests --gtest_filter='TileCuda.*:TileCuda/*' |
                 awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
        KILN_TILE_TIMEOUT_MS=120000 compute-sanitizer --tool racecheck --error-exitcode 9 "$BUILD"/tests/kiln_tests \
          --gtest_filter="$t" >> "$OUT/sanitizer_racecheck_tile.log" 2>&1 || { rc=$?; echo "racecheck: $t"; }
      done
      echo "compute-sanitizer racecheck, tile tests one per process: exit $rc"; [ $rc = 0 ] || status=1
    fi
    KILN_TILE_TIMEOUT_MS=120000 compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD"/tests/kiln_tests \
      --gtest_filter="$filter" > "$OUT/sanitizer_$tool.log" 2>&1
    rc=$?; tail -3 "$OUT/sanitizer_$tool.log"; echo "compute-sanitizer $tool exit $rc"; [ $rc = 0 ] || status=1
  done
fi

for dev in gpu cpu; do
  var=FUZZ_${dev^^}; n=${!var:-}
  [ -n "$n" ] || continue
  step "differential fuzzer, $n graphs on the $dev"
  flag=$([ $dev = gpu ] && echo "--device cuda" || echo "--device cpu")
  "$BUILD"/tools/kiln_fuzz $flag --seed "${FUZZ_SEED:-1}" --count "$n" --jobs "$JOBS" > "$OUT/fuzz_$dev.log" 2>&1
  rc=$?; [ $rc = 0 ] || { head -c 6000 "$OUT/fuzz_$dev.log"; status=1; }
  tail -1 "$OUT/fuzz_$dev.log"
done

if [ -z "${SKIP_BENCH:-}" ]; then
  step "benchmarks"
  "$BUILD"/bench/bench_gpu "$@" > "$OUT/kiln.jsonl" 2> "$OUT/bench_gpu.err"; rc=$?
  tail -20 "$OUT/bench_gpu.err"; [ $rc = 0 ] || status=1
  if [ -z "${SKIP_TORCH:-}" ]; then
    python3 bench/torch_gpu.py "$@" > "$OUT/torch.jsonl" 2> "$OUT/torch.err" || { tail -5 "$OUT/torch.err"; status=1; }
  else
    : > "$OUT/torch.jsonl"
  fi
  if [ -n "${GPT:-}" ]; then  # GPT="B T steps jit [f32|bf16]": GPT-2 124M training steps
    step "GPT-2 124M training"
    KILN_TF32=1 "$BUILD"/bench/bench_gpt2_gpu $GPT >> "$OUT/kiln.jsonl" 2> "$OUT/gpt2.err"; rc=$?
    grep -E "step|error|Error" "$OUT/gpt2.err" | tail -12; [ $rc = 0 ] || status=1
  fi
  step "table"
  python3 bench/gpu_table.py "$OUT/kiln.jsonl" "$OUT/torch.jsonl"
fi
exit $status
