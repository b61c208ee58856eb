#!/usr/bin/python3
"""Megatron-LM GPT checkpoints in the legacy `torch` format, read and written in Hugging Face
GPT-2's tensor layout: the Python half of `mtnlg-ckpt import --format megatron` and
`mtnlg-ckpt export --format megatron`, and of scripts/megatron_to_hf.py and hf_to_megatron.py.

Why Python: the checkpoint is a pickle of PyTorch tensors and an argparse Namespace; reading it
in C++ would mean reimplementing pickle. Debian's PyTorch (python3-torch) reads and writes it.

The layout (Megatron-LM's GPTModel, checkpoint_version 2 and 3): ROOT/latest_checkpointed_
iteration.txt names the iteration; ROOT/iter_NNNNNNN/mp_rank_TT/model_optim_rng.pt (pipeline 1)
or mp_rank_TT_PPP/model_optim_rng.pt for tensor rank TT and pipeline rank PPP holds
state['model']['language_model'] with 'embedding' (word_embeddings, position_embeddings; first
stage) and 'encoder' (older: 'transformer') with 'layers.I.*' numbered within the stage and the
final norm (last stage), and with pipeline > 1 the last stage's copy of the tied embedding as
state['model']['word_embeddings_for_head']. query_key_value rows of a tensor rank are [heads of
the rank, 3, head dim]; column-parallel tensors (query_key_value, dense_h_to_4h, the word
embeddings) are split along dim 0, row-parallel weights (dense, dense_4h_to_h) along dim 1;
norms and row-parallel biases are replicated; the vocabulary is padded to a multiple of
make_vocab_size_divisible_by x tensor. An interleaved (virtual pipeline) run saves a rank's chunks
as state['model0'], state['model1'], ...: chunk v of stage p holds layers v * L / vp + p * L /
(pp * vp) on.

The optimizer state (Megatron's non-distributed optimizer): state['optimizer'] is Adam's
state_dict ('state': per parameter index 'exp_avg', 'exp_avg_sq' and 'step'; 'param_groups'),
inside {'optimizer': ..., 'fp32_from_fp16_params': [[...], [...]], 'grad_scaler': ...} for
bf16/fp16 (Float16OptimizerWithFloat16Params: the fp32 masters). Parameter indices follow
get_param_groups: the rank's parameters (chunk after chunk) in named_parameters order (the order
of the model state above), those with weight decay first (not a bias, not 1-D), then the rest. The distributed
optimizer's distrib_optim.pt is not read (import the weights with --weights-only). The
iteration is state['iteration'], the data position args.consumed_train_samples and
args.consumed_valid_samples.

Commands:
  read DIR OUT [--weights-only] [--vocab-size N]
      OUT/model.safetensors (the fp32 masters where present, else the weights) and config.json,
      OUT/exp_avg.safetensors and OUT/exp_avg_sq.safetensors (HF names and layout; with the
      optimizer), OUT/megatron.json: iteration, consumed samples, Adam's step, the learning
      rate, and the run's pretrain_gpt.py flags rebuilt from its args.
  write SRC OUT --tensor T --pipeline P [--iteration N] [--make-vocab-size-divisible-by 128]
      the reverse: SRC/model.safetensors and config.json (and exp_avg/exp_avg_sq and
      megatron.json when present: the optimizer state and the position) into OUT/iter_NNNNNNN.
Exit status: 0 done; 2 unsupported or bad arguments; 4 missing or unreadable input.
"""
import argparse
import glob
import json
import os
import re
import struct
import sys

PROG = "megatron_ckpt"


def fail(msg, code=4):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


def need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        fail("needs PyTorch: apt-get install python3-torch (Debian's)", 2)


# ---- safetensors (8-byte header length, the JSON header, raw little-endian float32) ----

