#!/usr/bin/python3
"""Training throughput of the benchmark GPT in plain PyTorch (eager; CPU, or a GPU with --device cuda).

The reference for mtnlg-bench-train (bench/train_bench.cc): the same model (pre-LayerNorm
blocks, exact-erf GeLU, learned position embeddings, LM head tied to the word embedding over
the vocabulary padded to a multiple of 128, no dropout), the same random-token micro-batches
with gradient accumulation, and the same timed iteration: zero grads, forward + backward per
micro-batch, global grad-norm clip (1.0), AdamW (lr 1e-4, betas (0.9, 0.999), eps 1e-8,
weight decay 0.01 on weights and embeddings only). Written with nn.Linear/nn.LayerNorm and
explicit attention (torch 1.13 has no fused scaled_dot_product_attention), as one would write
it by hand. Prints the same fields as mtnlg-bench-train; --json prints one JSON line.
--device cuda runs the same model on GPU 0 (bf16: torch.autocast("cuda", bfloat16)), with the
iteration timed to a torch.cuda.synchronize(): the anchor scripts/gpu/check.sh measures against.

The loss is taken over all V_pad logits columns (our trainer masks the padding columns): a
negligible difference in cost, none in the FLOP count.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """x + attn(ln1(x)), then + mlp(ln2(.))."""

    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h, eps=1e-5)
        self.qkv = nn.Linear(h, 3 * h)
        self.dense = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h, eps=1e-5)
        self.fc1 = nn.Linear(h, 4 * h)
        self.fc2 = nn.Linear(4 * h, h)

    def attention(self, x):
        b, s, h = x.shape
        hd = h // self.heads
        q, k, v = self.qkv(x).view(b, s, self.heads, 3, hd).permute(3, 0, 2, 1, 4)  # [b,a,s,hd]
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        probs = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(b, s, h)
        return self.dense(out)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, layers, h, heads, seq, padded_vocab):
        super().__init__()
        self.wte = nn.Embedding(padded_vocab, h)
        self.wpe = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(h, eps=1e-5)
        for name, p in self.named_parameters():  # as gpt_params.h: N(0, 0.02), scaled outputs
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("dense.weight", "fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif "ln" in name and name.endswith("weight"):
                nn.init.ones_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, tokens, targets):
        s = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(s, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.lnf(x), self.wte.weight)  # tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), reduction="sum")


def flops_per_token(args, padded_vocab):
    """Model FLOPs per token, model/gpt_flops.h's formula (no recompute): 3 passes of
    2h(4h + 2f) + 4sh per layer (f = 4h) and 2hV for the tied head. bench/report.py checks that
    both implementations print the same figure for a model."""
    h, s = args.hidden, args.seq
    layer = 2 * h * (4 * h + 2 * 4 * h) + 4 * s * h
    return 3 * args.layers * layer + 3 * 2 * h * padded_vocab


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", default="model", help="label for the output")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256, help="hidden size h (ffn is 4h)")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=50257, help="padded up to a multiple of 128")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--global-batch", type=int, default=8, help="a multiple of --micro-batch")
    p.add_argument("--iters", type=int, default=5, help="timed iterations")
    p.add_argument("--warmup-iters", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: all cores)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: the forward and backward under torch.autocast('cpu', bfloat16), "
                        "fp32 weights and optimizer (PyTorch's mixed precision on the CPU)")
    p.add_argument("--json", action="store_true", help="print one JSON line (text to stderr)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cpu, or cuda (GPU 0): where the model trains")
    p.add_argument("--profile", action="store_true",
                   help="print torch.profiler's per-op table of the timed iterations (to stderr)")
    args = p.parse_args()
    if args.hidden % args.heads or args.global_batch % args.micro_batch or args.iters < 1:
        p.error("--heads must divide --hidden, --micro-batch must divide --global-batch, --iters >= 1")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    padded_vocab = (args.vocab + 127) // 128 * 128
    device = torch.device(args.device)
    model = GPT(args.layers, args.hidden, args.heads, args.seq, padded_vocab).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    accum = args.global_batch // args.micro_batch
    gen = torch.Generator().manual_seed(args.seed)
    batches = [(torch.randint(0, args.vocab, (args.micro_batch, args.seq), generator=gen).to(device),
                torch.randint(0, args.vocab, (args.micro_batch, args.seq), generator=gen).to(device))
               for _ in range(accum)]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    tokens_per_iter = args.global_batch * args.seq

    times, loss, prof = [], 0.0, None
    for it in range(args.warmup_iters + args.iters):
        if args.profile and it == args.warmup_iters:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            prof.__enter__()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)  # our trainer zeroes in place too
        loss_sum = 0.0
        for tokens, targets in batches:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16"):
                l = model(tokens, targets)
            (l / tokens_per_iter).backward()
            loss_sum += l.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()
        dt = time.perf_counter() - t0
        loss = loss_sum / tokens_per_iter
        if it >= args.warmup_iters:
            times.append(dt)

    if prof is not None:
        prof.__exit__(None, None, None)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30), file=sys.stderr)
    per_token = flops_per_token(args, padded_vocab)
    med, best = statistics.median(times), min(times)
    tokens_per_s = tokens_per_iter / med
    tflops = per_token * tokens_per_s * 1e-12
    params = sum(p.numel() for p in model.parameters())
    if args.json:
        print(json.dumps({
            "impl": "torch", "precision": args.precision, "name": args.name, "threads": torch.get_num_threads(),
            "layers": args.layers, "hidden": args.hidden, "heads": args.heads, "seq": args.seq,
            "vocab": args.vocab, "padded_vocab": padded_vocab, "micro_batch": args.micro_batch,
            "global_batch": args.global_batch, "iters": args.iters,
            "warmup_iters": args.warmup_iters, "params": params,
            "flops_per_token": per_token, "tokens_per_iter": tokens_per_iter,
            "ms_median": 1e3 * med, "ms_min": 1e3 * best, "tokens_per_s": tokens_per_s,
            "tflops": tflops, "loss": loss, "torch": torch.__version__, "device": args.device,
            "peak_memory_bytes": torch.cuda.max_memory_allocated() if device.type == "cuda" else 0}))
        return
    print(f"torch_train.py (torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{args.precision}, dropout 0)")
    print(f"model {args.name}: L={args.layers} h={args.hidden} heads={args.heads} s={args.seq} "
          f"V={args.vocab} (padded {padded_vocab}), {params} params")
    print(f"batch: {accum} micro-batches of {args.micro_batch} x {args.seq} = {tokens_per_iter} tokens per iteration")
    print(f"model FLOPs/token (model/gpt_flops.h): {per_token:.4g}")
    print(f"iterations: {args.iters} timed after {args.warmup_iters} warm-up; loss {loss:.4f}")
    print(f"ms/iter: median {1e3 * med:.1f}, min {1e3 * best:.1f}")
    print(f"tokens/s: {tokens_per_s:.1f} (median iteration)")
    print(f"model TFLOP/s: {tflops:.4f}")


if __name__ == "__main__":
    sys.exit(main())
