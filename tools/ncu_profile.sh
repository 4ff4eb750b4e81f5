#!/usr/bin/env bash
# Profiles a program's GPU kernels with Nsight Compute and prints, per kernel name: launches, mean
# time, DRAM bytes moved, achieved DRAM bandwidth, grid and block size, registers and shared memory.
# Usage: tools/ncu_profile.sh [-c launches] program args...   (CSV kept in $NCU_CSV if set)
set -uo pipefail
count=200
if [ "${1:-}" = "-c" ]; then count=$2; shift 2; fi
csv=${NCU_CSV:-$(mktemp)}
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,sm__throughput.avg.pct_of_peak_sustained_elapsed
ncu --clock-control none --launch-count "$count" --metrics "$metrics" --csv --page raw "$@" > "$csv" 2>/dev/null
python3 - "$csv" <<'PY'
import csv, sys, collections, signal
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
r = list(csv.DictReader(rows))
if not r:
    sys.exit("ncu_profile: no kernels profiled")
unit = r[0]
agg = collections.OrderedDict()
def num(x):
    try: return float(x.replace(',', ''))
    except ValueError: return 0.0
for row in r[1:]:
    k = row["Kernel Name"][:60]
    a = agg.setdefault(k, dict(n=0, t=0.0, rd=0.0, wr=0.0, sm=0.0, grid=row["launch__grid_size"], blk=row["launch__block_size"], reg=row["launch__registers_per_thread"], smem=row["launch__shared_mem_per_block_dynamic"]))
    a["n"] += 1
    a["t"] += num(row["gpu__time_duration.sum"])
    a["rd"] += num(row["dram__bytes_read.sum"])
    a["wr"] += num(row["dram__bytes_write.sum"])
    a["sm"] += num(row["sm__throughput.avg.pct_of_peak_sustained_elapsed"])
tu = unit["gpu__time_duration.sum"]; bu = unit["dram__bytes_read.sum"]
scale_t = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}.get(tu, 1.0)
scale_b = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(bu, 1)
print(f"{'ms':>8} {'n':>4} {'MB rd':>8} {'MB wr':>8} {'GB/s':>7} {'SM%':>5} {'grid':>8} {'blk':>5} {'reg':>4} {'smem':>6}  kernel")
for k, a in sorted(agg.items(), key=lambda kv: -kv[1]["t"]):
    n = a["n"]; ms = a["t"] * scale_t / n; rd = a["rd"] * scale_b / n / 1e6; wr = a["wr"] * scale_b / n / 1e6
    print(f"{ms:8.3f} {n:4d} {rd:8.1f} {wr:8.1f} {(rd + wr) / ms if ms else 0:7.0f} {a['sm'] / n:5.1f} {a['grid']:>8} {a['blk']:>5} {a['reg']:>4} {a['smem']:>6}  {k}")
PY
