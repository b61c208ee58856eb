#!/usr/bin/python3
"""Megatron-LM GPT checkpoints, read (the legacy `torch` format and `torch_dist`; the legacy
GPTModel's names and Megatron-Core's) and written (the `torch` format, in Megatron-Core's names
for its Transformer Engine or local spec, or the legacy GPTModel's) in Hugging Face GPT-2's
tensor layout: the Python half of `mtnlg-ckpt import --format megatron` and
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
(pp * vp) on. Megatron-Core's models keep a flat state dict per chunk instead (embedding.*,
decoder.layers.I.*, decoder.final_layernorm.*; LAYER_TENSORS below lists both names of each
tensor). The torch_dist format: see DistCheckpoint.

The optimizer state (Megatron's non-distributed optimizer): state['optimizer'] is Adam's
state_dict ('state': per parameter index 'exp_avg', 'exp_avg_sq' and 'step'; 'param_groups'),
inside {'optimizer': ..., 'fp32_from_fp16_params': [[...], [...]], 'grad_scaler': ...} for
bf16/fp16 (Float16OptimizerWithFloat16Params: the fp32 masters). Parameter indices follow
get_param_groups: the rank's parameters (chunk after chunk) in named_parameters order (the order
of the model state above), those with weight decay first (not a bias, not 1-D), then the rest. The distributed
optimizer's state is in distrib_optim.pt beside it (see distrib_rank_optimizer). The
iteration is state['iteration'], the data position args.consumed_train_samples and
args.consumed_valid_samples.

Commands:
  read DIR OUT [--weights-only] [--vocab-size N]
      OUT/model.safetensors (the fp32 masters where present, else the weights) and config.json,
      OUT/exp_avg.safetensors and OUT/exp_avg_sq.safetensors (HF names and layout; with the
      optimizer), OUT/megatron.json: iteration, consumed samples, Adam's step, the learning
      rate, and the run's pretrain_gpt.py flags rebuilt from its args.
  write SRC OUT --tensor T --pipeline P [--iteration N] [--make-vocab-size-divisible-by 128]
        [--transformer-impl transformer_engine|local|legacy]
      the reverse: SRC/model.safetensors and config.json (and exp_avg/exp_avg_sq and
      megatron.json when present: the optimizer state, the position and the schedule) into
      OUT/iter_NNNNNNN, each rank with the RNG state Megatron seeds and, with the optimizer,
      the scheduler's state (from_hf_core, rng_state, scheduler_state below).
Exit status: 0 done; 2 unsupported or bad arguments; 4 missing or unreadable input.
"""
import argparse
import glob
import json
import math
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


class _AbsentType(type):
    def __getattr__(cls, name):
        # An enum member pickles as getattr(its class, name): a stand-in member by that name.
        if name.startswith("__"):
            raise AttributeError(name)
        return cls(name)


class _Absent(metaclass=_AbsentType):
    """Stands in for a class this machine's Python lacks when unpickling: Megatron's own objects
    inside args (enums such as AttnBackend), Transformer Engine's, PyTorch 2's distributed-
    checkpoint records (torch.distributed.checkpoint.*, which Debian's PyTorch 1.13 does not
    have). It keeps what the pickle gives it: constructor arguments and state."""

    def __init__(self, *args, **kwargs):
        self._args = args
        self.__dict__.update(kwargs)

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict) and (
                state[0] is None or isinstance(state[0], dict)):  # (dict, slots) state
            state = {**(state[0] or {}), **state[1]}
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self._state = state


_ABSENT = {}


def _absent(module, name):
    key = (module, name)
    if key not in _ABSENT:
        _ABSENT[key] = _AbsentType(name, (_Absent,), {"_pickled_as": f"{module}.{name}"})
    return _ABSENT[key]


def _tolerant_pickle():
    """A copy of the pickle module whose Unpickler stands in for classes that cannot be imported
    here (see _Absent) instead of failing on them."""
    import pickle
    import types

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            # torch.distributed's checkpoint modules: 1.13's _shard ones do not even import on
            # Python 3.11; 2.x's records are plain dataclasses, read by attribute.
            if module.startswith(("torch.distributed.checkpoint", "torch.distributed._shard")):
                return _absent(module, name)
            try:
                return super().find_class(module, name)
            except (ImportError, AttributeError):
                return _absent(module, name)

    m = types.ModuleType("pickle")
    m.__dict__.update(pickle.__dict__)
    m.Unpickler = Unpickler
    m.load = lambda f, **kw: Unpickler(f, **kw).load()
    m.loads = lambda b, **kw: Unpickler(__import__("io").BytesIO(b), **kw).load()
    return m


def load_pt(source, where):
    """torch.load of a file name or bytes, on the CPU, tolerating classes absent here."""
    import io
    import torch
    import torch.serialization as ser
    tolerant = _tolerant_pickle()
    # Debian's PyTorch 1.13 replaces pickle_module by its module-level `pickle` whenever
    # weights_only is off, so that name is swapped for the load too.
    saved, ser.pickle = ser.pickle, tolerant
    try:
        f = io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else source
        try:
            return torch.load(f, map_location="cpu", pickle_module=tolerant, weights_only=False)
        except TypeError:  # PyTorch < 2.0 without the weights_only backport
            if not isinstance(f, str):
                f.seek(0)
            return torch.load(f, map_location="cpu", pickle_module=tolerant)
    except Exception as e:  # a truncated or foreign file: name it
        fail(f"{where}: not a readable PyTorch file ({type(e).__name__}: {e})")
    finally:
        ser.pickle = saved


def is_torch_dist(it_dir):
    return (os.path.exists(os.path.join(it_dir, ".metadata"))
            or os.path.exists(os.path.join(it_dir, "metadata.json"))
            or bool(glob.glob(os.path.join(it_dir, "*.distcp"))))


def load_shards(it_dir):
    shards = {}
    for d in sorted(glob.glob(os.path.join(it_dir, "mp_rank_*"))):
        m = re.fullmatch(r"mp_rank_(\d{2})(?:_(\d{3}))?", os.path.basename(d))
        f = os.path.join(d, "model_optim_rng.pt")
        if not m or not os.path.exists(f):
            continue
        shards[(int(m.group(1)), int(m.group(2) or 0))] = (load_pt(f, f), d)
    if not shards:
        fail(f"{it_dir}: no mp_rank_*/model_optim_rng.pt (the legacy torch format) and no "
             ".metadata (the torch_dist format)")
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


def to_bf16(tree):
    """The state dict with every tensor in bf16, other entries (an _extra_state) as they are."""
    import torch
    return {k: to_bf16(v) if isinstance(v, dict) else
            v.bfloat16() if torch.is_tensor(v) else v for k, v in tree.items()}


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
    common_step = inner["state"].get("common_step")  # Megatron-Core keeps one step for all
    if common_step is not None:
        steps.add(int(common_step))
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


