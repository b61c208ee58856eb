#!/usr/bin/python3
"""A Hugging Face GPT-2 safetensors file (what `mtnlg-ckpt export --format hf-gpt2` writes, with
config.json beside it) -> a Megatron-LM GPT checkpoint in the legacy `torch` format, split for
tensor x pipeline parallelism, that Megatron-LM loads with --load DIR (weights: use --no-load-optim
--no-load-rng, or --finetune). The other direction of scripts/megatron_to_hf.py; the layout is
documented there (checkpoint_version 3: query_key_value rows [heads of the rank, 3, head dim];
column-parallel tensors split along dim 0, row-parallel weights along dim 1; the vocabulary
padded to a multiple of make_vocab_size_divisible_by x tensor, the padding rows zero).

Usage: hf_to_megatron.py MODEL.safetensors --output DIR [--tensor T] [--pipeline P]
       [--iteration N] [--make-vocab-size-divisible-by 128]
Writes DIR/iter_NNNNNNN/mp_rank_TT[_PPP]/model_optim_rng.pt and DIR/latest_checkpointed_iteration.txt.
"""
import argparse
import json
import os
import struct
import sys


def fail(msg):
    sys.exit(f"hf_to_megatron: {msg}")


def read_safetensors(path):
    import numpy as np
    try:
        data = open(path, "rb").read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        if h["dtype"] != "F32":
            fail(f"{path}: {name} is {h['dtype']}; float32 files are read")
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(h["shape"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--output", required=True)
    ap.add_argument("--tensor", type=int, default=1)
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--iteration", type=int, default=0)
    ap.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    a = ap.parse_args()
    import argparse as ns
    import numpy as np
    import torch

    cfg_path = os.path.join(os.path.dirname(os.path.abspath(a.model)), "config.json")
    try:
        cfg = json.load(open(cfg_path))
    except OSError:
        fail(f"no config.json beside {a.model}")
    hf = read_safetensors(a.model)
    L, H, HEADS = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
    V, P = hf["wte.weight"].shape[0], hf["wpe.weight"].shape[0]
    tp, pp = a.tensor, a.pipeline
    if HEADS % tp or L % pp:
        fail(f"tensor {tp} must divide the {HEADS} heads and pipeline {pp} the {L} layers")
    hn, per, k = H // HEADS, L // pp, HEADS // tp
    multiple = a.make_vocab_size_divisible_by * tp
    padded = -(-V // multiple) * multiple
    wte = np.concatenate([hf["wte.weight"], np.zeros((padded - V, H), dtype="<f4")])
    T = lambda x: torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    args = ns.Namespace(num_layers=L, hidden_size=H, num_attention_heads=HEADS,
                        ffn_hidden_size=hf["h.0.mlp.c_fc.weight"].shape[1],
                        max_position_embeddings=P, seq_length=P,
                        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                        vocab_size=V, padded_vocab_size=padded,
                        make_vocab_size_divisible_by=a.make_vocab_size_divisible_by,
                        layernorm_epsilon=cfg.get("layer_norm_epsilon", 1e-5),
                        bias_gelu_fusion=cfg.get("activation_function", "gelu_new") != "gelu",
                        tokenizer_type="GPT2BPETokenizer", iteration=a.iteration)
    it_dir = os.path.join(a.output, f"iter_{a.iteration:07d}")
    for t in range(tp):
        def split(x, dim):
            n = x.shape[dim] // tp
            return T(np.take(x, range(t * n, (t + 1) * n), axis=dim))
        for p in range(pp):
            encoder = {}
            for i in range(per):
                g = p * per + i
                e = lambda name: hf[f"h.{g}.{name}"]
                w = e("attn.c_attn.weight").T.reshape(3, HEADS, hn, H).transpose(1, 0, 2, 3)
                b = e("attn.c_attn.bias").reshape(3, HEADS, hn).transpose(1, 0, 2)
                pre = f"layers.{i}."
                encoder.update({
                    pre + "input_norm.weight": T(e("ln_1.weight")),
                    pre + "input_norm.bias": T(e("ln_1.bias")),
                    pre + "self_attention.query_key_value.weight": T(w[t * k:(t + 1) * k].reshape(-1, H)),
                    pre + "self_attention.query_key_value.bias": T(b[t * k:(t + 1) * k].reshape(-1)),
                    pre + "self_attention.dense.weight": split(e("attn.c_proj.weight").T, 1),
                    pre + "self_attention.dense.bias": T(e("attn.c_proj.bias")),
                    pre + "post_attention_norm.weight": T(e("ln_2.weight")),
                    pre + "post_attention_norm.bias": T(e("ln_2.bias")),
                    pre + "mlp.dense_h_to_4h.weight": split(e("mlp.c_fc.weight").T, 0),
                    pre + "mlp.dense_h_to_4h.bias": split(e("mlp.c_fc.bias"), 0),
                    pre + "mlp.dense_4h_to_h.weight": split(e("mlp.c_proj.weight").T, 1),
                    pre + "mlp.dense_4h_to_h.bias": T(e("mlp.c_proj.bias")),
                })
            lm = {"encoder": encoder}
            model = {"language_model": lm}
            if p == 0:
                lm["embedding"] = {"word_embeddings": {"weight": split(wte, 0)},
                                   "position_embeddings": {"weight": T(hf["wpe.weight"])}}
            if p == pp - 1:
                encoder["final_norm.weight"] = T(hf["ln_f.weight"])
                encoder["final_norm.bias"] = T(hf["ln_f.bias"])
                if pp > 1:  # the last stage's copy of the tied embedding
                    model["word_embeddings_for_head"] = {"weight": split(wte, 0)}
            d = os.path.join(it_dir, f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else ""))
            os.makedirs(d, exist_ok=True)
            tmp = os.path.join(d, "model_optim_rng.pt.tmp")
            torch.save({"model": model, "args": args, "checkpoint_version": 3.0,
                        "iteration": a.iteration}, tmp)
            os.replace(tmp, os.path.join(d, "model_optim_rng.pt"))
    with open(os.path.join(a.output, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(a.iteration))
    print(f"wrote {it_dir}: tensor {tp} x pipeline {pp}, {L} layers, hidden {H}, {HEADS} heads, "
          f"vocab {V} padded to {padded}")


if __name__ == "__main__":
    main()
