#!/usr/bin/python3
"""scripts/megatron_to_hf.py against checkpoints written here in Megatron-LM's legacy `torch`
format (Debian's PyTorch, torch.save of Megatron's state dict: state['model']['language_model']
with 'embedding' and 'encoder', query_key_value rows [heads of the rank, 3, head dim] as
checkpoint_version 3 lays them out, column-parallel tensors split along dim 0, row-parallel
weights along dim 1, layers numbered within their pipeline stage, the vocabulary padded): from a
random GPT-2 in Hugging Face's layout, split at tensor 2 x pipeline 2 and at 1 x 1, converted
back, every tensor must equal the original bit for bit, and mtnlg-eval's loss on a corpus through
the converted file must equal the loss through the original. Bad input: a missing shard, an old
checkpoint_version. Usage: megatron_to_hf_test.py BUILD_DIR SOURCE_DIR"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

build, src = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="megatron-to-hf-")
L, H, HEADS, V, P = 4, 64, 4, 500, 32
failures = 0


def check(what, ok):
    global failures
    print(("ok: " if ok else "FAIL: ") + what)
    failures += 0 if ok else 1


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        data = open(path, "rb").read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(data[base + a:base + b], dtype="<f4").reshape(h["shape"])
    return out


ref = os.path.join(tmp, "ref", "model.safetensors")
os.makedirs(os.path.dirname(ref))
subprocess.run([sys.executable, f"{src}/tests/cmd/make_tiny_gpt2.py", ref, str(L), str(H), str(V),
                str(P), "3"], check=True)
with open(os.path.join(tmp, "ref", "config.json"), "w") as f:
    json.dump({"model_type": "gpt2", "vocab_size": V, "n_positions": P, "n_embd": H, "n_layer": L,
               "n_head": HEADS, "n_inner": 4 * H, "activation_function": "gelu_new",
               "layer_norm_epsilon": 1e-5}, f)
hf = read_safetensors(ref)
T = lambda a: torch.from_numpy(np.array(a, dtype=np.float32))


def megatron_checkpoint(root, tp, pp, version=3.0, drop=None):
    """Writes root/iter_0000007/mp_rank_TT[_PPP]/model_optim_rng.pt as Megatron's save does."""
    hn = H // HEADS
    padded = -(-V // (128 * tp)) * 128 * tp  # make_vocab_size_divisible_by 128 x tp
    rng = np.random.default_rng(5)
    wte = np.concatenate([hf["wte.weight"], rng.standard_normal((padded - V, H)).astype("<f4")])
    args = argparse.Namespace(num_layers=L, hidden_size=H, num_attention_heads=HEADS,
                              tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                              vocab_size=V, padded_vocab_size=padded, layernorm_epsilon=1e-5,
                              tokenizer_type="GPT2BPETokenizer", bias_gelu_fusion=True)
    per = L // pp
    for t in range(tp):
        for p in range(pp):
            def col(a, dim=0):  # this tensor rank's block of a column- (dim 0) or row- (dim 1) split
                n = a.shape[dim] // tp
                return T(np.take(a, range(t * n, (t + 1) * n), axis=dim))
            encoder = {}
            for i in range(per):
                g = p * per + i
                e = lambda k: hf[f"h.{g}.{k}"]
                # HF c_attn [h, 3h] columns [q | k | v], head-major within each; Megatron's rows
                # [heads, 3, hn] for this rank's heads.
                w = e("attn.c_attn.weight").T.reshape(3, HEADS, hn, H).transpose(1, 0, 2, 3)
                b = e("attn.c_attn.bias").reshape(3, HEADS, hn).transpose(1, 0, 2)
                k = HEADS // tp
                encoder.update({
                    f"layers.{i}.input_norm.weight": T(e("ln_1.weight")),
                    f"layers.{i}.input_norm.bias": T(e("ln_1.bias")),
                    f"layers.{i}.self_attention.query_key_value.weight":
                        T(w[t * k:(t + 1) * k].reshape(-1, H)),
                    f"layers.{i}.self_attention.query_key_value.bias":
                        T(b[t * k:(t + 1) * k].reshape(-1)),
                    f"layers.{i}.self_attention.dense.weight": col(e("attn.c_proj.weight").T, 1),
                    f"layers.{i}.self_attention.dense.bias": T(e("attn.c_proj.bias")),
                    f"layers.{i}.post_attention_norm.weight": T(e("ln_2.weight")),
                    f"layers.{i}.post_attention_norm.bias": T(e("ln_2.bias")),
                    f"layers.{i}.mlp.dense_h_to_4h.weight": col(e("mlp.c_fc.weight").T, 0),
                    f"layers.{i}.mlp.dense_h_to_4h.bias": col(e("mlp.c_fc.bias"), 0),
                    f"layers.{i}.mlp.dense_4h_to_h.weight": col(e("mlp.c_proj.weight").T, 1),
                    f"layers.{i}.mlp.dense_4h_to_h.bias": T(e("mlp.c_proj.bias")),
                })
            lm = {"encoder": encoder}
            model = {"language_model": lm}
            if p == 0:
                lm["embedding"] = {"word_embeddings": {"weight": col(wte, 0)},
                                   "position_embeddings": {"weight": T(hf["wpe.weight"])}}
            if p == pp - 1:
                encoder["final_norm.weight"] = T(hf["ln_f.weight"])
                encoder["final_norm.bias"] = T(hf["ln_f.bias"])
                if pp > 1:
                    model["word_embeddings_for_head"] = {"weight": col(wte, 0)}
            if (t, p) == drop:
                continue
            name = f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else "")
            d = os.path.join(root, "iter_0000007", name)
            os.makedirs(d)
            torch.save({"model": model, "args": args, "checkpoint_version": version,
                        "iteration": 7, "optimizer": {}, "rng_state": []},
                       os.path.join(d, "model_optim_rng.pt"))
    with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("7")