# ---- the distributed optimizer's distrib_optim.pt (the torch format) ----
#
# Megatron-Core's DistributedOptimizer (--use-distributed-optimizer) keeps a rank's fp32 masters
# and Adam's moments in the layout of its gradient buffers, and data-parallel rank 0 of each
# tensor x pipeline rank saves them gathered (get_parameter_state_dp_zero) beside
# model_optim_rng.pt as distrib_optim.pt: {"buckets_coalesced": True, gbuf_idx: {dtype key:
# {"param", "exp_avg", "exp_avg_sq": fp32 [n], "numel_unpadded": n}}}, a buffer per model chunk
# and parameter dtype (chunk after chunk), its buckets one after another with each bucket's end
# padding cut off. model_optim_rng.pt's state['optimizer'] then holds Adam's param_groups with the
# step in each, and no per-parameter state. The buffer layout (Megatron-Core 0.8 to today:
# _compute_per_buffer_param_layout, before it ParamAndGradBuffer.__init__): the chunk's
# parameters in reverse named_parameters order, each starting at a multiple of 64 elements; a
# bucket closes after the parameter that makes it bucket_size elements or more, and around the
# tied embedding's copy on a pipeline's first and last stage (shared_embedding); bucket ends are
# padded to a multiple of lcm(data parallel, 128), so every bucket starts 64-aligned. bucket_size
# is None (one bucket) unless --overlap-grad-reduce, and then only on pipeline rank 0's first
# chunk: --ddp-num-buckets splits the rank's parameter count, else --ddp-bucket-size, else
# max(4e7, 1e6 x data parallel x context parallel). The format saved before 13 February 2024
# (per-bucket lists, no buckets_coalesced) is refused with Megatron's own converter named.


