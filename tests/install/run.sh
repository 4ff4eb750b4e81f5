#!/usr/bin/env bash
# kiln as a dependency of another CMake project, both ways:
# 1. installed from the build tree into a prefix (with the `kiln` tool), found with find_package(kiln);
# 2. its source tree added with add_subdirectory.
# Each builds and runs the consumer app. The second compiles one of kiln's own sources and the
# embedded tile headers in the subproject, then links the app against the library the build tree
# already has (copied to where the subproject would build it; make's <target>/fast skips rebuilding
# it): building all of libkiln again took 6-7 minutes on 2 cores.
# Usage: run.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export KILN_CACHE_DIR="$work/cache"
step() { echo "[$(date +%T)] $*"; }

step "install into a prefix"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
"$work/prefix/bin/kiln" info >/dev/null
step "find_package consumer"
cmake -S "$src/tests/install/consumer" -B "$work/app" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/app" -j 2 >/dev/null
"$work/app/app"
echo "find_package consumer: ok"

step "add_subdirectory consumer"
cmake -G "Unix Makefiles" -S "$src/tests/install/consumer" -B "$work/sub" -DKILN_SOURCE_DIR="$src" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$work/sub/kiln" -s src/ir/settings.cpp.o generated/tile_embedded.cpp.o >/dev/null
lib=$(cat "$work/sub/kiln_library.txt")
mkdir -p "$(dirname "$lib")"
cp "$(find "$work/prefix" -name "$(basename "$lib")" | head -n 1)" "$lib"
make -C "$work/sub" -s app/fast >/dev/null
"$work/sub/app"
echo "add_subdirectory consumer: ok"
