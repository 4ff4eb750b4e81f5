#!/usr/bin/env bash
# kiln as a dependency of another CMake project, both ways:
# 1. installed from the build tree into a prefix, found with find_package(kiln);
# 2. its source tree added with add_subdirectory.
# Each builds and runs the consumer app. Usage: run.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$work/app" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/app" -j 2 >/dev/null
KILN_CACHE_DIR="$work/cache" "$work/app/app"
echo "find_package consumer: ok"
cmake -S "$src/tests/install/consumer" -B "$work/sub" -DKILN_SOURCE_DIR="$src" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/sub" -j 2 --target app >/dev/null
KILN_CACHE_DIR="$work/cache" "$work/sub/app"
echo "add_subdirectory consumer: ok"
