#!/usr/bin/python3
"""Causal attention alone in PyTorch, forward and backward timed apart: the anchor for
mtnlg-bench-attention (bench/attention_bench.cc).

On a GPU with PyTorch 2.x this is torch.nn.functional.scaled_dot_product_attention held to its
FlashAttention-2 kernels where they apply (the runs column says which ran: flash, or the
default choice where the flash backend refuses), or with --backend cudnn to cuDNN's fused
attention (SDPBackend.CUDNN_ATTENTION, the kernels Transformer Engine runs on Hopper; rows
impl "cudnn", runs "cudnn" or the default choice where cuDNN refuses); with torch 1.13 (no fused attention), or
--impl math, the explicit softmax(Q K^T / sqrt(d)) V as one writes it by hand. The same shapes,
dtypes, dropout and timing as ours: q, k and v are the column blocks of one [b, s, heads * 3 *
hd] tensor (as our qkv), each call synchronized, the median over --min-time seconds after one
untimed call; backward is autograd.grad of the forward's output (its saved state reused, as a
training step's one backward). TFLOP/s are counted as FlashAttention's benchmarks count them:
forward 2 b heads s^2 hd under the causal mask, backward 2.5 times that.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = {"demo": (4, 128, 4, 64), "gpt2-124m": (1, 1024, 12, 64),
          "gpt2-124m-b8": (8, 1024, 12, 64), "1.3b": (4, 2048, 16, 128),
          "530b-tp8": (1, 2048, 16, 160)}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def parse_shape(text):
    if text in SHAPES:
        return text, SHAPES[text]
    try:
        dims = tuple(int(x) for x in text.split("x"))
    except ValueError:
        dims = ()
    if len(dims) != 4 or min(dims) <= 0:
        raise argparse.ArgumentTypeError(
            f"--shapes: '{text}' is neither {', '.join(SHAPES)} nor BxSxHxD (micro-batch x "
            "sequence x heads x head size, each positive)")
    return text, dims


def explicit(q, k, v, dropout_p):
    """softmax(Q K^T / sqrt(d)) V under the causal mask, as bench/torch_train.py writes it."""
    s = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    probs = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
    if dropout_p > 0:
        probs = F.dropout(probs, dropout_p)
    return probs @ v


def backend_context(backend):
    """A context that holds SDPA to one backend (flash or cudnn), or None where this torch has
    no such switch."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
        which = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION"}[backend]
        if hasattr(SDPBackend, which):
            return lambda: sdpa_kernel([getattr(SDPBackend, which)])
        return None
    except ImportError:
        pass
    if backend == "flash" and hasattr(torch.backends.cuda, "sdp_kernel"):  # torch 2.0 - 2.2
        return lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                                      enable_mem_efficient=False)
    return None


def attention_fn(impl, device, backend="flash", try_backend=True):
    """(function, what runs): the attention call to time."""
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    if impl == "math" or not has_sdpa:
        return explicit, "math"

    def sdpa(q, k, v, p):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)

    ctx = backend_context(backend) if device == "cuda" and try_backend else None
    if ctx is None:
        return sdpa, "sdpa"

    def held(q, k, v, p):
        with ctx():
            return sdpa(q, k, v, p)

    return held, backend