def buffer_layout(numels, bucket_size, shared):
    """(start, end) of each parameter (named_parameters order) in a buffer's coalesced tensor,
    and that tensor's length: Megatron-Core's layout above, bucket end padding cut off."""
    pad64 = lambda n: -(-n // 64) * 64
    spans = [None] * len(numels)
    done = 0  # the coalesced length of the buckets closed so far
    start, end, count = 0, 0, 0  # relative to the open bucket's (64-aligned) start
    for i in reversed(range(len(numels))):
        start = pad64(start)
        if shared[i] and count:  # the tied embedding's copy gets a bucket of its own
            done, start, count = done + start, 0, 0
        end = start + numels[i]
        spans[i] = (done + start, done + end)
        count += 1
        if (bucket_size is not None and end >= bucket_size) or shared[i]:
            done, start, count = done + end, 0, 0
        else:
            start = end
    return spans, done + (end if count else 0)


def chunk_bucket_size(args, p, v, rank_numel):
    """The bucket size of pipeline rank p's chunk v (None: one bucket), as Megatron's
    training.py and DistributedDataParallel resolve it from the run's args."""
    arg = lambda name, default=None: getattr(args, name, default)
    if not arg("overlap_grad_reduce") or p > 0 or v > 0 or \
            arg("overlap_param_gather_with_optimizer_step"):
        return None
    if arg("ddp_num_buckets"):
        return rank_numel // int(arg("ddp_num_buckets"))
    dp = int(arg("data_parallel_size", 1) or 1) * int(arg("context_parallel_size", 1) or 1)
    return int(arg("ddp_bucket_size") or max(40000000, 1000000 * dp))


def shared_embedding(name, p, pp, v, vp):
    """Whether a parameter is the tied embedding's copy that gets a bucket of its own: with
    pipeline > 1, the word embeddings of the first stage's first chunk (when it is not also the
    last) and the output layer of the last stage's last chunk (when it is not also the first)."""
    first, last = p == 0 and v == 0, p == pp - 1 and v == vp - 1
    return pp > 1 and ((first and not last and name.endswith("embedding.word_embeddings.weight"))
                       or (last and not first and (name.endswith("output_layer.weight")
                                                   or name == "word_embeddings_for_head.weight")))


def unpack_buffer(params, world, size, shared, where, dtype):
    """[(master, exp_avg, exp_avg_sq)] of params ([(name, weight)] in named_parameters order,
    one dtype) from their buffer's coalesced tensors world {"param", "exp_avg", "exp_avg_sq"}.
    Each master must round to its weight in `dtype` (the run's: Megatron copies the masters
    into the weights after every step and finishes that before it saves): a layout that is not
    the run's (bucket settings its args do not show, another Megatron version's) is an error,
    not a silent misread; the buffer's length alone rarely tells."""
    import torch
    if any(k not in world for k in ("param", "exp_avg", "exp_avg_sq")):
        fail(f"{where}: lacks param, exp_avg or exp_avg_sq (not Adam's state)", 2)
    spans, total = buffer_layout([x.numel() for _, x in params], size, shared)
    held = {int(world[k].numel()) for k in ("param", "exp_avg", "exp_avg_sq")}
    if "numel_unpadded" in world:
        held.add(int(world["numel_unpadded"]))
    if held != {total}:
        fail(f"{where}: holds {sorted(held)} elements where Megatron-Core's layout of this "
             f"rank's {len(params)} parameters (64-element alignment, bucket size {size}) gives "
             f"{total}: saved with other --ddp-bucket-size / --overlap-grad-reduce settings than "
             "its args say, or by a Megatron version of another layout; import the weights alone "
             "with --weights-only", 2)
    take = lambda k, a, b, x: world[k][a:b].float().reshape(x.shape).clone()
    out = []
    for (a, b), (name, x) in zip(spans, params):
        got = tuple(take(k, a, b, x) for k in ("param", "exp_avg", "exp_avg_sq"))
        if not torch.equal(got[0].to(dtype), x.to(dtype)):
            fail(f"{where}: the master of {name} (elements {a}..{b} in Megatron-Core's layout "
                 f"with bucket size {size}) does not round to its {str(dtype)[6:]} weight: the "
                 "buffer was laid out otherwise (other --ddp-bucket-size / --overlap-grad-reduce "
                 "settings than the run's args say, or another Megatron version); import the "
                 "weights alone with --weights-only", 2)
        out.append(got)
    return out


def distrib_rank_optimizer(state, where, args, p, pp):
    """rank_optimizer's result for a rank of the distributed optimizer (distrib_optim.pt)."""
    path = os.path.join(where, "distrib_optim.pt")
    dist = load_pt(path, path)
    if not isinstance(dist, dict) or not dist.get("buckets_coalesced"):
        fail(f"{path}: the distributed optimizer's state as Megatron saved it before 13 February "
             "2024 (a list per bucket, no buckets_coalesced) is not read; convert it with "
             "Megatron-LM's --ckpt-convert-update-legacy-dist-opt-format, or import the weights "
             "alone with --weights-only", 2)
    opt = state.get("optimizer")
    inner = opt.get("optimizer") if isinstance(opt, dict) else None
    if not isinstance(inner, dict) or "param_groups" not in inner:
        fail(f"{where}: model_optim_rng.pt holds no param_groups of Megatron's distributed "
             "optimizer (state['optimizer']['optimizer']); import the weights alone with "
             "--weights-only", 2)
    steps = {int(g["step"]) for g in inner["param_groups"] if g.get("step") is not None}
    if len(steps) != 1:
        fail(f"{where}: Adam's step is " + (f"ambiguous ({sorted(steps)})" if steps else
             "in no param_group") + "; import the weights alone with --weights-only", 2)
    lr = float(inner["param_groups"][0].get("lr", 0.0))
    chunks = chunks_of(state)
    vp = len(chunks)
    flat = [flatten(c) for c in chunks]
    rank_numel = sum(x.numel() for f in flat for _, x in f)
    masters, exp_avg, exp_avg_sq = {}, {}, {}
    gbuf = 0
    for v, params in enumerate(flat):
        size = chunk_bucket_size(args, p, v, rank_numel)
        for dtype in dict.fromkeys(x.dtype for _, x in params):  # a buffer per dtype, in order
            group = [(path, x) for path, x in params if x.dtype == dtype]
            held = dist.get(gbuf)
            if not isinstance(held, dict) or len(held) != 1:
                fail(f"{path}: no buffer {gbuf} (chunk {v}, {dtype}) of one dtype: not the "
                     "distributed optimizer of this rank's model", 2)
            shared = [shared_embedding(".".join(n), p, pp, v, vp) for n, _ in group]
            named = [(".".join(n), x) for n, x in group]
            got = unpack_buffer(named, next(iter(held.values())), size, shared,
                                f"{path}: buffer {gbuf} (chunk {v})", dtype)
            for (n, _), (m, e, e2) in zip(group, got):
                key = (f"chunk{v}",) + n
                masters[key], exp_avg[key], exp_avg_sq[key] = m, e, e2
            gbuf += 1
    extra = sorted(k for k in dist if isinstance(k, int) and k >= gbuf)
    if extra:
        fail(f"{path}: buffers {extra} beyond this rank's {gbuf}: not this rank's model", 2)
    tree = {f"chunk{v}": c for v, c in enumerate(chunks)}
    split = lambda values: [rebuild(tree, values)[f"chunk{v}"] for v in range(vp)]
    return split(masters), split(exp_avg), split(exp_avg_sq), steps.pop(), lr


# ---- one GPT's tensors, whatever the checkpoint calls them ----
#
# Canonical name -> (the legacy GPTModel's names within a layer, Megatron-Core's names within a
# layer, the dim tensor-parallel ranks split; None: replicated). Megatron-Core's local spec has
# input_layernorm / pre_mlp_layernorm; its Transformer Engine spec fuses the norms into
# linear_qkv / linear_fc1 (layer_norm_weight, layer_norm_bias). Megatron-Core keeps the legacy
# row order of linear_qkv for multi-head attention: [heads, 3 (q, k, v), head dim].
LAYER_TENSORS = {
    "ln1.weight": (("input_norm.weight", "input_layernorm.weight"),
                   ("input_layernorm.weight", "self_attention.linear_qkv.layer_norm_weight"),
                   None),
    "ln1.bias": (("input_norm.bias", "input_layernorm.bias"),
                 ("input_layernorm.bias", "self_attention.linear_qkv.layer_norm_bias"), None),
    "qkv.weight": (("self_attention.query_key_value.weight",),
                   ("self_attention.linear_qkv.weight",), 0),
    "qkv.bias": (("self_attention.query_key_value.bias",), ("self_attention.linear_qkv.bias",), 0),
    "proj.weight": (("self_attention.dense.weight",), ("self_attention.linear_proj.weight",), 1),
    "proj.bias": (("self_attention.dense.bias",), ("self_attention.linear_proj.bias",), None),
    "ln2.weight": (("post_attention_norm.weight", "post_attention_layernorm.weight"),
                   ("pre_mlp_layernorm.weight", "mlp.linear_fc1.layer_norm_weight"), None),
    "ln2.bias": (("post_attention_norm.bias", "post_attention_layernorm.bias"),
                 ("pre_mlp_layernorm.bias", "mlp.linear_fc1.layer_norm_bias"), None),
    "fc1.weight": (("mlp.dense_h_to_4h.weight",), ("mlp.linear_fc1.weight",), 0),
    "fc1.bias": (("mlp.dense_h_to_4h.bias",), ("mlp.linear_fc1.bias",), 0),
    "fc2.weight": (("mlp.dense_4h_to_h.weight",), ("mlp.linear_fc2.weight",), 1),
    "fc2.bias": (("mlp.dense_4h_to_h.bias",), ("mlp.linear_fc2.bias",), None),
}
# The tensors outside the layers: full names in a chunk (legacy nested dicts dotted), and split.
TOP_TENSORS = {
    "word": (("language_model.embedding.word_embeddings.weight",
              "embedding.word_embeddings.weight"), 0),
    "pos": (("language_model.embedding.position_embeddings.weight",
             "embedding.position_embeddings.weight"), None),
    "final.weight": (tuple(f"language_model.{e}.{n}.weight" for e in ("encoder", "transformer")
                           for n in ("final_norm", "final_layernorm"))
                     + ("decoder.final_layernorm.weight",), None),
    "final.bias": (tuple(f"language_model.{e}.{n}.bias" for e in ("encoder", "transformer")
                         for n in ("final_norm", "final_layernorm"))
                   + ("decoder.final_layernorm.bias",), None),
}


def layer_names(canon, i):
    """Every full name layer i's tensor `canon` has in a chunk, legacy or Megatron-Core."""
    legacy, mcore, _ = LAYER_TENSORS[canon]
    return ([f"language_model.{e}.layers.{i}.{n}" for e in ("encoder", "transformer")
             for n in legacy] + [f"decoder.layers.{i}.{n}" for n in mcore])


def split_dim(canon):
    return TOP_TENSORS[canon][1] if canon in TOP_TENSORS else LAYER_TENSORS[canon][2]


def hf_tensors(full, heads, layers, vocab):
    """Hugging Face GPT-2 tensors (float32) from full(canon, layer): the whole (tensor-parallel
    gathered) tensor `canon` of global layer `layer` (None outside the layers)."""
    out = {}
    wte = full("word")
    if wte.shape[0] < vocab:
        fail(f"the word embeddings have {wte.shape[0]} rows, fewer than the vocabulary {vocab}", 2)
    out["wte.weight"] = wte[:vocab]
    out["wpe.weight"] = full("pos")
    h = wte.shape[1]
    if h % heads:
        fail(f"hidden size {h} does not divide by the {heads} heads", 2)
    hn = h // heads
    for g in range(layers):
        f = lambda canon: full(canon, g)
        hf = f"h.{g}."
        out[hf + "ln_1.weight"], out[hf + "ln_1.bias"] = f("ln1.weight"), f("ln1.bias")
        out[hf + "ln_2.weight"], out[hf + "ln_2.bias"] = f("ln2.weight"), f("ln2.bias")
        qkv_w, qkv_b = f("qkv.weight"), f("qkv.bias")
        if tuple(qkv_w.shape) != (3 * h, h):
            fail(f"layer {g}: the attention's qkv weight is {tuple(qkv_w.shape)}, not "
                 f"{(3 * h, h)} (grouped-query attention is not read)", 2)
        # rows [heads, 3, hn] -> [3, heads, hn]: q of every head, then k, then v.
        qkv_w = qkv_w.reshape(heads, 3, hn, h).transpose(0, 1).reshape(3 * h, h)
        qkv_b = qkv_b.reshape(heads, 3, hn).transpose(0, 1).reshape(3 * h)
        out[hf + "attn.c_attn.weight"] = qkv_w.t().contiguous()
        out[hf + "attn.c_attn.bias"] = qkv_b
        out[hf + "attn.c_proj.weight"] = f("proj.weight").t().contiguous()
        out[hf + "attn.c_proj.bias"] = f("proj.bias")
        out[hf + "mlp.c_fc.weight"] = f("fc1.weight").t().contiguous()
        out[hf + "mlp.c_fc.bias"] = f("fc1.bias")
        out[hf + "mlp.c_proj.weight"] = f("fc2.weight").t().contiguous()
        out[hf + "mlp.c_proj.bias"] = f("fc2.bias")
    out["ln_f.weight"], out["ln_f.bias"] = full("final.weight"), full("final.bias")
    return {k: v.float().contiguous() for k, v in out.items()}


def dotted(model):
    """A chunk's tensors by dotted name: the legacy model's nested dicts and Megatron-Core's
    flat state dict alike."""
    return {".".join(path): t for path, t in flatten(model)}


def shard_full(models, tp, pp, layers, vp=1):
    """full(canon, layer) over legacy-format shards {(t, p, v): chunk dict}: the tensor-parallel
    pieces of the chunk holding the layer, concatenated. Chunk v of stage p holds the layers from
    v * layers / vp + p * layers / (pp * vp) on (Megatron's interleaved offsets); the embeddings
    are the first chunk's, the final norm the last's."""
    import torch
    per = layers // (pp * vp)
    flat = {k: dotted(m) for k, m in models.items()}
    for k, d in flat.items():
        if not any(n.startswith(("language_model.", "decoder.", "embedding.")) for n in d):
            fail(f"tensor rank {k[0]}, pipeline rank {k[1]}: a model chunk with neither "
                 "'language_model' nor Megatron-Core's 'decoder' / 'embedding': not a Megatron "
                 "GPT checkpoint", 2)

    def full(canon, g=None):
        if g is None:
            p, v = (0, 0) if canon in ("word", "pos") else (pp - 1, vp - 1)
            names = TOP_TENSORS[canon][0]
        else:
            v, r = divmod(g, layers // vp)
            p, i = divmod(r, per)
            names = layer_names(canon, i)
        dim = split_dim(canon)
        pieces = []
        for t in range(tp if dim is not None else 1):
            d = flat[(t, p, v)]
            x = next((d[n] for n in names if n in d), None)
            if x is None:
                where = f"tensor rank {t}, pipeline rank {p}" + (f", chunk {v}" if vp > 1 else "")
                fail(f"{where}: no {canon if g is None else f'layer {g} {canon}'} (looked for "
                     f"{', '.join(names)})", 2)
            pieces.append(x.float())
        return torch.cat(pieces, dim=dim) if len(pieces) > 1 else pieces[0]

    return full


def to_hf(models, tp, pp, heads, layers, vocab, vp=1):
    """Hugging Face GPT-2 tensors (float32) gathered from the legacy-format model chunks
    {(t, p, v): dict} of tensor rank t, pipeline rank p and virtual chunk v."""
    return hf_tensors(shard_full(models, tp, pp, layers, vp), heads, layers, vocab)


# ---- the torch_dist format (PyTorch's distributed checkpoint, as Megatron-Core writes it) ----
#
# ITER/.metadata is a pickle of torch.distributed.checkpoint.metadata.Metadata:
# state_dict_metadata maps each key to TensorStorageMetadata (properties, the global size, the
# chunks: offsets and sizes in the global tensor) or BytesStorageMetadata; storage_data maps a
# MetadataIndex (fqn, offset of the chunk) to _StorageInfo (relative_path, offset, length): the
# bytes of torch.save(chunk) (of the raw object bytes for a bytes item) inside ITER/__R_N.distcp.
# Megatron-Core's keys are the model's own names with the layers either stacked along a first
# axis of num_layers (decoder.layers.self_attention.linear_qkv.weight [layers, 3h, h]) or one
# key per global layer (decoder.layers.7.self_attention...); tensor-parallel pieces are chunks of
# the global tensor. The optimizer's state: optimizer.state.exp_avg.KEY, .exp_avg_sq.KEY and the
# fp32 masters optimizer.state.fp32_param.KEY (the non-distributed optimizer) or
# optimizer.state.param.KEY (the distributed optimizer saved fully reshardable); the
# distributed optimizer's default dp_reshardable buffers (optimizer.distributed.*) follow its
# internal bucket layout (Opened._dp_reshardable unpacks them). The non-tensor state (args, iteration, the Adam step
# in param_groups or as common_step) is ITER/common.pt or, in newer Megatron-Core, the bytes item
# common_state/shard_0_1 (torch.save of [state]).

class DistCheckpoint:
    def __init__(self, it_dir):
        import pickle
        self.dir = it_dir
        path = os.path.join(it_dir, ".metadata")
        try:
            with open(path, "rb") as f:
                meta = _tolerant_pickle().Unpickler(f).load()
        except OSError as e:
            fail(f"{path}: {e.strerror} (a torch_dist checkpoint keeps its index there)")
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
            fail(f"{path}: not a PyTorch distributed-checkpoint index ({type(e).__name__}: {e})")
        self.items = getattr(meta, "state_dict_metadata", None)
        storage = getattr(meta, "storage_data", None)
        if not isinstance(self.items, dict) or not isinstance(storage, dict):
            fail(f"{path}: not a PyTorch distributed-checkpoint index (no state_dict_metadata / "
                 "storage_data)")
        self.where = {}
        for index, info in storage.items():
            offset = getattr(index, "offset", None)
            if not hasattr(index, "fqn") or not all(
                    hasattr(info, a) for a in ("relative_path", "offset", "length")):
                fail(f"{path}: a storage entry without its fqn, file, offset or length")
            self.where[(index.fqn, tuple(offset) if offset is not None else None)] = info
        self.cache = {}

    def __contains__(self, key):
        return key in self.items

    def keys(self):
        return self.items.keys()

    def _bytes(self, key, offset):
        info = self.where.get((key, offset))
        if info is None and offset is None:  # a bytes item may be indexed with any offset
            info = next((v for (k, _), v in self.where.items() if k == key), None)
        if info is None:
            fail(f"{self.dir}/.metadata: no storage entry for {key}"
                 + (f" at offset {list(offset)}" if offset is not None else ""))
        if getattr(info, "transform_descriptors", None):
            fail(f"{self.dir}: {key} is stored transformed ({info.transform_descriptors}); "
                 "plain torch.save items are read", 2)
        path = os.path.join(self.dir, info.relative_path)
        try:  # opened per item: a run of thousands of ranks writes thousands of files
            with open(path, "rb") as f:
                f.seek(info.offset)
                data = f.read(info.length)
        except OSError as e:
            fail(f"{path}: {e.strerror} (named by {self.dir}/.metadata for {key})")
        if len(data) != info.length:
            fail(f"{path}: {key} runs past the end of the file (truncated: {info.offset} + "
                 f"{info.length} bytes wanted)")
        return data

    def tensor(self, key):
        """The global tensor `key`, its chunks placed at their offsets."""
        import torch
        if key in self.cache:
            return self.cache[key]
        md = self.items[key]
        chunks = getattr(md, "chunks", None)
        if chunks is None:
            fail(f"{self.dir}: {key} is a bytes item, not a tensor", 2)
        try:
            size = tuple(md.size)
            parts = [(tuple(ch.offsets), tuple(ch.sizes)) for ch in chunks]
        except (AttributeError, TypeError) as e:
            fail(f"{self.dir}/.metadata: {key} has no size or a chunk without offsets and sizes "
                 f"({e})")
        out, covered = None, 0
        for offsets, sizes in parts:
            t = load_pt(self._bytes(key, offsets), f"{self.dir}: {key} at {list(offsets)}")
            if not torch.is_tensor(t) or t.numel() != math.prod(sizes):
                fail(f"{self.dir}: {key} at {list(offsets)} holds no tensor of {list(sizes)}")
            if out is None:
                out = torch.zeros(size, dtype=t.dtype)
            out[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))] = t.reshape(sizes)
            covered += math.prod(sizes)
        if out is None or covered != math.prod(size):
            fail(f"{self.dir}: the chunks of {key} cover {covered} of its {math.prod(size)} "
                 "elements (a missing or overlapping shard)")
        self.cache[key] = out
        return out

    def common(self):
        """The non-tensor state: common.pt, or the bytes item common_state/shard_*."""
        path = os.path.join(self.dir, "common.pt")
        if os.path.exists(path):
            return load_pt(path, path)
        key = next((k for k in self.items if k.startswith("common_state/")), None)
        if key is None:
            fail(f"{self.dir}: neither common.pt nor a common_state item (the run's args and "
                 "iteration)")
        state = load_pt(self._bytes(key, None), f"{self.dir}: {key}")
        return state[0] if isinstance(state, list) else state

    def full(self, prefix, layers):
        """full(canon, layer) over Megatron-Core's keys under `prefix`."""
        def full(canon, g=None):
            if g is None:
                names = [n for n in TOP_TENSORS[canon][0] if not n.startswith("language_model.")]
                key = next((prefix + n for n in names if prefix + n in self.items), None)
                if key is None:
                    fail(f"{self.dir}: no {prefix}{names[0]}", 2)
                return self.tensor(key).float()
            for n in LAYER_TENSORS[canon][1]:
                stacked, single = f"{prefix}decoder.layers.{n}", f"{prefix}decoder.layers.{g}.{n}"
                if stacked in self.items:
                    t = self.tensor(stacked)
                    if t.shape[0] != layers:
                        fail(f"{self.dir}: {stacked} stacks {t.shape[0]} layers, the run has "
                             f"{layers}", 2)
                    return t[g].float()
                if single in self.items:
                    return self.tensor(single).float()
            fail(f"{self.dir}: no {prefix}decoder.layers.{LAYER_TENSORS[canon][1][0]} (layer "
                 f"{g})", 2)

        return full