def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        data = t.detach().float().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    import numpy as np
    import torch
    try:
        data = open(path, "rb").read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if len(data) < 8:
        fail(f"{path}: truncated (no header)")
    n = struct.unpack_from("<Q", data, 0)[0]
    try:
        header = json.loads(data[8:8 + n])
    except ValueError:
        fail(f"{path}: the header is not JSON")
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        if h["dtype"] != "F32":
            fail(f"{path}: {name} is {h['dtype']}; float32 files are read", 2)
        a, b = h["data_offsets"]
        if 8 + n + b > len(data):
            fail(f"{path}: {name} runs past the end of the file (truncated)")
        out[name] = torch.from_numpy(
            np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(h["shape"]).copy())
    return out


# ---- Megatron's files ----

def iteration_dir(path):
    if os.path.basename(os.path.normpath(path)).startswith("iter_"):
        if not os.path.isdir(path):
            fail(f"{path}: no such directory")
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
            try:
                state = torch.load(f, map_location="cpu", weights_only=False)
            except TypeError:  # PyTorch < 2.0 has no weights_only
                state = torch.load(f, map_location="cpu")
        except Exception as e:  # a truncated or foreign file: name it
            fail(f"{f}: not a readable PyTorch checkpoint ({type(e).__name__}: {e})")
        shards[(int(m.group(1)), int(m.group(2) or 0))] = (state, d)
    if not shards:
        if glob.glob(os.path.join(it_dir, "*.distcp")) or os.path.exists(
                os.path.join(it_dir, "metadata.json")):
            fail(f"{it_dir}: a torch_dist (distributed checkpoint) directory; this reader takes "
                 "the legacy torch format: convert it with Megatron's tools/checkpoint/convert.py "
                 "--saver legacy (or save with --ckpt-format torch) first", 2)
        fail(f"{it_dir}: no mp_rank_*/model_optim_rng.pt")
    tp = 1 + max(t for t, _ in shards)
    pp = 1 + max(p for _, p in shards)
    missing = [(t, p) for t in range(tp) for p in range(pp) if (t, p) not in shards]
    if missing:
        fail(f"{it_dir}: missing shards {missing} of tensor {tp} x pipeline {pp}")
    return shards, tp, pp


def flatten(tree, prefix=()):
    """The tensors of a nested state dict as (path, tensor), in the dict's order."""
    import torch
    out = []
    for k, v in tree.items():
        if isinstance(v, dict):
            out += flatten(v, prefix + (k,))
        elif torch.is_tensor(v) and not k.endswith("_extra_state"):
            out.append((prefix + (k,), v))
    return out


def rebuild(tree, values, prefix=()):
    """The nested dict `tree` with each tensor replaced by values[path]."""
    import torch
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out[k] = rebuild(v, values, prefix + (k,))
        elif torch.is_tensor(v) and not k.endswith("_extra_state"):
            out[k] = values[prefix + (k,)]
    return out


def chunks_of(state):
    """A rank's model chunks: [state['model']], or with a virtual pipeline [state['model0'],
    state['model1'], ...] (Megatron's interleaved schedule saves one per chunk)."""
    if "model" in state:
        return [state["model"]]
    chunks = []
    while f"model{len(chunks)}" in state:
        chunks.append(state[f"model{len(chunks)}"])
    if not chunks:
        fail("a shard without 'model' (or 'model0', ...): not a Megatron GPT checkpoint", 2)
    return chunks


def param_groups_order(params):
    """get_param_groups' order of one rank's parameters: weight-decayed ones first (not a bias,
    not 1-D), then the rest, each in named_parameters order."""
    name = lambda path: ".".join(path)
    wd = [p for p in params if not (name(p[0]).endswith(".bias") or p[1].dim() == 1)]
    no_wd = [p for p in params if name(p[0]).endswith(".bias") or p[1].dim() == 1]
    return wd + no_wd