def time_call(f, sync, min_seconds):
    f()
    sync()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        f()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(args, name, dims, impl):
    b, s, heads, hd = dims
    device = torch.device("cuda" if args.device == "cuda" else "cpu")
    dtype = DTYPES[args.dtype]
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    qkv = torch.randn(b, s, heads, 3, hd, generator=gen).to(device=device, dtype=dtype)
    dout = torch.randn(b, heads, s, hd, generator=gen).to(device=device, dtype=dtype)
    # q, k, v: views of qkv [b, heads, s, hd] (last dimension contiguous), each a leaf.
    q, k, v = (qkv[:, :, :, i, :].transpose(1, 2).detach().requires_grad_() for i in range(3))
    f, runs = attention_fn(impl, args.device, args.backend)
    if runs == args.backend:
        try:
            out = f(q, k, v, args.dropout)
            torch.autograd.grad(out, (q, k, v), dout)  # cuDNN may refuse only the backward
        except RuntimeError:  # the backend refuses this dtype, head size, dropout or GPU
            f, runs = attention_fn(impl, args.device, args.backend, try_backend=False)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    state = {}

    def forward():
        state["out"] = f(q, k, v, args.dropout)

    fwd = time_call(forward, sync, args.min_time)
    out = state["out"]

    def backward():
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    bwd = time_call(backward, sync, args.min_time)
    flops = 4.0 * b * heads * hd * s * s / 2
    return {"bench": "attention", "impl": "cudnn" if args.backend == "cudnn" else "torch",
            "kernels": impl, "runs": runs,
            "device": args.device, "dtype": args.dtype, "dropout": args.dropout, "name": name,
            "b": b, "s": s, "heads": heads, "hd": hd, "fwd_ms": 1e3 * fwd, "bwd_ms": 1e3 * bwd,
            "fwd_tflops": flops / fwd * 1e-12, "bwd_tflops": 2.5 * flops / bwd * 1e-12,
            "torch": torch.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--shapes", default=None,
                   help="comma-separated: demo (4x128x4x64), gpt2-124m (1x1024x12x64), "
                        "gpt2-124m-b8 (8x1024x12x64), 1.3b (4x2048x16x128), 530b-tp8 "
                        "(1x2048x16x160), or BxSxHxD "
                        "(default: demo on cpu; gpt2-124m-b8,1.3b,530b-tp8 on cuda)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    p.add_argument("--impl", choices=["sdpa", "math"], default="sdpa",
                   help="sdpa: scaled_dot_product_attention (flash kernels on a GPU); math: "
                        "the explicit product and softmax (default: sdpa; math where this "
                        "torch has no sdpa)")
    p.add_argument("--backend", choices=["flash", "cudnn"], default="flash",
                   help="on a GPU: the SDPA kernels to hold to, FlashAttention-2 (flash; rows impl "
                        "torch) or cuDNN's fused attention (cudnn; rows impl cudnn)")
    p.add_argument("--dropout", type=float, default=0.0, help="attention dropout probability")
    p.add_argument("--min-time", type=float, default=0.5,
                   help="seconds to spend timing each of forward and backward (at least 3 calls)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--json", action="store_true",
                   help="one JSON line per row on stdout (the table goes to stderr)")
    args = p.parse_args()
    if not 0.0 <= args.dropout < 1.0:
        p.error(f"--dropout {args.dropout} is not in [0, 1)")
    if args.min_time < 0:
        p.error(f"--min-time {args.min_time} is negative")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_attention.py: --device cuda: this torch sees no GPU", file=sys.stderr)
        return 1
    default = "gpt2-124m-b8,1.3b,530b-tp8" if args.device == "cuda" else "demo"
    try:
        shapes = [parse_shape(t) for t in (args.shapes or default).split(",")]
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    rows = [measure(args, name, dims, args.impl) for name, dims in shapes]
    text = sys.stderr if args.json else sys.stdout
    print(f"torch_attention.py (torch {torch.__version__}, {args.device}, {args.dtype}, dropout "
          f"{args.dropout:g}; median call; TFLOP/s as FlashAttention counts)", file=text)
    print(f"{'shape':<14} {'impl':<8} {'runs':<8} {'fwd ms':>9} {'bwd ms':>9} {'fwd TF/s':>9} "
          f"{'bwd TF/s':>9} {'all TF/s':>9}", file=text)
    for r in rows:
        total = 3.5 * r["fwd_tflops"] * r["fwd_ms"] / (r["fwd_ms"] + r["bwd_ms"])
        print(f"{r['name']:<14} {r['impl']:<8} {r['runs']:<8} {r['fwd_ms']:>9.3f} "
              f"{r['bwd_ms']:>9.3f} {r['fwd_tflops']:>9.3f} {r['bwd_tflops']:>9.3f} "
              f"{total:>9.3f}", file=text)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