def find_step(tree):
    """Adam's step in a common state's optimizer: Megatron-Core's common_step, else the
    param_groups' 'step' (the distributed optimizer and TE's FusedAdam keep it there)."""
    steps = set()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "common_step":
                    steps.add(int(v))
                elif k == "param_groups" and isinstance(v, list):
                    steps.update(int(g["step"]) for g in v if isinstance(g, dict) and "step" in g)
                else:
                    walk(v)

    walk(tree)
    return steps


def find_lr(tree):
    if isinstance(tree, dict):
        groups = tree.get("param_groups")
        if isinstance(groups, list) and groups and isinstance(groups[0], dict):
            return float(groups[0].get("lr", 0.0))
        for v in tree.values():
            lr = find_lr(v)
            if lr is not None:
                return lr
    return None


def sharder(hf, tp, heads, padded):
    """Hugging Face GPT-2 tensors cut as Megatron's tensor ranks hold them: (layers, word(t):
    rank t's rows of the embeddings padded to `padded`, layer(t, g): {canonical name (the keys
    of LAYER_TENSORS): rank t's piece of global layer g's tensor}, in the order of
    LAYER_TENSORS). query_key_value rows become [heads, 3, head dim], each rank taking its heads."""
    import torch
    L = 1 + max(int(k.split(".")[1]) for k in hf if k.startswith("h."))
    H = hf["wte.weight"].shape[1]
    V = hf["wte.weight"].shape[0]
    hn, k = H // heads, heads // tp
    wte = torch.cat([hf["wte.weight"], torch.zeros(padded - V, H)])

    def piece(x, dim, t):
        if dim is None:
            return x.clone()
        n = x.shape[dim] // tp
        return x.narrow(dim, t * n, n).contiguous().clone()

    def layer(t, g):
        e = lambda name: hf[f"h.{g}.{name}"]
        w = e("attn.c_attn.weight").t().reshape(3, heads, hn, H).transpose(0, 1)
        b = e("attn.c_attn.bias").reshape(3, heads, hn).transpose(0, 1)
        whole = {"ln1.weight": e("ln_1.weight"), "ln1.bias": e("ln_1.bias"),
                 "proj.weight": e("attn.c_proj.weight").t(), "proj.bias": e("attn.c_proj.bias"),
                 "ln2.weight": e("ln_2.weight"), "ln2.bias": e("ln_2.bias"),
                 "fc1.weight": e("mlp.c_fc.weight").t(), "fc1.bias": e("mlp.c_fc.bias"),
                 "fc2.weight": e("mlp.c_proj.weight").t(), "fc2.bias": e("mlp.c_proj.bias")}
        out = {}
        for canon in LAYER_TENSORS:
            if canon == "qkv.weight":
                out[canon] = w[t * k:(t + 1) * k].reshape(-1, H).contiguous()
            elif canon == "qkv.bias":
                out[canon] = b[t * k:(t + 1) * k].reshape(-1).contiguous()
            else:
                out[canon] = piece(whole[canon], split_dim(canon), t)
        return out

    return L, (lambda t: piece(wte, 0, t)), layer