def rank_optimizer(state, where):
    """(masters, exp_avg, exp_avg_sq) of one rank as nested dicts shaped like state['model'],
    Adam's step and the learning rate; masters None for an fp32 run."""
    if os.path.exists(os.path.join(where, "distrib_optim.pt")):
        fail(f"{where}: the distributed optimizer's distrib_optim.pt is not read; import the "
             "weights alone with --weights-only", 2)
    opt = state.get("optimizer")
    if not opt:
        fail(f"{where}: no optimizer state (saved with --no-save-optim?); import the weights "
             "alone with --weights-only", 2)
    inner = opt.get("optimizer", opt.get("optimizer_state_dict")) if "param_groups" not in opt \
        else opt
    if inner is None or "param_groups" not in inner:
        fail(f"{where}: the optimizer state is neither Adam's state_dict nor Megatron's "
             "Float16Optimizer wrapper of it", 2)
    # get_param_groups walks the rank's chunks in order, each in named_parameters order.
    tree = {f"chunk{v}": c for v, c in enumerate(chunks_of(state))}
    params = param_groups_order(flatten(tree))
    indices = [i for g in inner["param_groups"] for i in g["params"]]
    if len(indices) != len(params):
        fail(f"{where}: the optimizer holds {len(indices)} parameters, the model {len(params)}: "
             "not the parameter order of Megatron's get_param_groups", 2)
    masters_groups = opt.get("fp32_from_fp16_params")
    masters_flat = [t for g in masters_groups for t in g] if masters_groups else None
    exp_avg, exp_avg_sq, masters, steps = {}, {}, {}, set()
    for k, (path, p) in enumerate(params):
        s = inner["state"].get(indices[k])
        if s is None or "exp_avg" not in s:
            fail(f"{where}: no Adam state for {'.'.join(path)} (parameter {indices[k]})", 2)
        if tuple(s["exp_avg"].shape) != tuple(p.shape):
            fail(f"{where}: Adam state {indices[k]} has shape {tuple(s['exp_avg'].shape)} but "
                 f"{'.'.join(path)} {tuple(p.shape)}: not the parameter order of Megatron's "
                 "get_param_groups", 2)
        exp_avg[path] = s["exp_avg"].float()
        exp_avg_sq[path] = s["exp_avg_sq"].float()
        if "step" in s:
            steps.add(int(s["step"]))
        if masters_flat is not None:
            masters[path] = masters_flat[k].float()
    for g in inner["param_groups"]:
        if "step" in g:  # apex FusedAdam keeps the step in the group
            steps.add(int(g["step"]))
    if len(steps) > 1:
        fail(f"{where}: parameters at different Adam steps {sorted(steps)}", 2)
    lr = float(inner["param_groups"][0].get("lr", 0.0))
    split = lambda values: [rebuild(tree, values)[f"chunk{v}"] for v in range(len(tree))]
    return (split(masters) if masters_flat is not None else None, split(exp_avg),
            split(exp_avg_sq), steps.pop() if steps else 0, lr)


