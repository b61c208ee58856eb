#!/usr/bin/env python3
"""Independent float64 PyTorch GPT-2 reference for tests/model/gpt_vs_torch_test.cc.

A small GPT-2 written from the equations (no `transformers`): token + position embeddings,
pre-LayerNorm blocks with Conv1D-style ([in, out]) weights, causal softmax attention scaled by
1/sqrt(head_dim), GeLU (exact erf or the tanh approximation), a 4h MLP, ln_f, the head tied to
wte, mean cross entropy over every token, no dropout. Gradients come from torch autograd.

Writes into --out:
  weights.safetensors    the parameters in Hugging Face GPT-2 names and layout (F64 or F32)
  tokens.safetensors     "inputs" and "targets", int32 [batch, seq] (targets are independent
                         random ids: the test feeds them as the model's targets unchanged)
  reference.safetensors  "loss" F64 [] and, under each parameter's HF name, its gradient (F64);
                         with --generate N also "greedy" I32 [N], the greedy continuation of
                         inputs[0] (a full forward per token, no cache), and "greedy_margin"
                         F64 [N], each step's gap between the two largest logits; with
                         --stream-tokens K also "stream" I32 [K], random ids, and "stream_loss"
                         F64 [], the mean next-token loss over its windows [i*seq, i*seq+seq]
                         for i < (K - 1) // seq (mtnlg-eval's cut of a .bin/.idx)
With --weights-dtype f32 the weights are rounded to float32 first and the reference is computed
from the rounded values, so the file and the reference agree exactly.
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch


def write_safetensors(path, tensors):
    """tensors: dict name -> numpy array (float64, float32 or int32), written in insertion order."""
    names = {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("int32"): "I32"}
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.asarray(arr).copy(order="C")
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": names[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def make_params(a, gen):
    """HF-named parameters (float64), weights std --weight-std, biases and LayerNorms non-trivial."""
    h, f = a.hidden, 4 * a.hidden

    def normal(*shape, std=a.weight_std, mean=0.0):
        return mean + std * torch.randn(*shape, generator=gen, dtype=torch.float64)

    p = {"wte.weight": normal(a.vocab, h), "wpe.weight": normal(a.max_positions, h)}
    for i in range(a.layers):
        q = "h.%d." % i
        p[q + "ln_1.weight"] = normal(h, std=0.1, mean=1.0)
        p[q + "ln_1.bias"] = normal(h, std=0.1)
        p[q + "attn.c_attn.weight"] = normal(h, 3 * h)
        p[q + "attn.c_attn.bias"] = normal(3 * h)
        p[q + "attn.c_proj.weight"] = normal(h, h)
        p[q + "attn.c_proj.bias"] = normal(h)
        p[q + "ln_2.weight"] = normal(h, std=0.1, mean=1.0)
        p[q + "ln_2.bias"] = normal(h, std=0.1)
        p[q + "mlp.c_fc.weight"] = normal(h, f)
        p[q + "mlp.c_fc.bias"] = normal(f)
        p[q + "mlp.c_proj.weight"] = normal(f, h)
        p[q + "mlp.c_proj.bias"] = normal(h)
    p["ln_f.weight"] = normal(h, std=0.1, mean=1.0)
    p["ln_f.bias"] = normal(h, std=0.1)
    return p


def layernorm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased, as torch.nn.LayerNorm
    return (x - mean) / torch.sqrt(var + eps) * w + b


def gelu(x, activation):
    if activation == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def logits_fn(p, inputs, a):
    b, s = inputs.shape
    h, nh = a.hidden, a.heads
    hd = h // nh
    x = p["wte.weight"][inputs.long()] + p["wpe.weight"][:s]
    mask = torch.tril(torch.ones(s, s, dtype=torch.bool))
    for i in range(a.layers):
        q = "h.%d." % i
        y = layernorm(x, p[q + "ln_1.weight"], p[q + "ln_1.bias"])
        qkv = y @ p[q + "attn.c_attn.weight"] + p[q + "attn.c_attn.bias"]  # [b, s, 3h]: q | k | v
        qq, kk, vv = qkv.split(h, dim=-1)
        qq, kk, vv = (t.view(b, s, nh, hd).transpose(1, 2) for t in (qq, kk, vv))
        att = (qq @ kk.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ vv).transpose(1, 2).reshape(b, s, h)
        x = x + y @ p[q + "attn.c_proj.weight"] + p[q + "attn.c_proj.bias"]
        y = layernorm(x, p[q + "ln_2.weight"], p[q + "ln_2.bias"])
        y = gelu(y @ p[q + "mlp.c_fc.weight"] + p[q + "mlp.c_fc.bias"], a.activation)
        x = x + y @ p[q + "mlp.c_proj.weight"] + p[q + "mlp.c_proj.bias"]
    x = layernorm(x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["wte.weight"].t()


def loss_fn(p, inputs, targets, a):
    b, s = inputs.shape
    logits = logits_fn(p, inputs, a)
    return torch.nn.functional.cross_entropy(logits.reshape(b * s, -1), targets.reshape(-1).long())


def greedy(p, prompt, n, a):
    """n greedy tokens after `prompt` (1-D), each from a full forward; and the top-2 gaps."""
    seq, ids, margins = prompt.clone(), [], []
    with torch.no_grad():
        for _ in range(n):
            last = logits_fn(p, seq.view(1, -1), a)[0, -1]
            top = torch.topk(last, 2)
            ids.append(int(top.indices[0]))  # torch.topk: ties are not broken by id; margins say
            margins.append(float(top.values[0] - top.values[1]))
            seq = torch.cat([seq, top.indices[:1].to(seq.dtype)])
    return np.array(ids, dtype=np.int32), np.array(margins, dtype=np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--max-positions", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--activation", choices=["gelu", "gelu_tanh"], default="gelu")
    ap.add_argument("--weights-dtype", choices=["f64", "f32"], default="f64")
    ap.add_argument("--weight-std", type=float, default=0.02,
                    help="std of the weights (larger: logits that depend more on the context)")
    ap.add_argument("--generate", type=int, default=0, help="greedy tokens after inputs[0]")
    ap.add_argument("--stream-tokens", type=int, default=0, help="tokens of the eval stream")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    assert a.hidden % a.heads == 0 and a.seq <= a.max_positions
    assert a.seq + a.generate <= a.max_positions

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(a.seed)
    params = make_params(a, gen)
    if a.weights_dtype == "f32":
        params = {k: v.float().double() for k, v in params.items()}
    inputs = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen, dtype=torch.int32)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen, dtype=torch.int32)

    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    loss = loss_fn(leaves, inputs, targets, a)
    loss.backward()

    os.makedirs(a.out, exist_ok=True)
    wdt = np.float64 if a.weights_dtype == "f64" else np.float32
    write_safetensors(os.path.join(a.out, "weights.safetensors"),
                      {k: v.numpy().astype(wdt) for k, v in params.items()})
    write_safetensors(os.path.join(a.out, "tokens.safetensors"),
                      {"inputs": inputs.numpy(), "targets": targets.numpy()})
    ref = {"loss": np.array(loss.item(), dtype=np.float64)}
    ref.update({k: v.grad.numpy() for k, v in leaves.items()})
    if a.generate:
        ref["greedy"], ref["greedy_margin"] = greedy(params, inputs[0], a.generate, a)
    if a.stream_tokens:
        stream = torch.randint(0, a.vocab, (a.stream_tokens,), generator=gen, dtype=torch.int32)
        n = (a.stream_tokens - 1) // a.seq
        windows = torch.stack([stream[i * a.seq:i * a.seq + a.seq + 1] for i in range(n)])
        with torch.no_grad():
            stream_loss = loss_fn(params, windows[:, :-1], windows[:, 1:], a)
        ref["stream"] = stream.numpy()
        ref["stream_loss"] = np.array(stream_loss.item(), dtype=np.float64)
    write_safetensors(os.path.join(a.out, "reference.safetensors"), ref)


if __name__ == "__main__":
    main()
