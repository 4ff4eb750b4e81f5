#!/usr/bin/env bash
# Builds kiln, its tests and the kernels it compiles with sanitizers, in a build folder of their own,
# and runs the tests; any sanitizer report fails the run. `make sanitize`, `make sanitize-thread`, CI.
# Usage: tools/sanitize.sh address|thread [--ci]
#   address: ASan+UBSan (LeakSanitizer on), every test but the install check (build-sanitize)
#   thread:  TSan, the tests that run threads: pool, data loader prefetch, shared cache (build-sanitize-thread)
#   --ci:    ASan+UBSan on a subset (build-sanitize-ci, a unity build): the library and the runtime,
#            data and ir tests
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
ci=${2:-}
jobs=${JOBS:-$(nproc)}

# the tests that run several threads (run under TSan) and the CI subset (under ASan+UBSan)
thread_tests='Concurrent.*:DataLoader.*:ProgramCache.*:Jit.*:Smoke.*:Fusion.*:TileEltwise.*:TileStoreSync.*:TileSemaphore.*:TileMulticast.*:TileWorkSplit.*'
ci_sources='runtime/|data/|ir/|error/'

case $mode in
  address) sanitizers=address,undefined build=${SANITIZE_BUILD:-build-sanitize} ;;
  thread) sanitizers=thread build=${SANITIZE_BUILD:-build-sanitize-thread} ;;
  *) echo "usage: $0 address|thread [--ci]" >&2; exit 2 ;;
esac
cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=$sanitizers -DKILN_BUILD_BENCH=OFF)
if [ "$ci" = --ci ]; then
  build=${SANITIZE_BUILD:-build-sanitize-ci}
  # unity build: sources compiled in batches, a third less time than one by one
  cmake_args+=(-DKILN_BUILD_EXAMPLES=ON "-DKILN_TESTS_ONLY=$ci_sources" -DCMAKE_UNITY_BUILD=ON)
fi

cmake -S . -B "$build" "${cmake_args[@]}" >/dev/null
targets=(kiln_tests)
targets+=(dot_product)                             # cache and introspection tests run it
[ "$mode$ci" = address ] && targets=(all)           # make sanitize runs the examples and tools too
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# any report ends the process with an error; kernels compiled at run time carry the same flags
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
case $build in /*) export KILN_CACHE_DIR=$build/test_cache ;; *) export KILN_CACHE_DIR=$PWD/$build/test_cache ;; esac
cd "$build"
if [ "$mode" = thread ]; then
  # TSan needs a non-randomized address space on kernels with high mmap entropy
  setarch "$(uname -m)" -R tests/kiln_tests --gtest_filter="$thread_tests" --gtest_brief=1
elif [ "$ci" = --ci ]; then
  tests/kiln_tests --gtest_brief=1  # one process: kernels compiled once, a report stops it
else
  # the unit tests in one process (one ctest process per test takes ten times longer), then the
  # examples and the kiln tool
  tests/kiln_tests --gtest_brief=1
  ctest --output-on-failure -j "$jobs" -R '^(example|tool)\.'
fi