def to_hf(models, tp, pp, heads, layers, vocab, vp=1):
    """Hugging Face GPT-2 tensors (float32) gathered from the model chunks {(t, p, v): dict} of
    tensor rank t, pipeline rank p and virtual chunk v. Chunk v of stage p holds the layers from
    v * layers / vp + p * layers / (pp * vp) on (Megatron's interleaved offsets; v = 0 alone
    without a virtual pipeline); the embeddings are the first chunk's, the final norm the last's."""
    import torch
    per = layers // (pp * vp)

    def lm(t, p, v=0):
        if "language_model" not in models[(t, p, v)]:
            fail("a model chunk without 'language_model': not a Megatron GPT checkpoint", 2)
        return models[(t, p, v)]["language_model"]

    def enc(t, p, v=0):
        l = lm(t, p, v)
        return l.get("encoder", l.get("transformer"))

    def cat(getter, dim):
        return torch.cat([getter(t).float() for t in range(tp)], dim=dim)

    out = {}
    emb = lambda t: lm(t, 0)["embedding"]
    wte = cat(lambda t: emb(t)["word_embeddings"]["weight"], 0)
    if wte.shape[0] < vocab:
        fail(f"the word embeddings have {wte.shape[0]} rows, fewer than the vocabulary {vocab}", 2)
    out["wte.weight"] = wte[:vocab]
    out["wpe.weight"] = emb(0)["position_embeddings"]["weight"].float()
    h = wte.shape[1]
    hn = h // heads
    norm = lambda e, i, new, old: e.get(f"layers.{i}.{new}", e.get(f"layers.{i}.{old}"))
    for p, v, i in ((p, v, i) for p in range(pp) for v in range(vp) for i in range(per)):
        g = v * (layers // vp) + p * per + i
        e0 = enc(0, p, v)
        hf = f"h.{g}."
        for ours, new, old in (("ln_1", "input_norm", "input_layernorm"),
                               ("ln_2", "post_attention_norm", "post_attention_layernorm")):
            for kind in ("weight", "bias"):
                t = norm(e0, i, f"{new}.{kind}", f"{old}.{kind}")
                if t is None:
                    fail(f"layer {g}: no {new}.{kind}", 2)
                out[hf + f"{ours}.{kind}"] = t.float()
        key = lambda name: f"layers.{i}.{name}"
        qkv_w = cat(lambda t: enc(t, p, v)[key("self_attention.query_key_value.weight")], 0)
        qkv_b = cat(lambda t: enc(t, p, v)[key("self_attention.query_key_value.bias")], 0)
        # rows [heads, 3, hn] -> [3, heads, hn]: q of every head, then k, then v.
        qkv_w = qkv_w.view(heads, 3, hn, h).transpose(0, 1).reshape(3 * h, h)
        qkv_b = qkv_b.view(heads, 3, hn).transpose(0, 1).reshape(3 * h)
        out[hf + "attn.c_attn.weight"] = qkv_w.t().contiguous()
        out[hf + "attn.c_attn.bias"] = qkv_b
        out[hf + "attn.c_proj.weight"] = cat(
            lambda t: enc(t, p, v)[key("self_attention.dense.weight")], 1).t().contiguous()
        out[hf + "attn.c_proj.bias"] = e0[key("self_attention.dense.bias")].float()
        out[hf + "mlp.c_fc.weight"] = cat(
            lambda t: enc(t, p, v)[key("mlp.dense_h_to_4h.weight")], 0).t().contiguous()
        out[hf + "mlp.c_fc.bias"] = cat(lambda t: enc(t, p, v)[key("mlp.dense_h_to_4h.bias")], 0)
        out[hf + "mlp.c_proj.weight"] = cat(
            lambda t: enc(t, p, v)[key("mlp.dense_4h_to_h.weight")], 1).t().contiguous()
        out[hf + "mlp.c_proj.bias"] = e0[key("mlp.dense_4h_to_h.bias")].float()
    last = enc(0, pp - 1, vp - 1)
    for kind in ("weight", "bias"):
        t = last.get(f"final_norm.{kind}", last.get(f"final_layernorm.{kind}"))
        if t is None:
            fail(f"the last stage has no final_norm.{kind}", 2)
        out[f"ln_f.{kind}"] = t.float()
    return out


def from_hf(hf, tp, pp, heads, padded):
    """The reverse of to_hf: per-rank model dicts {(t, p): dict} (the padding rows zero)."""
    import torch
    L = 1 + max(int(k.split(".")[1]) for k in hf if k.startswith("h."))
    H = hf["wte.weight"].shape[1]
    V = hf["wte.weight"].shape[0]
    hn, per, k = H // heads, L // pp, heads // tp
    wte = torch.cat([hf["wte.weight"], torch.zeros(padded - V, H)])
    models = {}
    for t in range(tp):
        def split(x, dim):
            n = x.shape[dim] // tp
            return x.narrow(dim, t * n, n).contiguous().clone()
        for p in range(pp):
            encoder = {}
            for i in range(per):
                g = p * per + i
                e = lambda name: hf[f"h.{g}.{name}"]
                w = e("attn.c_attn.weight").t().reshape(3, heads, hn, H).transpose(0, 1)
                b = e("attn.c_attn.bias").reshape(3, heads, hn).transpose(0, 1)
                pre = f"layers.{i}."
                encoder.update({
                    pre + "input_norm.weight": e("ln_1.weight").clone(),
                    pre + "input_norm.bias": e("ln_1.bias").clone(),
                    pre + "self_attention.query_key_value.weight":
                        w[t * k:(t + 1) * k].reshape(-1, H).contiguous(),
                    pre + "self_attention.query_key_value.bias":
                        b[t * k:(t + 1) * k].reshape(-1).contiguous(),
                    pre + "self_attention.dense.weight": split(e("attn.c_proj.weight").t(), 1),
                    pre + "self_attention.dense.bias": e("attn.c_proj.bias").clone(),
                    pre + "post_attention_norm.weight": e("ln_2.weight").clone(),
                    pre + "post_attention_norm.bias": e("ln_2.bias").clone(),
                    pre + "mlp.dense_h_to_4h.weight": split(e("mlp.c_fc.weight").t(), 0),
                    pre + "mlp.dense_h_to_4h.bias": split(e("mlp.c_fc.bias"), 0),
                    pre + "mlp.dense_4h_to_h.weight": split(e("mlp.c_proj.weight").t(), 1),
                    pre + "mlp.dense_4h_to_h.bias": e("mlp.c_proj.bias").clone(),
                })
            lm = {}
            model = {"language_model": lm}
            if p == 0:
                lm["embedding"] = {"word_embeddings": {"weight": split(wte, 0)},
                                   "position_embeddings": {"weight": hf["wpe.weight"].clone()}}
            lm["encoder"] = encoder
            if p == pp - 1:
                encoder["final_norm.weight"] = hf["ln_f.weight"].clone()
                encoder["final_norm.bias"] = hf["ln_f.bias"].clone()
                if pp > 1:  # the last stage's copy of the tied embedding
                    model["word_embeddings_for_head"] = {"weight": split(wte, 0)}
            models[(t, p)] = model
    return models


# The pretrain_gpt.py flags a checkpoint's args rebuild: the model, the schedule, the data and
# the precision (not paths of the run's own machine: save, load, logs). Store-true flags appear
# when set; flags Megatron spells negatively when their attribute is False.
VALUE_FLAGS = [
    "num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "seq_length",
    "max_position_embeddings", "micro_batch_size", "global_batch_size", "rampup_batch_size",
    "train_iters", "train_samples", "lr", "min_lr", "lr_decay_style", "lr_decay_iters",
    "lr_decay_samples", "lr_warmup_iters", "lr_warmup_samples", "lr_warmup_fraction",
    "weight_decay", "adam_beta1", "adam_beta2", "adam_eps", "clip_grad", "init_method_std",
    "hidden_dropout", "attention_dropout", "seed", "tensor_model_parallel_size",
    "pipeline_model_parallel_size", "data_path", "split", "tokenizer_type",
    "make_vocab_size_divisible_by", "eval_interval", "eval_iters", "log_interval",
    "save_interval", "num_query_groups", "loss_scale", "initial_loss_scale",
    "min_loss_scale", "loss_scale_window", "hysteresis"]
TRUE_FLAGS = ["fp16", "bf16", "swiglu", "untie_embeddings_and_output_weights",
              "apply_residual_connection_post_layernorm", "openai_gelu", "squared_relu",
              "group_query_attention", "use_rotary_position_embeddings",
              "use_distributed_optimizer", "sequence_parallel"]
FALSE_FLAGS = {"add_bias_linear": "--disable-bias-linear",
               "bias_gelu_fusion": "--no-bias-gelu-fusion"}
NON_DEFAULT = {"position_embedding_type": "learned_absolute", "normalization": "LayerNorm"}


def megatron_flags(args):
    flags = []
    flag = lambda attr: "--" + attr.replace("_", "-")
    for attr in VALUE_FLAGS:
        v = getattr(args, attr, None)
        if v is None or (attr == "num_query_groups" and not getattr(args, "group_query_attention",
                                                                    False)):
            continue
        if attr in ("loss_scale",) and not getattr(args, "fp16", False):
            continue
        if attr in ("initial_loss_scale", "min_loss_scale", "loss_scale_window", "hysteresis") \
                and not getattr(args, "fp16", False):
            continue
        if isinstance(v, (list, tuple)):
            flags += [flag(attr)] + [str(x) for x in v]
        else:
            flags += [flag(attr), str(v)]
    for attr in TRUE_FLAGS:
        if getattr(args, attr, False) is True:
            flags.append(flag(attr))
    for attr, spelled in FALSE_FLAGS.items():
        if getattr(args, attr, True) is False:
            flags.append(spelled)
    for attr, default in NON_DEFAULT.items():
        v = getattr(args, attr, None)
        if v is not None and v != default:
            flags += [flag(attr), str(v)]
    for attr in ("vocab_file", "merge_file"):  # the tokenizer, where this machine has it
        v = getattr(args, attr, None)
        if v and os.path.exists(v):
            flags += [flag(attr), v]
    return flags


def hf_config(hf, layers, heads, args):
    vocab, positions = hf["wte.weight"].shape[0], hf["wpe.weight"].shape[0]
    fused = getattr(args, "bias_gelu_fusion", True) or getattr(args, "openai_gelu", False)
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": vocab,
            "n_positions": positions, "n_ctx": positions, "n_embd": hf["wte.weight"].shape[1],
            "n_layer": layers, "n_head": heads, "n_inner": hf["h.0.mlp.c_fc.weight"].shape[1],
            # Megatron's default bias-GeLU fusion (and --openai-gelu) is the tanh form; without
            # the fusion F.gelu, the exact one.
            "activation_function": "gelu_new" if fused else "gelu",
            "layer_norm_epsilon": getattr(args, "layernorm_epsilon", 1e-5),
            "initializer_range": getattr(args, "init_method_std", 0.02),
            "bos_token_id": vocab - 1, "eos_token_id": vocab - 1, "tie_word_embeddings": True}


