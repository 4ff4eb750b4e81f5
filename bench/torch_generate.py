"""PyTorch side of bench_generate: GPT-2 124M shape with random weights (f32), a random prompt of P
tokens, N new tokens sampled (temperature 1, top_k 50) through a static key/value cache, batch 1
and 8; each step's tokens are read to the host (streaming), as kiln's generate does. One JSON line
per batch with bench_generate's fields. --compile: the decoding step under torch.compile
(reduce-overhead, i.e. CUDA graphs, on the GPU); the prompt's forward stays eager.
Usage: torch_generate.py [--small] [--prompt P] [--new N] [--batch 1,8] [--device cpu|cuda] [--compile]"""
import argparse, json, math, time
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.out = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, pos, mask):
        # x (B, T, C); pos (T,) the cache columns written; mask (T, L) the keys each query sees
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, 2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        self.k_cache.index_copy_(2, pos, k)  # in place at tensor-valued columns: one graph every step
        self.v_cache.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        x = x + self.out(y.transpose(1, 2).reshape(B, T, C))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, L, n_layer, H, C):
        super().__init__()
        self.L, self.H, self.C = L, H, C
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(L, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(C)
        for n, p in self.named_parameters():  # GPT-2 init
            if n.endswith("weight") and p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if n.endswith(("out.weight", "proj.weight")) else 0.02
                nn.init.normal_(p, 0, std)
            elif n.endswith("bias"):
                nn.init.zeros_(p)
        self.causal = torch.tril(torch.ones(L, L, dtype=torch.bool))

    def setup_cache(self, B, device):
        # per block K and V buffers (B, H, L, D), as gpt-fast keeps them (static for CUDA graphs)
        shape = (B, self.H, self.L, self.C // self.H)
        for blk in self.h:
            blk.register_buffer("k_cache", torch.zeros(shape, device=device), persistent=False)
            blk.register_buffer("v_cache", torch.zeros(shape, device=device), persistent=False)

    def forward(self, idx, pos):
        # idx (B, T) tokens at columns pos (T,) -> the last column's logits (B, V)
        x = self.wte(idx) + self.wpe(pos)
        mask = self.causal[pos]
        for blk in self.h:
            x = blk(x, pos, mask)
        return self.ln_f(x[:, -1]) @ self.wte.weight.t()


def sample(logits, top_k=50, temperature=1.0):
    logits = logits / temperature
    kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
    logits = logits.masked_fill(logits < kth, -float("inf"))
    return torch.multinomial(logits.softmax(-1), 1)


def generate(model, decode, prompt, n, on_token):
    B, P = prompt.shape  # the caches' earlier contents lie beyond the mask until overwritten
    tok = sample(model(prompt, torch.arange(P, device=prompt.device)))
    on_token(tok.cpu())
    for t in range(P, P + n - 1):
        tok = sample(decode(tok, torch.tensor([t], device=prompt.device)))
        on_token(tok.cpu())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="vocab 512, block 256, 2 layers of 128, P 16, N 32")
    ap.add_argument("--prompt", type=int)
    ap.add_argument("--new", type=int)
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    V, L, n_layer, H, C, P, N = (512, 256, 2, 4, 128, 16, 32) if a.small else (50257, 1024, 12, 12, 768, 64, 256)
    P, N = a.prompt or P, a.new or N
    torch.manual_seed(0)
    model = GPT(V, L, n_layer, H, C).to(a.device).eval()
    model.causal = model.causal.to(a.device)
    decode = model
    if a.compile:
        decode = torch.compile(model, mode="reduce-overhead" if a.device == "cuda" else "default", fullgraph=True)
    name = "gpt2_124M" if (n_layer, C) == (12, 768) else "gpt_small"
    with torch.no_grad():
        for B in (int(b) for b in a.batch.split(",")):
            prompt = torch.randint(0, V, (B, P), device=a.device)
            model.setup_cache(B, a.device)
            for _ in range(2):  # warm-up (compiles the decoding step, records its graphs)
                generate(model, decode, prompt, 4, lambda t: None)
            times = []
            start = time.perf_counter()
            generate(model, decode, prompt, N, lambda t: times.append(time.perf_counter()))
            end = time.perf_counter()
            ttft, decode_s = times[0] - start, end - times[0]
            print(json.dumps({
                "workload": "generate", "name": f"{name}_generate_B{B}_P{P}_N{N}",
                "impl": "torch " + torch.__version__ + ("-compile" if a.compile else ""), "device": a.device,
                "batch": B, "prompt": P, "new_tokens": N, "ttft_ms": round(ttft * 1e3, 1),
                "tok/s": round(B * (N - 1) / decode_s, 1), "ms_per_step": round(decode_s * 1e3 / (N - 1), 2),
                "total_s": round(end - start, 2), "kernels_compiled": None,
                "cache_write_ms": None}), flush=True)  # in place (index_copy_): nothing to time


if __name__ == "__main__":
    main()
