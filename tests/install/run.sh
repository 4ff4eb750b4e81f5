#!/usr/bin/env bash
# Installs kiln from the build tree into a temporary prefix, then builds and runs a separate
# project against it with find_package(kiln). Usage: run.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$work/app" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/app" -j 2 >/dev/null
KILN_CACHE_DIR="$work/cache" "$work/app/app"
