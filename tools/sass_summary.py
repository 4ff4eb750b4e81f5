"""Summarizes Nsight Compute's SASS source page (ncu -i REPORT --page source --csv --print-source
sass): per kernel in the file, executed warp instructions by opcode, and the instructions with the
most executions and the most stall samples. Usage: python3 tools/sass_summary.py FILE.csv"""
import collections, csv, re, sys


def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return 0.0


def kernels(path):
    rows, header = [], None
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if "Address" in r and "Source" in r:
                if header and rows:
                    yield header, rows
                header, rows = r, []
            elif header and len(r) == len(header):
                rows.append(dict(zip(header, r)))
    if header and rows:
        yield header, rows


def col(header, *names):
    for n in names:
        for h in header:
            if h.startswith(n):
                return h
    return None


for k, (header, rows) in enumerate(kernels(sys.argv[1])):
    ie = col(header, "Instructions Executed", "Warp Instructions Executed")
    st = col(header, "Warp Stall Sampling (All")
    print(f"== kernel {k}: {len(rows)} SASS instructions; columns: {ie!r}, {st!r}")
    if not ie:
        print(header)
        continue
    total = sum(num(r[ie]) for r in rows)
    stalls = sum(num(r[st]) for r in rows) if st else 0
    by_op = collections.Counter()
    for r in rows:
        m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_.]+)", r["Source"])
        by_op[m.group(2).split(".")[0] if m else "?"] += num(r[ie])
    print(f"warp instructions executed {total:.4g}, stall samples {stalls:.4g}")
    print("by opcode: " + ", ".join(f"{o} {100 * n / total:.1f}%" for o, n in by_op.most_common(24)))
    for key, name in ((ie, "executions"), (st, "stall samples")):
        if not key:
            continue
        print(f"-- top 40 by {name}")
        for r in sorted(rows, key=lambda r: -num(r[key]))[:40]:
            print(f"{r['Address']:>8} {num(r[ie]):>10.4g} {num(r[st]) if st else 0:>8.4g}  {r['Source'][:90]}")
