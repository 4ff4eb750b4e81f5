#!/usr/bin/env bash
# Checks that kiln's source layers depend only downward: a file in src/<layer>/ includes only the
# folders its row below allows, the CUDA backends' headers are included only by CUDA code (the rest
# reaches a device through runtime/backend.h), and CUDA API names appear only in the CUDA backends.
# Usage: tools/check_layers.sh [ROOT] (ROOT defaults to the repository) or --selftest.
# Prints one `file:line: <layer> must not include <other>` per violation; exits 1 on any.
set -euo pipefail

# layer     may include (folders of src/, lowest first; "kiln" = every public header in include/kiln;
#           the base headers below are open to all)
ALLOWED='
ir          ir
schedule    schedule ir
codegen     codegen ir
runtime     runtime schedule codegen ir
engine      engine runtime schedule codegen ir
frontend    frontend engine runtime schedule codegen ir kiln
tile        tile frontend engine runtime schedule codegen ir kiln
optim       optim tile frontend engine runtime schedule codegen ir kiln
io          io tile frontend engine runtime schedule codegen ir kiln
data        data tile frontend engine runtime schedule codegen ir kiln
nn          nn data io tile frontend engine runtime schedule codegen ir kiln
'
# public headers that pull in nothing above ir: dtypes, errors, settings, devices
BASE_HEADERS='kiln/dtype.h kiln/error.h kiln/debug.h kiln/device.h'
# the only places that may call the CUDA driver, runtime, NVRTC or cuBLAS(Lt)
CUDA_PLACES='^(src/runtime/cuda/|src/tile/cuda/|include/kiln/tile/cuda)'
# backend folders whose headers only the files under the given prefix may include: "<folder> <prefix>"
PRIVATE_HEADERS='
runtime/cuda/ src/runtime/cuda/ src/tile/cuda/
tile/cuda/    src/tile/
'

check() {
  local root=$1
  cd "$root"
  local status=0
  # includes: "<file>:<line>:<included path>" for each #include "..." under src/
  grep -rnE --include='*.h' --include='*.cpp' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' src |
    sed -E 's/^([^:]+):([0-9]+):[^"]*"([^"]+)".*/\1 \2 \3/' |
    awk -v allowed="$ALLOWED" -v base="$BASE_HEADERS" -v private="$PRIVATE_HEADERS" '
      BEGIN {
        np = split(private, prow, "\n")
        for (r = 1; r <= np; r++) {
          k = split(prow[r], f, /[ \t]+/)
          if (k < 2 || f[1] == "") continue
          folders[f[1]] = k - 1
          for (j = 2; j <= k; j++) users[f[1], j - 1] = f[j]
        }
        n = split(allowed, rows, "\n")
        for (r = 1; r <= n; r++) {
          k = split(rows[r], f, /[ \t]+/)
          if (k < 1 || f[1] == "") continue
          known[f[1]] = 1
          for (j = 1; j <= k; j++) ok[f[1], f[j]] = 1
        }
        split(base, b, " ")
        for (j in b) open[b[j]] = 1
      }
      {
        file = $1; line = $2; inc = $3
        split(file, p, "/"); layer = p[2]
        if (!(layer in known)) { print file ":" line ": layer " layer " has no row in the table"; bad = 1; next }
        for (d in folders)
          if (index(inc, d) == 1) {
            mine = 0
            for (j = 1; j <= folders[d]; j++) if (index(file, users[d, j]) == 1) mine = 1
            if (!mine) { print file ":" line ": " inc " is private to the CUDA backends (use runtime/backend.h)"; bad = 1 }
          }
        if (index(inc, "/") == 0 || (inc in open)) next  # a header beside the file, or a base header
        split(inc, q, "/"); other = q[1]
        if (!ok[layer, other]) { print file ":" line ": " layer " must not include " inc; bad = 1 }
      }
      END { exit bad }' || status=1
  # CUDA API names (calls, types' headers) outside the CUDA backends; comments and strings ignored
  local f
  for f in $(grep -rlE --include='*.h' --include='*.cpp' '\b(cu|cuda|nvrtc|cublas)[A-Z]|include[[:space:]]*<(cuda|nvrtc|cublas)' src include); do
    [[ $f =~ $CUDA_PLACES ]] && continue
    awk -v file="$f" '
      {
        s = $0
        gsub(/"([^"\\]|\\.)*"/, "\"\"", s)
        sub(/\/\/.*/, "", s)
        if (match(s, /(^|[^A-Za-z0-9_])(cu|cuda|nvrtc|cublas)[A-Z][A-Za-z0-9_]*[ \t]*\(/) ||
            match($0, /#[ \t]*include[ \t]*<(cuda|nvrtc|cublas)[A-Za-z_]*\.h>/)) {
          name = substr(s, RSTART, RLENGTH); gsub(/^[^A-Za-z_#]|[ \t(]+$/, "", name)
          if (name == "") name = $0
          split(file, p, "/")
          print file ":" FNR ": " (p[1] == "src" ? p[2] : p[1]) " must not use the CUDA API (" name ")"
          bad = 1
        }
      }
      END { exit bad }' "$f" || status=1
  done
  return $status
}

selftest() {
  local here tmp
  here=$(cd "$(dirname "$0")/.." && pwd)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  cp -r "$here/src" "$here/include" "$tmp/"
  check "$tmp" > "$tmp/clean.txt" || { echo "selftest: the tree itself fails:"; cat "$tmp/clean.txt"; return 1; }
  printf '#include "runtime/buffer.h"\n' >> "$tmp/src/ir/node.h"
  printf 'void f() { cuEventCreate(0, 0); }  // cuNothing(\n' >> "$tmp/src/frontend/graph.cpp"
  printf '#include "runtime/cuda/context.h"\n' >> "$tmp/src/engine/realize.cpp"
  printf '#include "engine/realize.h"\n' >> "$tmp/src/runtime/buffer.cpp"
  if check "$tmp" > "$tmp/bad.txt"; then echo "selftest: violations were not caught"; return 1; fi
  local want
  for want in "src/ir/node.h:[0-9]+: ir must not include runtime/buffer.h" \
              "src/frontend/graph.cpp:[0-9]+: frontend must not use the CUDA API \(cuEventCreate\)" \
              "src/engine/realize.cpp:[0-9]+: runtime/cuda/context.h is private to the CUDA backends \(use runtime/backend.h\)" \
              "src/runtime/buffer.cpp:[0-9]+: runtime must not include engine/realize.h"; do
    grep -qE "^$want\$" "$tmp/bad.txt" || { echo "selftest: expected '$want' in:"; cat "$tmp/bad.txt"; return 1; }
  done
  [[ $(wc -l < "$tmp/bad.txt") -eq 4 ]] || { echo "selftest: expected 4 lines:"; cat "$tmp/bad.txt"; return 1; }
  echo "check_layers selftest: ok"
}

if [[ ${1:-} == --selftest ]]; then
  selftest
else
  check "${1:-$(dirname "$0")/..}"
fi
