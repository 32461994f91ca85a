#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# bench-torch-step.py: PyTorch's CPU time for the training step that pacer-bench-step times:
# GPT-2 with L 4, C 256, NH 4, T 256, B 4, V 50257 padded to 50304, LM head tied to the token
# embedding (16.1M parameters), forward + backward + AdamW on random tokens. Prints one line per
# step and a median line in pacer-bench-step's format. Needs PyTorch (Debian: python3-torch).
# Usage: scripts/bench-torch-step.py [steps (5)] [threads (2)]
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

L, C, NH, T, B, V, VP = 4, 256, 4, 256, 4, 50257, 50304


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(C)
        self.c_attn = torch.nn.Linear(C, 3 * C)
        self.attn_proj = torch.nn.Linear(C, C)
        self.ln_2 = torch.nn.LayerNorm(C)
        self.c_fc = torch.nn.Linear(C, 4 * C)
        self.mlp_proj = torch.nn.Linear(4 * C, C)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, T, T))

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        hs = C // NH
        q, k, v = (y.view(B, T, NH, hs).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = F.softmax(att.masked_fill(~self.mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VP, C)
        self.wpe = torch.nn.Embedding(T, C)
        self.h = torch.nn.ModuleList(Block() for _ in range(L))
        self.ln_f = torch.nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight[:V].t()  # tied head, (B, T, V)
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def main():
    if len(sys.argv) > 3:
        sys.exit("usage: bench-torch-step.py [steps (5)] [threads (2)]")
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    if steps < 1 or threads < 1:
        sys.exit("bench-torch-step.py: steps and threads must be >= 1")
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    model = GPT2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.0)
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    n_params = sum(p.numel() for p in model.parameters())
    times = []
    for step in range(-1, steps):  # step -1 warms up and is not timed
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        print(f"step {step}: loss {loss.item():.4f}, {ms:.1f} ms")
        if step >= 0:
            times.append(ms)
    print(f"params {n_params}, B {B}, T {T}, threads {threads}, torch {torch.__version__}: "
          f"median {statistics.median(times):.1f} ms/step over {steps} steps")


if __name__ == "__main__":
    main()
