"""Merges bench_gpu's and torch_gpu.py's JSON lines into one table: per workload, ms, GB/s or
TFLOP/s, the ratio of the floor to the time (1.0 = at the floor), and kiln's speedup over PyTorch
eager and torch.compile. The floor uses the copy bandwidth measured in the same run.
Usage: python3 bench/gpu_table.py kiln.jsonl torch.jsonl"""
import json, sys

BF16_PEAK_TFLOPS = 787.0  # cuBLAS bf16 GEMM measured on this GPU family (ANCHOR_RESULTS.md)


def load(path):
    out = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{") and '"impl"' in line:
            out.append(json.loads(line))
    return out


def main():
    rows = load(sys.argv[1]) + load(sys.argv[2])
    # kiln's one-op attention ("<name>_sdpa") is compared with torch's SDPA row of the same workload
    names = {r["name"] for r in rows}
    rows += [dict(r, name=r["name"] + "_sdpa") for r in rows
             if r["impl"] == "torch-sdpa" and r["name"] + "_sdpa" in names]
    copy = [r for r in rows if r["workload"] == "copy"]
    bw = max(r["GB/s"] for r in copy) if copy else 3000.0
    names = []
    for r in rows:
        if r["name"] not in names and r["workload"] != "copy":
            names.append(r["name"])
    print(f"copy bandwidth: {bw:.0f} GB/s (floor = bytes / this, or FLOPs / {BF16_PEAK_TFLOPS} TFLOP/s)")
    print(f"{'workload':4} {'name':40} {'impl':14} {'ms':>9} {'step ms':>9} {'rate':>12} {'floor/ms':>8} {'vs eager':>8} {'vs compile':>10}")
    for n in names:
        rs = [r for r in rows if r["name"] == n]
        eager = next((r["ms"] for r in rs if r["impl"] in ("torch-eager", "torch-cublas", "torch-sdpa")), None)
        comp = next((r["ms"] for r in rs if r["impl"] == "torch-compile"), None)
        for r in rs:
            if "GB/s" in r:
                rate, floor = f"{r['GB/s']:.0f} GB/s", r["GB/s"] / bw
            elif "TFLOP/s" in r:
                rate, floor = f"{r['TFLOP/s']:.1f} TF/s", r["TFLOP/s"] / BF16_PEAK_TFLOPS
            elif "tok/s" in r:
                rate, floor = f"{r['tok/s']:.0f} tok/s", 0
            else:
                rate, floor = "", 0
            kiln = r["impl"].startswith("kiln")
            ve = f"{eager / r['ms']:.2f}x" if eager and kiln else ""
            vc = f"{comp / r['ms']:.2f}x" if comp and kiln else ""
            step = f"{r['step_ms']:.3f}" if "step_ms" in r else ""
            print(f"{r['workload']:4} {n[:40]:40} {r['impl']:14} {r['ms']:9.3f} {step:>9} {rate:>12} {floor:8.2f} {ve:>8} {vc:>10}")


if __name__ == "__main__":
    main()