def convert(root, out, *extra):
    return subprocess.run([sys.executable, f"{src}/scripts/megatron_to_hf.py", root, "--output", out,
                           *extra], capture_output=True, text=True)


corpus = os.path.join(tmp, "corpus")
subprocess.run([sys.executable, f"{src}/tests/cmd/make_tiny_corpus.py", corpus, "40", str(V)],
               check=True, stdout=subprocess.DEVNULL)


def eval_loss(model):
    r = subprocess.run([f"{build}/mtnlg-eval", "--hf-model", model, "--data", corpus,
                        "--max-samples", "8", "--threads", "1"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "failed: " + r.stderr[-300:]


want = eval_loss(ref)
for tp, pp in ((2, 2), (1, 1), (4, 1)):
    root = os.path.join(tmp, f"megatron-{tp}x{pp}")
    megatron_checkpoint(root, tp, pp)
    out = os.path.join(tmp, f"hf-{tp}x{pp}", "model.safetensors")
    r = convert(root, out)
    check(f"tensor {tp} x pipeline {pp}: converted ({r.stdout.strip() or r.stderr.strip()})",
          r.returncode == 0)
    if r.returncode != 0:
        continue
    got = read_safetensors(out)
    same = sorted(got) == sorted(hf) and all(np.array_equal(got[k], hf[k]) for k in hf)
    check(f"tensor {tp} x pipeline {pp}: every tensor equals the original bit for bit", same)
    cfg = json.load(open(os.path.join(os.path.dirname(out), "config.json")))
    check(f"tensor {tp} x pipeline {pp}: config.json has the shape",
          (cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["vocab_size"], cfg["n_positions"]) ==
          (L, H, HEADS, V, P))
    loss = eval_loss(out)
    check(f"tensor {tp} x pipeline {pp}: mtnlg-eval's loss through it is the original's ({loss})",
          loss == want and loss.startswith("{"))

# The other way: scripts/hf_to_megatron.py's shards hold what the writer above (Megatron's layout)
# puts there, tensor by tensor (the embeddings' padding rows aside: zero there, random here), and
# convert back to the original.
def flat(state, prefix=""):
    out = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        elif torch.is_tensor(v):
            out[prefix + k] = v
    return out


for tp, pp in ((2, 2), (1, 1)):
    mine = os.path.join(tmp, f"export-{tp}x{pp}")
    r = subprocess.run([sys.executable, f"{src}/scripts/hf_to_megatron.py", ref, "--output", mine,
                        "--tensor", str(tp), "--pipeline", str(pp), "--iteration", "7",
                        "--transformer-impl", "legacy"],
                       capture_output=True, text=True)
    check(f"hf_to_megatron tensor {tp} x pipeline {pp} ({r.stdout.strip() or r.stderr.strip()})",
          r.returncode == 0)
    if r.returncode != 0:
        continue
    theirs = os.path.join(tmp, f"megatron-{tp}x{pp}")
    same = True
    for t in range(tp):
        for p in range(pp):
            name = f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else "")
            f = lambda root: flat(torch.load(os.path.join(root, "iter_0000007", name,
                                                          "model_optim_rng.pt"))["model"])
            a, b = f(mine), f(theirs)
            same &= sorted(a) == sorted(b)
            for key in b:
                x, y = a.get(key), b[key]
                if x is None or x.shape != y.shape:
                    same = False
                    continue
                rows = x.shape[0]
                if "word_embeddings" in key:  # this rank's rows below the vocabulary
                    rows = max(0, min(x.shape[0], V - t * x.shape[0]))
                same &= torch.equal(x[:rows], y[:rows])
    check(f"hf_to_megatron tensor {tp} x pipeline {pp}: Megatron's names, shapes and values", same)
    back = os.path.join(tmp, f"back-{tp}x{pp}", "model.safetensors")
    r = convert(mine, back)
    check(f"hf_to_megatron then megatron_to_hf at {tp} x {pp}: the original bit for bit",
          r.returncode == 0 and all(np.array_equal(read_safetensors(back)[k], hf[k]) for k in hf))

# Megatron-Core's names (Transformer Engine's spec, the default, and the local one) convert back
# to the original too; their names are megatron_core_import_test.py's to check.
for impl in ("transformer_engine", "local"):
    mine = os.path.join(tmp, f"export-{impl}")
    r = subprocess.run([sys.executable, f"{src}/scripts/hf_to_megatron.py", ref, "--output", mine,
                        "--tensor", "2", "--pipeline", "2", "--transformer-impl", impl],
                       capture_output=True, text=True)
    back = os.path.join(tmp, f"back-{impl}", "model.safetensors")
    r2 = convert(mine, back) if r.returncode == 0 else r
    check(f"hf_to_megatron --transformer-impl {impl} then megatron_to_hf at 2 x 2: the original "
          f"bit for bit ({(r.stdout + r.stderr).strip()[-200:]})",
          r2.returncode == 0 and all(np.array_equal(read_safetensors(back)[k], hf[k]) for k in hf))

root = os.path.join(tmp, "missing")
megatron_checkpoint(root, 2, 2, drop=(1, 1))
r = convert(root, os.path.join(tmp, "x", "m.safetensors"))
check("a missing shard is named", r.returncode != 0 and "missing shards [(1, 1)]" in r.stderr)
root = os.path.join(tmp, "old")
megatron_checkpoint(root, 1, 1, version=1.0)
r = convert(root, os.path.join(tmp, "y", "m.safetensors"))
check("checkpoint_version 1 is refused, naming it", r.returncode != 0 and "checkpoint_version 1" in r.stderr)
r = convert(os.path.join(tmp, "nowhere"), os.path.join(tmp, "z", "m.safetensors"))
check("a directory that is no checkpoint is named", r.returncode != 0 and "nowhere" in r.stderr)
shutil.rmtree(tmp, ignore_errors=True)
print("megatron_to_hf_test:", "ok" if failures == 0 else f"{failures} failed")
sys.exit(1 if failures else 0)
