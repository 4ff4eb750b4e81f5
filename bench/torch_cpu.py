"""PyTorch CPU side of bench_c2_conv, bench_c4_mlp and bench_c5_gpt: the same workloads, one JSON line each. Usage: torch_cpu.py THREADS"""
import json, math, statistics, sys, time
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


class Block(torch.nn.Module):  # the GPT of ../shared/bench/torch_cpu_anchors.py (C5)
    def __init__(s, C, H):
        super().__init__()
        s.H = H
        s.ln1, s.attn, s.proj = torch.nn.LayerNorm(C), torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
        s.ln2, s.fc, s.fc2 = torch.nn.LayerNorm(C), torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.attn(s.ln1(x)).split(C, 2)
        q, k, v = (t.view(B, T, s.H, C // s.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // s.H)
        att = att.masked_fill(torch.ones(T, T).tril() == 0, float("-inf")).softmax(-1)
        x = x + s.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(s, V=65, C=256, L=6, H=8, T=128):
        super().__init__()
        s.wte, s.wpe = torch.nn.Embedding(V, C), torch.nn.Embedding(T, C)
        s.blocks = torch.nn.ModuleList([Block(C, H) for _ in range(L)])
        s.ln, s.head = torch.nn.LayerNorm(C), torch.nn.Linear(C, V, bias=False)

    def forward(s, idx):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1]))
        for b in s.blocks:
            x = b(x)
        return s.head(s.ln(x))


gpt = GPT()
gopt = torch.optim.AdamW(gpt.parameters(), lr=3e-4)
idx, tgt = torch.randint(0, 65, (16, 128)), torch.randint(0, 65, (16, 128))


def gpt_step():
    loss = F.cross_entropy(gpt(idx).view(-1, 65), tgt.view(-1))
    gopt.zero_grad()
    loss.backward()
    gopt.step()


ms = bench(gpt_step, warmup=2, reps=5)
r = {"workload": "C5_gpt6x256_T128_B16_train_step", "impl": "torch-cpu " + torch.__version__, "ms": round(ms, 3),
     "tok/s": int(16 * 128 / ms * 1000)}
print(json.dumps(r), flush=True)