def from_hf(hf, tp, pp, heads, padded):
    """The reverse of to_hf: per-rank model dicts {(t, p): dict} in the legacy GPTModel's names
    (the padding rows zero)."""
    L, word, layer = sharder(hf, tp, heads, padded)
    per = L // pp
    models = {}
    for t in range(tp):
        for p in range(pp):
            encoder = {}
            for i in range(per):
                for canon, x in layer(t, p * per + i).items():
                    encoder[f"layers.{i}." + LAYER_TENSORS[canon][0][0]] = x
            lm = {}
            model = {"language_model": lm}
            if p == 0:
                lm["embedding"] = {"word_embeddings": {"weight": word(t)},
                                   "position_embeddings": {"weight": hf["wpe.weight"].clone()}}
            lm["encoder"] = encoder
            if p == pp - 1:
                encoder["final_norm.weight"] = hf["ln_f.weight"].clone()
                encoder["final_norm.bias"] = hf["ln_f.bias"].clone()
                if pp > 1:  # the last stage's copy of the tied embedding
                    model["word_embeddings_for_head"] = {"weight": word(t)}
            models[(t, p)] = model
    return models


# A Megatron-Core layer's state dict in module registration order (named_parameters' order, and
# so the optimizer's): canonical tensors (LAYER_TENSORS' keys) and, for a module name, that
# module's _extra_state. The local spec: input_layernorm; self_attention (Attention makes
# core_attention, which has no state here, and linear_proj; SelfAttention then linear_qkv);
# pre_mlp_layernorm; mlp (linear_fc1, linear_fc2). Transformer Engine's: core_attention has an
# _extra_state, and the norms are linear_qkv's and linear_fc1's layer_norm_weight /
# layer_norm_bias, registered before their weight.
CORE_LAYER_ORDER = {
    "local": ["ln1.weight", "ln1.bias", "proj.weight", "proj.bias", "self_attention.linear_proj",
              "qkv.weight", "qkv.bias", "self_attention.linear_qkv", "ln2.weight", "ln2.bias",
              "fc1.weight", "fc1.bias", "mlp.linear_fc1", "fc2.weight", "fc2.bias",
              "mlp.linear_fc2"],
    "transformer_engine": [
        "self_attention.core_attention", "proj.weight", "proj.bias",
        "self_attention.linear_proj", "ln1.weight", "ln1.bias", "qkv.weight", "qkv.bias",
        "self_attention.linear_qkv", "ln2.weight", "ln2.bias", "fc1.weight", "fc1.bias",
        "mlp.linear_fc1", "fc2.weight", "fc2.bias", "mlp.linear_fc2"],
}


