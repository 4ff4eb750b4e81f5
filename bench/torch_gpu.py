"""PyTorch eager and torch.compile on the GPU workloads that bench_gpu runs, for side-by-side tables.
Prints one JSON line per measurement. Usage: python3 bench/torch_gpu.py [G1 G2 ...]"""
import json, math, os, statistics, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = True
WANT = set(sys.argv[1:])


def on(w):
    return not WANT or w in WANT


def bench(fn, warmup=5, reps=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def report(wid, name, impl, ms, bytes_=None, flops=None, **extra):
    r = {"workload": wid, "name": name, "impl": impl, "ms": round(ms, 4)}
    if bytes_:
        r["GB/s"] = round(bytes_ / ms / 1e6, 1)
    if flops:
        r["TFLOP/s"] = round(flops / ms / 1e9, 2)
    r.update(extra)
    print(json.dumps(r), flush=True)


def both(wid, name, f, args, bytes_=None, flops=None):
    report(wid, name, "torch-eager", bench(lambda: f(*args)), bytes_, flops)
    t0 = time.time(); cf = torch.compile(f); cf(*args); torch.cuda.synchronize(); ct = time.time() - t0
    report(wid, name, "torch-compile", bench(lambda: cf(*args)), bytes_, flops, compile_s=round(ct, 1))


def layernorm(wid, N, C, dt):
    es = torch.finfo(dt).bits // 8
    sfx = f"{N}x{C}_{str(dt)[6:].replace('float32', 'f32').replace('bfloat16', 'bf16')}"
    x = torch.randn(N, C, device=dev, dtype=dt, requires_grad=True)
    w = torch.randn(C, device=dev, dtype=dt, requires_grad=True)
    b = torch.randn(C, device=dev, dtype=dt, requires_grad=True)
    dy = torch.randn(N, C, device=dev, dtype=dt)
    f = lambda x, w, b: F.layer_norm(x, (C,), w, b, 1e-5)
    both(wid[0], "layernorm_fwd_" + sfx, f, (x, w, b), bytes_=2 * N * C * es)
    fb = lambda x, w, b, dy: torch.autograd.grad(F.layer_norm(x, (C,), w, b, 1e-5), (x, w, b), dy)
    both(wid[1], "layernorm_fwdbwd_" + sfx, fb, (x, w, b, dy), bytes_=5 * N * C * es)


def main():
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    if on("copy"):
        n = 1 << 30
        src = torch.empty(n, dtype=torch.uint8, device=dev).random_(); dst = torch.empty_like(src)
        report("copy", "copy_1GiB", "torch", bench(lambda: dst.copy_(src)), bytes_=2 * n)
        del src, dst
    if on("G1"):
        R = C = 8192
        a, b, c = torch.randn(R, C, device=dev), torch.randn(R, C, device=dev), torch.randn(1, C, device=dev)
        both("G1", "eltwise_bcast_8192x8192_f32", lambda a, b, c: a * b + torch.tanh(c), (a, b, c), bytes_=3 * R * C * 4)
        del a, b, c
    if on("G2") or on("G3"):
        layernorm(("G2", "G3"), 32768, 768, torch.float32)
    if on("G4"):
        layernorm(("G4", "G4"), 32768, 768, torch.bfloat16)
        layernorm(("G4", "G4"), 8192, 4096, torch.float32)
    if on("G5"):
        N, V = 8192, 50304
        logits = torch.randn(N, V, device=dev, requires_grad=True); tgt = torch.randint(0, V, (N,), device=dev)
        xent = lambda l, t: torch.autograd.grad(F.cross_entropy(l, t), l)
        both("G5", "xent_fwdbwd_8192x50304_f32", xent, (logits, tgt), bytes_=2 * N * V * 4)
        del logits
    if on("G6"):
        for n in (2048, 8192):
            A = torch.randn(n, n, device=dev, dtype=torch.bfloat16); B = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
            report("G6", f"matmul_{n}_bf16", "torch-cublas", bench(lambda: A @ B, reps=20), flops=2 * n ** 3)
    if on("G7"):
        Bq, H, T, D = 16, 12, 1024, 64
        q, k, v = (torch.randn(Bq, H, T, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
        fl = 4 * Bq * H * T * T * D / 2
        name = "attention_fwd_b16h12t1024d64_bf16"
        report("G7", name, "torch-sdpa", bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)), flops=fl)
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        dy = torch.randn_like(q)

        def sdpa_fwdbwd():
            y = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
            torch.autograd.grad(y, (qg, kg, vg), dy)

        report("G7", "attention_fwdbwd_b16h12t1024d64_bf16", "torch-sdpa", bench(sdpa_fwdbwd), flops=3.5 * fl)
        mask = torch.ones(T, T, device=dev, dtype=torch.bool).tril()

        def naive(q, k, v):
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            return att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        both("G7", name + "_naive", naive, (q, k, v), flops=fl)
    if os.environ.get("GPT"):  # GPT="B T steps jit [f32|bf16]": G8, the step bench_gpt2_gpu runs
        args = os.environ["GPT"].split()
        B, T = (int(v) for v in args[:2])
        gpt2(B, T, args[4] if len(args) > 4 else "f32")


class Block(nn.Module):
    def __init__(s, C, H):
        super().__init__()
        s.H = H
        s.ln1, s.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        s.qkv, s.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.fc, s.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.H, C // s.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + s.proj(y)
        return x + s.out(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(s, L=12, C=768, H=12, V=50304, T=1024):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        s.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        s.ln_f = nn.LayerNorm(C)
        s.head = nn.Linear(C, V, bias=False)
        s.head.weight = s.wte.weight  # tied, as GPT-2
        for m in s.modules():  # GPT-2's initialization (as kiln's nn::GPT)
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in s.blocks:
            x = b(x)
        logits = s.head(s.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1))


def gpt2(B, T, dtype="f32"):
    """G8 as bench_gpt2_gpu runs it: f32 with TF32 matmuls, AdamW, random tokens; eager and compiled.
    bf16: the forward under torch.autocast(bf16) (f32 weights and AdamW state), with the fused AdamW."""
    bf16 = dtype == "bf16"
    for impl in ("torch-eager", "torch-compile"):
        torch.manual_seed(0)
        torch.cuda.reset_peak_memory_stats()
        model = GPT().to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0, **({"fused": True} if bf16 else {}))
        fwd = torch.compile(model) if impl == "torch-compile" else model
        idx = torch.randint(0, 50257, (B, T), device=dev); tgt = torch.randint(0, 50257, (B, T), device=dev)

        def step():
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=bf16):
                loss = fwd(idx, tgt)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        t0 = time.time(); first = step().item(); ct = time.time() - t0
        ms = bench(step, warmup=2, reps=10)
        report("G8", f"gpt2_124M_train_step_B{B}_T{T}_{dtype}", impl, ms, **{"tok/s": round(B * T / ms * 1e3),
               "first_step_s": round(ct, 1), "loss_first": round(first, 4),
               "peak_mb": round(torch.cuda.max_memory_allocated() / 1e6)})
        del model, opt
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