def checkpoint_shape(shards, vocab_size):
    first = shards[(0, 0)][0]
    args = first.get("args")
    version = float(first.get("checkpoint_version", 0))
    if version < 2:
        fail(f"checkpoint_version {version}: query_key_value rows [3, heads, head dim] are not "
             "read", 2)
    heads = getattr(args, "num_attention_heads", None)
    layers = getattr(args, "num_layers", None)
    if heads is None or layers is None:
        fail("the checkpoint's args lack num_attention_heads / num_layers", 2)
    pp = 1 + max(p for _, p in shards)
    vp = len(chunks_of(first))
    if layers % (pp * vp):
        fail(f"num_layers {layers} does not divide by pipeline {pp} x {vp} virtual chunks", 2)
    vocab = vocab_size or getattr(args, "vocab_size", 0) or (
        50257 if getattr(args, "tokenizer_type", "") == "GPT2BPETokenizer" else 0)
    if not vocab:
        fail("the vocabulary size is unknown: pass --vocab-size", 2)
    if any(len(chunks_of(s)) != vp for s, _ in shards.values()):
        fail("the shards hold different numbers of virtual pipeline chunks", 2)
    return args, heads, layers, vocab, vp


def model_chunks(shards):
    """{(t, p, v): model dict} of every rank's chunks."""
    return {(t, p, v): c for (t, p), (s, _) in shards.items() for v, c in enumerate(chunks_of(s))}