def from_hf_core(hf, tp, pp, heads, padded, te):
    """Per-rank flat state dicts {(t, p): dict} in Megatron-Core's GPTModel names, as its
    state_dict lists them: each module's parameters, then its _extra_state (Megatron's
    ColumnParallelLinear / RowParallelLinear and Transformer Engine's modules define one; None:
    both ignore it on load), in CORE_LAYER_ORDER within a layer (layers numbered within the
    stage), the embedding first (first stage), the final norm and output_layer last (last stage;
    its weight only with pipeline > 1: the tied embedding's copy). te: Transformer Engine's spec,
    else the local one."""
    return {(t, p): m for (t, p, _), m in core_chunks(hf, tp, pp, heads, padded, te).items()}


def core_chunks(hf, tp, pp, heads, padded, te, vp=1):
    """from_hf_core's state dicts for every model chunk {(t, p, v): dict}: with a virtual
    pipeline, chunk v of stage p holds global layers v L/vp + p L/(pp vp) on (Megatron-Core's
    get_transformer_layer_offset), the embedding in chunk 0 of stage 0, the final norm and the
    output layer in the last chunk of the last stage."""
    L, word, layer = sharder(hf, tp, heads, padded)
    per = L // (pp * vp)
    order = CORE_LAYER_ORDER["transformer_engine" if te else "local"]
    models = {}
    for t in range(tp):
        for p in range(pp):
            for v in range(vp):
                m = {}
                if p == 0 and v == 0:
                    m["embedding.word_embeddings.weight"] = word(t)
                    m["embedding.position_embeddings.weight"] = hf["wpe.weight"].clone()
                for i in range(per):
                    pieces = layer(t, v * (L // vp) + p * per + i)
                    pre = f"decoder.layers.{i}."
                    for item in order:
                        if item not in LAYER_TENSORS:
                            m[pre + item + "._extra_state"] = None
                            continue
                        names = LAYER_TENSORS[item][1]  # (local spec's, Transformer Engine's)
                        m[pre + names[1 if te and item.startswith("ln") else 0]] = pieces[item]
                if p == pp - 1 and v == vp - 1:
                    m["decoder.final_layernorm.weight"] = hf["ln_f.weight"].clone()
                    m["decoder.final_layernorm.bias"] = hf["ln_f.bias"].clone()
                    if pp > 1:  # the last stage's copy of the tied embedding
                        m["output_layer.weight"] = word(t)
                    m["output_layer._extra_state"] = None
                models[(t, p, v)] = m
    return models


def rng_state(seed, t, p):
    """Megatron's rng_state for tensor rank t, pipeline rank p, as its _set_random_seed leaves
    it for --seed `seed`: Python's, NumPy's and PyTorch's generators seeded with seed + 100 p;
    CUDA's (a Philox seed and offset, 8 bytes each) the same; the model-parallel tracker at
    that + 2718 + t, the data-parallel one at it, the expert-parallel one at it + 1024 + t.
    Megatron exits when a checkpoint has none (unless --no-load-rng or --finetune)."""
    import random
    import numpy
    import torch
    s = seed + 100 * p
    cuda = lambda x: torch.tensor(list(struct.pack("<Qq", x, 0)), dtype=torch.uint8)
    return [{"random_rng_state": random.Random(s).getstate(),
             "np_rng_state": numpy.random.RandomState(s).get_state(),
             "torch_rng_state": torch.Generator().manual_seed(s).get_state(),
             "cuda_rng_state": cuda(s),
             "rng_tracker_states": {"model-parallel-rng": cuda(s + 2718 + t),
                                    "data-parallel-rng": cuda(s),
                                    "expert-parallel-rng": cuda(s + 1024 + t)}}]


def scheduler_state(info, weight_decay):
    """OptimizerParamScheduler.state_dict() at the checkpoint: Megatron counts the schedule in
    samples (num_steps: the samples of the iterations that updated, fp16 overflows' skipped ones
    not counted, as Megatron steps its scheduler). Megatron asserts each value equals the one its
    own command line gives, unless --use-checkpoint-opt_param-scheduler (take these) or
    --override-opt-param-scheduler (take the command line's)."""
    return {"max_lr": float(info.get("max_lr", info.get("lr", 0.0))),
            "min_lr": float(info.get("min_lr", 0.0)),
            "lr_warmup_steps": int(info.get("lr_warmup_samples", 0)),
            "lr_decay_steps": int(info.get("lr_decay_samples", 0)),
            "lr_decay_style": str(info.get("lr_decay_style", "linear")),
            "num_steps": int(info.get("consumed_train_samples", 0))
            - int(info.get("skipped_samples", 0)),
            "start_wd": weight_decay, "end_wd": weight_decay, "wd_incr_style": "constant",
            "wd_incr_steps": int(info.get("train_samples", 0))}


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


def run_shape(args, where, vocab_size, pp=1, vp=1):
    """(heads, layers, vocab) from a run's args, checked."""
    heads = getattr(args, "num_attention_heads", None)
    layers = getattr(args, "num_layers", None)
    if heads is None or layers is None:
        fail(f"{where}: the checkpoint's args lack num_attention_heads / num_layers", 2)
    if layers % (pp * vp):
        fail(f"num_layers {layers} does not divide by pipeline {pp} x {vp} virtual chunks", 2)
    vocab = vocab_size or getattr(args, "vocab_size", 0) or (
        50257 if getattr(args, "tokenizer_type", "") == "GPT2BPETokenizer" else 0)
    if not vocab:
        fail("the vocabulary size is unknown: pass --vocab-size", 2)
    return heads, layers, vocab


def checkpoint_shape(shards, vocab_size):
    first = shards[(0, 0)][0]
    args = first.get("args")
    version = float(first.get("checkpoint_version", 0))
    if version < 2:
        fail(f"checkpoint_version {version}: query_key_value rows [3, heads, head dim] are not "
             "read", 2)
    pp = 1 + max(p for _, p in shards)
    vp = len(chunks_of(first))
    heads, layers, vocab = run_shape(args, shards[(0, 0)][1], vocab_size, pp, vp)
    if any(len(chunks_of(s)) != vp for s, _ in shards.values()):
        fail("the shards hold different numbers of virtual pipeline chunks", 2)
    return args, heads, layers, vocab, vp


def model_chunks(shards):
    """{(t, p, v): model dict} of every rank's chunks."""
    return {(t, p, v): c for (t, p), (s, _) in shards.items() for v, c in enumerate(chunks_of(s))}


class Opened:
    """A Megatron checkpoint of either format, read into Hugging Face GPT-2's layout:
    weights() and optimizer() -> (masters or None, exp_avg, exp_avg_sq, step, lr)."""

    def __init__(self, it_dir, vocab_size):
        self.dir = it_dir
        if is_torch_dist(it_dir):
            self.format = "torch_dist"
            self.ck = DistCheckpoint(it_dir)
            self.common = self.ck.common()
            if not isinstance(self.common, dict) or "args" not in self.common:
                fail(f"{it_dir}: the common state holds no args (not a Megatron checkpoint)", 2)
            self.args = self.common["args"]
            self.heads, self.layers, self.vocab = run_shape(self.args, it_dir, vocab_size)
            self.tp = int(getattr(self.args, "tensor_model_parallel_size", 1) or 1)
            self.pp = int(getattr(self.args, "pipeline_model_parallel_size", 1) or 1)
            self.vp = int(getattr(self.args, "virtual_pipeline_model_parallel_size", 1) or 1)
            self.iteration = int(self.common.get("iteration", 0) or 0)
        else:
            self.format = "torch"
            self.shards, self.tp, self.pp = load_shards(it_dir)
            self.args, self.heads, self.layers, self.vocab, self.vp = checkpoint_shape(
                self.shards, vocab_size)
            self.iteration = int(self.shards[(0, 0)][0].get("iteration", 0) or 0)

    def hf(self, full):
        return hf_tensors(full, self.heads, self.layers, self.vocab)

    def weights(self):
        if self.format == "torch_dist":
            return self.hf(self.ck.full("", self.layers))
        return self.hf(shard_full(model_chunks(self.shards), self.tp, self.pp, self.layers,
                                  self.vp))

    def optimizer(self):
        if self.format == "torch_dist":
            return self._dist_optimizer()
        masters, avg, avg_sq, steps, lrs = {}, {}, {}, set(), set()
        for (t, p), (state, where) in self.shards.items():
            if os.path.exists(os.path.join(where, "distrib_optim.pt")):
                m, e, e2, step, lr = distrib_rank_optimizer(state, where, self.args, p, self.pp)
            elif getattr(self.args, "use_distributed_optimizer", False):
                fail(f"{where}: the run used --use-distributed-optimizer but its distrib_optim.pt "
                     "is missing (saved with --no-save-optim?); import the weights alone with "
                     "--weights-only", 4)
            else:
                m, e, e2, step, lr = rank_optimizer(state, where)
            for v in range(self.vp):
                masters[(t, p, v)] = m[v] if m is not None else None
                avg[(t, p, v)], avg_sq[(t, p, v)] = e[v], e2[v]
            steps.add(step)
            lrs.add(lr)
        if len(steps) > 1:
            fail(f"{self.dir}: ranks at different Adam steps {sorted(steps)}", 2)
        full = lambda x: self.hf(shard_full(x, self.tp, self.pp, self.layers, self.vp))
        m = full(masters) if all(x is not None for x in masters.values()) else None
        return m, full(avg), full(avg_sq), steps.pop(), max(lrs)

    def _dist_optimizer(self):
        keys = list(self.ck.keys())
        has = lambda prefix: any(k.startswith(prefix) for k in keys)
        dp_reshardable = has("optimizer.distributed.")
        if not dp_reshardable and not has("optimizer.state.exp_avg."):
            fail(f"{self.dir}: no optimizer state (optimizer.state.exp_avg.*; saved with "
                 "--no-save-optim?); import the weights alone with --weights-only", 2)
        steps = find_step(self.common.get("optimizer", {}))
        if len(steps) != 1:
            fail(f"{self.dir}: Adam's step is " + (f"ambiguous ({sorted(steps)})" if steps else
                 "not in the common state (no common_step, no param_groups step)") +
                 "; import the weights alone with --weights-only", 2)
        lr = find_lr(self.common.get("optimizer", {})) or 0.0
        if dp_reshardable:
            return self._dp_reshardable() + (steps.pop(), lr)
        masters = next((p for p in ("optimizer.state.fp32_param.", "optimizer.state.param.")
                        if has(p)), None)
        full = lambda prefix: self.hf(self.ck.full(prefix, self.layers))
        return (full(masters) if masters else None, full("optimizer.state.exp_avg."),
                full("optimizer.state.exp_avg_sq."), steps.pop(), lr)


    def _dp_reshardable(self):
        """(masters, exp_avg, exp_avg_sq) from the distributed optimizer's default torch_dist
        layout: optimizer.distributed.dp_group_idx_G.gbuf_idx_B.dtype_D.bucket_idx_K.{param,
        exp_avg, exp_avg_sq}, each bucket a 1-D tensor of its numel_unpadded elements (the
        buffer layout of distrib_rank_optimizer's notes, cut per bucket), G the rank in the
        tensor x pipeline group (t + p x tensor), B the model chunk (one dtype a chunk). A
        chunk's parameter order is Megatron-Core's module order (core_chunks', the export's),
        for the spec the keys show."""
        import torch
        pattern = re.compile(r"optimizer\.distributed\.dp_group_idx_(\d+)\.gbuf_idx_(\d+)\."
                             r"dtype_.*\.bucket_idx_(\d+)\.(param|exp_avg|exp_avg_sq)$")
        found = {}
        for key in self.ck.keys():
            m = pattern.match(key)
            if m:
                found.setdefault((int(m[1]), int(m[2])), {}).setdefault(int(m[3]), {})[m[4]] = key
        args = self.args
        te = any("layer_norm_weight" in k for k in self.ck.keys())
        div = int(getattr(args, "make_vocab_size_divisible_by", 128) or 128) * self.tp
        padded = int(getattr(args, "padded_vocab_size", 0) or -(-self.vocab // div) * div)
        dtype = (torch.bfloat16 if getattr(args, "bf16", False) else
                 torch.float16 if getattr(args, "fp16", False) else torch.float32)
        chunks = core_chunks(self.weights(), self.tp, self.pp, self.heads, padded, te, self.vp)
        models = [{}, {}, {}]
        for t in range(self.tp):
            for p in range(self.pp):
                g = t + p * self.tp
                buffers = sorted(b for (gg, b) in found if gg == g)
                if buffers != list(range(self.vp)):
                    fail(f"{self.dir}: rank (tensor {t}, pipeline {p}) should hold a buffer per "
                         f"model chunk (optimizer.distributed.dp_group_idx_{g}.gbuf_idx_0.. "
                         f"{self.vp - 1}), the checkpoint has {buffers or 'none'}: not the "
                         "distributed optimizer of this model", 2)
                params_by_chunk = [[(n, x) for n, x in chunks[(t, p, v)].items()
                                    if x is not None] for v in range(self.vp)]
                rank_numel = sum(x.numel() for c in params_by_chunk for _, x in c)
                for v, params in enumerate(params_by_chunk):
                    where = f"{self.dir}: optimizer.distributed.dp_group_idx_{g}.gbuf_idx_{v}"
                    buckets = found[(g, v)]
                    if sorted(buckets) != list(range(len(buckets))) or any(
                            len(b) != 3 for b in buckets.values()):
                        fail(f"{where}: buckets {sorted(buckets)} are not 0.. each with param, "
                             "exp_avg and exp_avg_sq", 2)
                    world = {k: torch.cat([self.ck.tensor(buckets[b][k]).reshape(-1)
                                           for b in range(len(buckets))])
                             for k in ("param", "exp_avg", "exp_avg_sq")}
                    size = chunk_bucket_size(args, p, v, rank_numel)
                    shared = [shared_embedding(n, p, self.pp, v, self.vp) for n, _ in params]
                    got = unpack_buffer(params, world, size, shared, where, dtype)
                    for (n, _), values in zip(params, got):
                        for j in range(3):
                            models[j].setdefault((t, p, v), {})[n] = values[j]
        return tuple(self.hf(shard_full(m, self.tp, self.pp, self.layers, self.vp))
                     for m in models)


def read(a):
    need_torch()
    it_dir = iteration_dir(a.dir)
    ck = Opened(it_dir, a.vocab_size)
    args = ck.args
    weights = ck.weights()
    info = {"iteration": ck.iteration,
            "consumed_train_samples": int(getattr(args, "consumed_train_samples", 0) or 0),
            "consumed_valid_samples": int(getattr(args, "consumed_valid_samples", 0) or 0),
            "flags": megatron_flags(args), "tensor": ck.tp, "pipeline": ck.pp,
            "vocab_size": ck.vocab, "has_optimizer": not a.weights_only, "optimizer_steps": 0,
            "lr": 0.0, "source": os.path.abspath(it_dir), "format": ck.format}
    if not a.weights_only:
        masters, avg, avg_sq, info["optimizer_steps"], info["lr"] = ck.optimizer()
        if masters is not None:
            weights = masters  # the fp32 masters
        write_safetensors(os.path.join(a.out, "exp_avg.safetensors"), avg)
        write_safetensors(os.path.join(a.out, "exp_avg_sq.safetensors"), avg_sq)
    write_safetensors(os.path.join(a.out, "model.safetensors"), weights)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(hf_config(weights, ck.layers, ck.heads, args), f, indent=1)
    with open(os.path.join(a.out, "megatron.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"read {it_dir} ({ck.format}): tensor {ck.tp} x pipeline {ck.pp}"
          + (f" x {ck.vp} virtual chunks" if ck.vp > 1 else "")
          + f", {ck.layers} layers, {ck.heads} heads, vocab {ck.vocab}, iteration "
          f"{info['iteration']}, "
          + (f"Adam step {info['optimizer_steps']}" if not a.weights_only else "weights only"))


def write(a):
    need_torch()
    import argparse as ns
    import torch
    legacy = a.transformer_impl == "legacy"
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
                        use_distributed_optimizer=False, seed=int(info.get("seed", 1234)),
                        lr=float(info.get("max_lr", info.get("lr", 0.0))),
                        min_lr=float(info.get("min_lr", 0.0)),
                        lr_decay_style=info.get("lr_decay_style", "linear"),
                        weight_decay=float(info.get("weight_decay", 0.01)),
                        adam_beta1=float(info.get("adam_beta1", 0.9)),
                        adam_beta2=float(info.get("adam_beta2", 0.999)),
                        adam_eps=float(info.get("adam_eps", 1e-8)),
                        ckpt_format="torch", use_legacy_models=legacy,
                        use_mcore_models=not legacy,
                        transformer_impl="local" if legacy else a.transformer_impl)
    convert = (lambda x: from_hf(x, tp, pp, HEADS, padded)) if legacy else (
        lambda x: from_hf_core(x, tp, pp, HEADS, padded, a.transformer_impl == "transformer_engine"))
    models = convert(hf)
    if with_optim:
        avg = convert(read_safetensors(os.path.join(a.src, "exp_avg.safetensors")))
        avg_sq = convert(read_safetensors(os.path.join(a.src, "exp_avg_sq.safetensors")))
    weight_decay = float(info.get("weight_decay", 0.01))
    it_dir = os.path.join(a.out, f"iter_{iteration:07d}")
    for (t, p), model in models.items():
        state = {"model": model, "args": args, "checkpoint_version": 3.0,
                 "iteration": iteration, "rng_state": rng_state(args.seed, t, p)}
        if with_optim:
            params = param_groups_order(flatten(model))
            values = dict(flatten(model))
            e, e2 = dict(flatten(avg[(t, p)])), dict(flatten(avg_sq[(t, p)]))
            n_wd = sum(1 for path, x in params
                       if not (".".join(path).endswith(".bias") or x.dim() == 1))
            step = int(info.get("optimizer_steps", 0))
            # Adam's hyperparameters as the run had them: torch's load_state_dict restores a
            # group's betas, eps and weight decay from the checkpoint, so Megatron resumes with
            # these (the learning rate its scheduler sets each step). The step in each group
            # too (Transformer Engine's and apex's FusedAdam keep it there), and the fields by
            # which Megatron-Core pairs a saved group with its own (_filter_and_reorder_param_
            # groups: max_lr, min_lr, wd_mult, lr_mult, is_expert_parallel, is_decoupled_lr;
            # a group it cannot pair is a ValueError), valued as its _get_param_groups makes them.
            group = {"lr": float(info.get("lr", 0.0)),
                     "betas": (args.adam_beta1, args.adam_beta2), "eps": args.adam_eps,
                     "bias_correction": True, "amsgrad": False, "step": step,
                     "lr_mult": 1.0, "is_expert_parallel": False, "is_decoupled_lr": False,
                     "default_config": True, "max_lr": args.lr, "min_lr": args.min_lr}
            adam = {"state": {i: {"step": step, "exp_avg": e[path], "exp_avg_sq": e2[path]}
                              for i, (path, _) in enumerate(params)},
                    "param_groups": [
                        dict(group, params=list(range(n_wd)), weight_decay=weight_decay,
                             wd_mult=1.0),
                        dict(group, params=list(range(n_wd, len(params))), weight_decay=0.0,
                             wd_mult=0.0)]}
            if bf16:  # Float16OptimizerWithFloat16Params: bf16 weights, fp32 masters
                masters = [[values[path].clone() for path, _ in params[:n_wd]],
                           [values[path].clone() for path, _ in params[n_wd:]]]
                state["model"] = to_bf16(model)
                state["optimizer"] = {"optimizer": adam, "fp32_from_fp16_params": masters}
            else:
                state["optimizer"] = adam
            state["opt_param_scheduler"] = scheduler_state(info, weight_decay)
        d = os.path.join(it_dir, f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else ""))
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, "model_optim_rng.pt.tmp")
        torch.save(state, tmp)
        os.replace(tmp, os.path.join(d, "model_optim_rng.pt"))
    with open(os.path.join(a.out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(iteration))
    names = "the legacy GPTModel's names" if legacy else \
        f"Megatron-Core's names (--transformer-impl {a.transformer_impl})"
    print(f"wrote {it_dir}: tensor {tp} x pipeline {pp}, {L} layers, hidden {H}, {HEADS} heads, "
          f"vocab {V} padded to {padded}, {names}"
          + (", with the optimizer state" if with_optim else ""))


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
    w.add_argument("--transformer-impl", default="transformer_engine",
                   choices=["transformer_engine", "local", "legacy"],
                   help="Megatron-Core's names for its Transformer Engine or local spec, or the "
                        "legacy GPTModel's")
    a = ap.parse_args()
    read(a) if a.cmd == "read" else write(a)


if __name__ == "__main__":
    main()
