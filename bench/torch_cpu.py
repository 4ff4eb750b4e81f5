"""PyTorch CPU side of bench_c2_conv: the same workloads, one JSON line each. Usage: torch_cpu.py THREADS"""
import json, statistics, sys, time
import torch, torch.nn.functional as F

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)


def bench(fn, warmup=3, reps=15):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts)


def rep(name, ms, bytes_=None, flops=None):
    r = {"workload": name, "impl": "torch-cpu " + torch.__version__, "ms": round(ms, 3)}
    if bytes_:
        r["GB/s"] = round(bytes_ / ms / 1e6, 2)
    if flops:
        r["GFLOP/s"] = round(flops / ms / 1e6, 1)
    print(json.dumps(r), flush=True)


print("torch", torch.__version__, "threads", torch.get_num_threads())
N, C = 4096, 768
x = torch.randn(N, C, requires_grad=True)
w = torch.randn(C, requires_grad=True)
b = torch.randn(C, requires_grad=True)
dy = torch.randn(N, C)
rep("C2_layernorm_fwd_4096x768", bench(lambda: F.layer_norm(x.detach(), (C,), w.detach(), b.detach())), 2 * N * C * 4)
rep("C2_layernorm_fwdbwd_4096x768",
    bench(lambda: torch.autograd.grad(F.layer_norm(x, (C,), w, b), (x, w, b), dy)), 5 * N * C * 4)
img = torch.randn(8, 16, 32, 32, requires_grad=True)
k = torch.randn(32, 16, 3, 3, requires_grad=True)
kb = torch.randn(32, requires_grad=True)
dimg = torch.randn(8, 32, 32, 32)
flops = 2 * 8 * 32 * 32 * 32 * 16 * 9
rep("conv2d_fwd_n8c16_32x32_k3_o32", bench(lambda: F.conv2d(img.detach(), k.detach(), kb.detach(), padding=1)),
    flops=flops)
rep("conv2d_fwdbwd_n8c16_32x32_k3_o32",
    bench(lambda: torch.autograd.grad(F.conv2d(img, k, kb, padding=1), (img, k, kb), dimg)), flops=3 * flops)
mlp = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                          torch.nn.Linear(512, 10))
opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3)
xb, yb = torch.randn(128, 784), torch.randint(0, 10, (128,))


def mlp_step():
    loss = F.cross_entropy(mlp(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()


rep("C4_mlp_train_step_b128", bench(mlp_step), flops=3 * 2 * 128 * (784 * 512 + 512 * 512 + 512 * 10))