def read(a):
    need_torch()
    it_dir = iteration_dir(a.dir)
    shards, tp, pp = load_shards(it_dir)
    args, heads, layers, vocab, vp = checkpoint_shape(shards, a.vocab_size)
    weights = to_hf(model_chunks(shards), tp, pp, heads, layers, vocab, vp)
    info = {"iteration": int(shards[(0, 0)][0].get("iteration", 0)),
            "consumed_train_samples": int(getattr(args, "consumed_train_samples", 0) or 0),
            "consumed_valid_samples": int(getattr(args, "consumed_valid_samples", 0) or 0),
            "flags": megatron_flags(args), "tensor": tp, "pipeline": pp, "vocab_size": vocab,
            "has_optimizer": not a.weights_only, "optimizer_steps": 0, "lr": 0.0,
            "source": os.path.abspath(it_dir)}
    if not a.weights_only:
        masters, avg, avg_sq, steps, lrs = {}, {}, {}, set(), set()
        for (t, p), (state, where) in shards.items():
            m, e, e2, step, lr = rank_optimizer(state, where)
            for v in range(vp):
                masters[(t, p, v)] = m[v] if m is not None else None
                avg[(t, p, v)], avg_sq[(t, p, v)] = e[v], e2[v]
            steps.add(step)
            lrs.add(lr)
        if len(steps) > 1:
            fail(f"{it_dir}: ranks at different Adam steps {sorted(steps)}", 2)
        info["optimizer_steps"] = steps.pop()
        info["lr"] = max(lrs)
        if all(m is not None for m in masters.values()):
            weights = to_hf(masters, tp, pp, heads, layers, vocab, vp)  # the fp32 masters
        write_safetensors(os.path.join(a.out, "exp_avg.safetensors"),
                          to_hf(avg, tp, pp, heads, layers, vocab, vp))
        write_safetensors(os.path.join(a.out, "exp_avg_sq.safetensors"),
                          to_hf(avg_sq, tp, pp, heads, layers, vocab, vp))
    write_safetensors(os.path.join(a.out, "model.safetensors"), weights)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(hf_config(weights, layers, heads, args), f, indent=1)
    with open(os.path.join(a.out, "megatron.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"read {it_dir}: tensor {tp} x pipeline {pp}" + (f" x {vp} virtual chunks" if vp > 1 else "")
          + f", {layers} layers, {heads} heads, vocab "
          f"{vocab}, iteration {info['iteration']}, "
          + (f"Adam step {info['optimizer_steps']}" if not a.weights_only else "weights only"))


def write(a):
    need_torch()
    import argparse as ns
    import torch
    try:
        cfg = json.load(open(os.path.join(a.src, "config.json")))
    except OSError:
        fail(f"no config.json in {a.src}")
    hf = read_safetensors(os.path.join(a.src, "model.safetensors"))
    L, H, HEADS = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
    V, P = hf["wte.weight"].shape[0], hf["wpe.weight"].shape[0]
    tp, pp = a.tensor, a.pipeline
    if HEADS % tp or L % pp:
        fail(f"tensor {tp} must divide the {HEADS} heads and pipeline {pp} the {L} layers", 2)
    multiple = a.make_vocab_size_divisible_by * tp
    padded = -(-V // multiple) * multiple
    info_path = os.path.join(a.src, "megatron.json")
    info = json.load(open(info_path)) if os.path.exists(info_path) else {}
    iteration = a.iteration if a.iteration is not None else int(info.get("iteration", 0))
    with_optim = os.path.exists(os.path.join(a.src, "exp_avg.safetensors"))
    bf16 = bool(info.get("bf16", False))
    args = ns.Namespace(num_layers=L, hidden_size=H, num_attention_heads=HEADS,
                        ffn_hidden_size=hf["h.0.mlp.c_fc.weight"].shape[1],
                        max_position_embeddings=P, seq_length=int(info.get("seq_length", P)),
                        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                        vocab_size=V, padded_vocab_size=padded,
                        make_vocab_size_divisible_by=a.make_vocab_size_divisible_by,
                        layernorm_epsilon=cfg.get("layer_norm_epsilon", 1e-5),
                        bias_gelu_fusion=cfg.get("activation_function", "gelu_new") != "gelu",
                        tokenizer_type="GPT2BPETokenizer", iteration=iteration, bf16=bf16,
                        fp16=False, micro_batch_size=info.get("micro_batch_size"),
                        global_batch_size=info.get("global_batch_size"),
                        consumed_train_samples=int(info.get("consumed_train_samples", 0)),
                        consumed_valid_samples=int(info.get("consumed_valid_samples", 0)),
                        use_distributed_optimizer=False)
    models = from_hf(hf, tp, pp, HEADS, padded)
    if with_optim:
        avg = from_hf(read_safetensors(os.path.join(a.src, "exp_avg.safetensors")), tp, pp,
                      HEADS, padded)
        avg_sq = from_hf(read_safetensors(os.path.join(a.src, "exp_avg_sq.safetensors")), tp,
                         pp, HEADS, padded)
    it_dir = os.path.join(a.out, f"iter_{iteration:07d}")
    for (t, p), model in models.items():
        state = {"model": model, "args": args, "checkpoint_version": 3.0,
                 "iteration": iteration}
        if with_optim:
            params = param_groups_order(flatten(model))
            values = dict(flatten(model))
            e, e2 = dict(flatten(avg[(t, p)])), dict(flatten(avg_sq[(t, p)]))
            n_wd = sum(1 for path, x in params
                       if not (".".join(path).endswith(".bias") or x.dim() == 1))
            step = int(info.get("optimizer_steps", 0))
            # Adam's hyperparameters as the run had them: torch's load_state_dict restores a
            # group's betas, eps and weight decay from the checkpoint, so Megatron resumes with
            # these (the learning rate its scheduler sets each step).
            group = {"lr": float(info.get("lr", 0.0)),
                     "betas": (float(info.get("adam_beta1", 0.9)),
                               float(info.get("adam_beta2", 0.999))),
                     "eps": float(info.get("adam_eps", 1e-8)), "lr_mult": 1.0}
            adam = {"state": {i: {"step": step, "exp_avg": e[path], "exp_avg_sq": e2[path]}
                              for i, (path, _) in enumerate(params)},
                    "param_groups": [
                        dict(group, params=list(range(n_wd)),
                             weight_decay=float(info.get("weight_decay", 0.01)), wd_mult=1.0),
                        dict(group, params=list(range(n_wd, len(params))), weight_decay=0.0,
                             wd_mult=0.0)]}
            if bf16:  # Float16OptimizerWithFloat16Params: bf16 weights, fp32 masters
                masters = [[values[path].clone() for path, _ in params[:n_wd]],
                           [values[path].clone() for path, _ in params[n_wd:]]]
                state["model"] = rebuild(model, {path: x.bfloat16() for path, x in
                                                 flatten(model)})
                state["optimizer"] = {"optimizer": adam, "fp32_from_fp16_params": masters}
            else:
                state["optimizer"] = adam
        d = os.path.join(it_dir, f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else ""))
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, "model_optim_rng.pt.tmp")
        torch.save(state, tmp)
        os.replace(tmp, os.path.join(d, "model_optim_rng.pt"))
    with open(os.path.join(a.out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(iteration))
    print(f"wrote {it_dir}: tensor {tp} x pipeline {pp}, {L} layers, hidden {H}, {HEADS} heads, "
          f"vocab {V} padded to {padded}" + (", with the optimizer state" if with_optim else ""))


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("read", help="a Megatron checkpoint -> HF-layout files and megatron.json")
    r.add_argument("dir")
    r.add_argument("out")
    r.add_argument("--weights-only", action="store_true")
    r.add_argument("--vocab-size", type=int, default=0)
    w = sub.add_parser("write", help="HF-layout files (and megatron.json) -> a Megatron checkpoint")
    w.add_argument("src")
    w.add_argument("out")
    w.add_argument("--tensor", type=int, default=1)
    w.add_argument("--pipeline", type=int, default=1)
    w.add_argument("--iteration", type=int)
    w.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    a = ap.parse_args()
    read(a) if a.cmd == "read" else write(a)


if __name__ == "__main__":
    main()
