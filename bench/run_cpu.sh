#!/usr/bin/env bash
# CPU benchmarks of kiln next to PyTorch CPU (when python3 can import torch), same thread count.
# Usage: bench/run_cpu.sh [threads] [build dir]
set -euo pipefail
threads=${1:-$(nproc)}
build=${2:-build}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
KILN_THREADS=$threads "$build/bench/bench_c2_conv" | tee -a "$out"
KILN_THREADS=$threads "$build/bench/bench_c4_mlp" | tee -a "$out"
KILN_THREADS=$threads "$build/bench/bench_c5_gpt" | tee -a "$out"
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import torch" 2>/dev/null; then py=$p; break; fi
done
if [ -n "$py" ]; then
  "$py" "$here/torch_cpu.py" "$threads" | tee -a "$out"
else
  echo "PyTorch not installed (Debian: apt-get install python3-torch): kiln numbers only"
fi
python3 - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        rows.setdefault(r["workload"], {})["torch" if r["impl"].startswith("torch") else "kiln"] = r["ms"]
print(f"\n{'workload':36} {'kiln ms':>10} {'torch ms':>10} {'torch/kiln':>11}")
for w, r in rows.items():
    k, t = r.get("kiln"), r.get("torch")
    ratio = f"{t / k:10.2f}x" if k and t else "-"
    print(f"{w:36} {k if k else '-':>10} {t if t else '-':>10} {ratio:>11}")
PY
