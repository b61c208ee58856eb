#!/usr/bin/python3
"""Megatron-LM GPT checkpoint (the legacy `torch` format) -> one Hugging Face GPT-2 safetensors
file with config.json beside it, which mtnlg-train loads as `model.init_from` and mtnlg-generate /
mtnlg-eval read as `--hf-model`. Weights only, for now: not the optimizer state, the iteration or
the data position (issue 34 asks for those through `mtnlg-ckpt import --format megatron`).

Why a Python script: the checkpoint is a pickle of PyTorch tensors and an argparse Namespace;
reading it in C++ would mean reimplementing pickle. Debian's PyTorch (python3-torch) reads it.

Input: DIR = a Megatron checkpoint root (its latest_checkpointed_iteration.txt names the
iteration) or one iter_NNNNNNN directory, holding mp_rank_TT/model_optim_rng.pt (pipeline 1) or
mp_rank_TT_PPP/model_optim_rng.pt for each tensor rank TT and pipeline rank PPP. Each file's
state['model']['language_model'] holds 'embedding' (word_embeddings, position_embeddings) and
'encoder' (older: 'transformer') with 'layers.I.*' numbered within its pipeline stage; the
query_key_value rows of a tensor rank are [heads of the rank, 3, head dim] (checkpoint_version
2 and 3; version 0/1 [3, heads, head dim] is refused). Column-parallel tensors (query_key_value,
dense_h_to_4h, the word embeddings) are split along dim 0, row-parallel weights (dense,
dense_4h_to_h) along dim 1; LayerNorms and the row-parallel biases are replicated.

Output: HF GPT-2 names and Conv1D layout ([in, out]): wte (the vocabulary unpadded to
--vocab-size), wpe, h.I.ln_1, attn.c_attn ([q of every head | k | v]), attn.c_proj, ln_2,
mlp.c_fc, mlp.c_proj, ln_f; float32. With --vocab-file/--merge-file the tokenizer is written
beside it too (vocab.json, merges.txt), as mtnlg-ckpt export does.

Usage: megatron_to_hf.py DIR --output OUT/model.safetensors [--vocab-size N]
       [--vocab-file encoder.json --merge-file vocab.bpe]
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import sys


def fail(msg):
    sys.exit(f"megatron_to_hf: {msg}")


def iteration_dir(path):
    if os.path.basename(os.path.normpath(path)).startswith("iter_"):
        return path
    latest = os.path.join(path, "latest_checkpointed_iteration.txt")
    if not os.path.exists(latest):
        fail(f"{path}: neither an iter_NNNNNNN directory nor a root with {os.path.basename(latest)}")
    text = open(latest).read().strip()
    if not text.isdigit():
        fail(f"{latest}: '{text[:40]}' is not an iteration (Megatron's 'release' checkpoints: "
             "name the release directory itself)")
    return os.path.join(path, f"iter_{int(text):07d}")


def load_shards(it_dir):
    import torch
    shards = {}
    for d in sorted(glob.glob(os.path.join(it_dir, "mp_rank_*"))):
        m = re.fullmatch(r"mp_rank_(\d{2})(?:_(\d{3}))?", os.path.basename(d))
        f = os.path.join(d, "model_optim_rng.pt")
        if not m or not os.path.exists(f):
            continue
        try:
            state = torch.load(f, map_location="cpu", weights_only=False)
        except TypeError:  # PyTorch < 2.0 has no weights_only
            state = torch.load(f, map_location="cpu")
        shards[(int(m.group(1)), int(m.group(2) or 0))] = state
    if not shards:
        fail(f"{it_dir}: no mp_rank_*/model_optim_rng.pt (a torch_dist checkpoint is not read yet)")
    return shards


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--output", required=True)
    ap.add_argument("--vocab-size", type=int, default=0,
                    help="rows of the word embeddings to keep (default: the args' vocab_size, "
                         "else 50257 for GPT2BPETokenizer)")
    ap.add_argument("--vocab-file")
    ap.add_argument("--merge-file")
    a = ap.parse_args()
    import torch

    it_dir = iteration_dir(a.dir)
    shards = load_shards(it_dir)
    tp = 1 + max(t for t, _ in shards)
    pp = 1 + max(p for _, p in shards)
    missing = [(t, p) for t in range(tp) for p in range(pp) if (t, p) not in shards]
    if missing:
        fail(f"{it_dir}: missing shards {missing} of tensor {tp} x pipeline {pp}")
    first = shards[(0, 0)]
    args = first.get("args")
    version = float(first.get("checkpoint_version", 0))
    if version < 2:
        fail(f"checkpoint_version {version}: query_key_value rows [3, heads, head dim] are not read")
    heads = getattr(args, "num_attention_heads", None)
    layers_total = getattr(args, "num_layers", None)
    if heads is None or layers_total is None:
        fail("the checkpoint's args lack num_attention_heads / num_layers")
    if layers_total % pp:
        fail(f"num_layers {layers_total} does not divide by pipeline {pp}")
    per_stage = layers_total // pp
    vocab = a.vocab_size or getattr(args, "vocab_size", 0) or (
        50257 if getattr(args, "tokenizer_type", "") == "GPT2BPETokenizer" else 0)
    if not vocab:
        fail("the vocabulary size is unknown: pass --vocab-size")

    def lm(t, p):
        model = shards[(t, p)]["model"]
        if "model0" in shards[(t, p)]:
            fail("an interleaved (virtual pipeline) checkpoint is not read yet")
        return model["language_model"]

    def enc(t, p):
        l = lm(t, p)
        return l.get("encoder", l.get("transformer"))

    def cat(getter, dim):
        return torch.cat([getter(t).float() for t in range(tp)], dim=dim)

    out = {}
    emb = lambda t: lm(t, 0)["embedding"]
    wte = cat(lambda t: emb(t)["word_embeddings"]["weight"], 0)
    if wte.shape[0] < vocab:
        fail(f"the word embeddings have {wte.shape[0]} rows, fewer than --vocab-size {vocab}")
    out["wte.weight"] = wte[:vocab]
    out["wpe.weight"] = emb(0)["position_embeddings"]["weight"].float()
    h = wte.shape[1]
    hn = h // heads
    norm = lambda e, i, new, old: e.get(f"layers.{i}.{new}", e.get(f"layers.{i}.{old}"))
    for p in range(pp):
        for i in range(per_stage):
            g = p * per_stage + i
            e0 = enc(0, p)
            hf = f"h.{g}."
            for ours, new, old in (("ln_1", "input_norm", "input_layernorm"),
                                   ("ln_2", "post_attention_norm", "post_attention_layernorm")):
                for kind in ("weight", "bias"):
                    t = norm(e0, i, f"{new}.{kind}", f"{old}.{kind}")
                    if t is None:
                        fail(f"layer {g}: no {new}.{kind}")
                    out[hf + f"{ours}.{kind}"] = t.float()
            key = lambda name: f"layers.{i}.{name}"
            qkv_w = cat(lambda t: enc(t, p)[key("self_attention.query_key_value.weight")], 0)
            qkv_b = cat(lambda t: enc(t, p)[key("self_attention.query_key_value.bias")], 0)
            # rows [heads, 3, hn] -> [3, heads, hn]: q of every head, then k, then v.
            qkv_w = qkv_w.view(heads, 3, hn, h).transpose(0, 1).reshape(3 * h, h)
            qkv_b = qkv_b.view(heads, 3, hn).transpose(0, 1).reshape(3 * h)
            out[hf + "attn.c_attn.weight"] = qkv_w.t().contiguous()
            out[hf + "attn.c_attn.bias"] = qkv_b
            out[hf + "attn.c_proj.weight"] = cat(
                lambda t: enc(t, p)[key("self_attention.dense.weight")], 1).t().contiguous()
            out[hf + "attn.c_proj.bias"] = e0[key("self_attention.dense.bias")].float()
            out[hf + "mlp.c_fc.weight"] = cat(
                lambda t: enc(t, p)[key("mlp.dense_h_to_4h.weight")], 0).t().contiguous()
            out[hf + "mlp.c_fc.bias"] = cat(lambda t: enc(t, p)[key("mlp.dense_h_to_4h.bias")], 0)
            out[hf + "mlp.c_proj.weight"] = cat(
                lambda t: enc(t, p)[key("mlp.dense_4h_to_h.weight")], 1).t().contiguous()
            out[hf + "mlp.c_proj.bias"] = e0[key("mlp.dense_4h_to_h.bias")].float()
    last = enc(0, pp - 1)
    for kind in ("weight", "bias"):
        t = last.get(f"final_norm.{kind}", last.get(f"final_layernorm.{kind}"))
        if t is None:
            fail(f"the last stage has no final_norm.{kind}")
        out[f"ln_f.{kind}"] = t.float()

    # safetensors: 8-byte header length, the JSON header, the raw little-endian bytes.
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in out.items():
        data = t.contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    out_dir = os.path.dirname(os.path.abspath(a.output))
    os.makedirs(out_dir, exist_ok=True)
    tmp = a.output + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, a.output)
    positions = out["wpe.weight"].shape[0]
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": vocab,
              "n_positions": positions, "n_ctx": positions, "n_embd": h,
              "n_layer": layers_total, "n_head": heads,
              "n_inner": out["h.0.mlp.c_fc.weight"].shape[1],
              # Megatron's default bias-GeLU fusion (and --openai-gelu) is the tanh form; without
              # the fusion F.gelu, the exact one.
              "activation_function": "gelu_new" if (getattr(args, "bias_gelu_fusion", True) or
                                                    getattr(args, "openai_gelu", False)) else "gelu",
              "layer_norm_epsilon": getattr(args, "layernorm_epsilon", 1e-5),
              "initializer_range": getattr(args, "init_method_std", 0.02),
              "bos_token_id": vocab - 1, "eos_token_id": vocab - 1, "tie_word_embeddings": True}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    if a.vocab_file and a.merge_file:
        shutil.copyfile(a.vocab_file, os.path.join(out_dir, "vocab.json"))
        shutil.copyfile(a.merge_file, os.path.join(out_dir, "merges.txt"))
    print(f"wrote {a.output} and config.json beside it: {layers_total} layers, hidden {h}, "
          f"{heads} heads, vocab {vocab}, from tensor {tp} x pipeline {pp} of "
          f"{os.path.basename(os.path.normpath(it_dir))}")


if __name__ == "__main__":
    main()
