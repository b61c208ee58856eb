#!/usr/bin/python3
"""mtnlg-ckpt import --format megatron and scripts/megatron_to_hf.py against Megatron-Core
checkpoints written here as Megatron-Core saves them, with Debian's PyTorch 1.13:

- the legacy `torch` format with Megatron-Core's names (a flat state dict per rank:
  embedding.word_embeddings.weight, decoder.layers.I.self_attention.linear_qkv.weight, ... with
  Transformer Engine's fused norms, linear_qkv.layer_norm_weight, and its _extra_state);
- the `torch_dist` format (PyTorch's distributed checkpoint: ITER/.metadata, a pickle of
  torch.distributed.checkpoint.metadata.Metadata, and ITER/__R_0.distcp files holding
  torch.save of each chunk), in Megatron-Core's two key layouts: layers stacked along a first
  axis (decoder.layers.self_attention.linear_qkv.weight [layers, 3h, h]) and one key per global
  layer (decoder.layers.3.self_attention...); the common state in common.pt or inside the
  checkpoint (common_state/shard_0_1); the non-distributed optimizer's
  optimizer.state.{exp_avg,exp_avg_sq,fp32_param}.KEY with Adam's common_step, the distributed
  optimizer saved fully reshardable (optimizer.state.param.KEY, the step in param_groups), and
  its default dp_reshardable buffers (optimizer.distributed.*: the buffers laid out and
  gathered as Megatron-Core does, tests/checkpoint/megatron_fixture.py).

PyTorch 2's torch.distributed.checkpoint is not on this machine: the index's classes are
written here under their PyTorch 2 module names and fields (a stand-in module registered in
sys.modules), so the pickle holds what PyTorch 2 writes; args hold an enum of a Megatron module
this machine lacks (megatron.core.transformer.enums.AttnBackend), as real args do.

Imported, a checkpoint must hold the fp32 masters bit for bit, Adam's moments bit for bit, the
iteration, the data position and Adam's step; mtnlg-eval's loss through it must equal the
masters'; mtnlg-train continues from it. Bad input: a truncated .distcp, a missing .metadata, a
missing chunk, each exit 4 naming the file or key. The other way, export --format megatron
--transformer-impl transformer_engine / local: each rank's file as Megatron-Core's
load_checkpoint reads it (section 7).
Usage: megatron_core_import_test.py BUILD_DIR SOURCE_DIR"""
import argparse
import dataclasses
import enum
import io
import json
import os
import pickle
import re
import shutil
import struct
import sys
import tempfile
import types
from typing import Any, Optional

import torch

build, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "scripts"))
import megatron_ckpt as mc  # noqa: E402  (its safetensors reader only)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_fixture as mf  # noqa: E402

tmp = tempfile.mkdtemp(prefix="megatron-core-import-")
L, H, HEADS, V, P = 4, 64, 4, 500, 32
ITER, CONSUMED, STEP, LR = 9, 72, 9, 2.0e-4
check = mf.Checks()
run = mf.run


# ---- PyTorch 2's distributed-checkpoint records, under their own module names ----

def stand_in_module(name, **classes):
    m = types.ModuleType(name)
    for k, cls in classes.items():
        cls.__module__, cls.__qualname__ = name, k
        setattr(m, k, cls)
    sys.modules[name] = m
    return m


@dataclasses.dataclass
class ChunkStorageMetadata:
    offsets: torch.Size
    sizes: torch.Size


class _MEM_FORMAT_ENCODING(enum.Enum):
    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


@dataclasses.dataclass
class TensorProperties:
    dtype: torch.dtype = torch.float32
    layout: Any = torch.strided
    requires_grad: bool = False
    memory_format: Any = None
    pin_memory: bool = False

    def __getstate__(self):  # PyTorch 2's: memory_format as an enum, the rest as is
        return (self.dtype, self.layout, self.requires_grad,
                _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT, self.pin_memory)

    def __setstate__(self, state):
        self.dtype, self.layout, self.requires_grad, _, self.pin_memory = state


@dataclasses.dataclass
class TensorStorageMetadata:
    properties: TensorProperties
    size: torch.Size
    chunks: list


@dataclasses.dataclass
class BytesStorageMetadata:
    pass


@dataclasses.dataclass
class StorageMeta:
    checkpoint_id: Any = None
    save_id: Optional[str] = None
    load_id: Optional[str] = None
    modules: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Metadata:
    state_dict_metadata: dict
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Optional[StorageMeta] = None
    version: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class MetadataIndex:
    fqn: str
    offset: Optional[torch.Size] = None
    index: Optional[int] = dataclasses.field(hash=False, compare=False, default=None)


@dataclasses.dataclass
class _StorageInfo:
    relative_path: str
    offset: int
    length: int
    transform_descriptors: Optional[list] = None


stand_in_module("torch.distributed.checkpoint")
stand_in_module("torch.distributed.checkpoint.metadata", ChunkStorageMetadata=ChunkStorageMetadata,
                _MEM_FORMAT_ENCODING=_MEM_FORMAT_ENCODING, TensorProperties=TensorProperties,
                TensorStorageMetadata=TensorStorageMetadata,
                BytesStorageMetadata=BytesStorageMetadata, StorageMeta=StorageMeta,
                Metadata=Metadata, MetadataIndex=MetadataIndex)
stand_in_module("torch.distributed.checkpoint.filesystem", _StorageInfo=_StorageInfo)


class AttnBackend(enum.Enum):  # Megatron-Core's, inside every args since 2024
    flash = 1
    fused = 2
    unfused = 3
    local = 4
    auto = 5


for parent in ("megatron", "megatron.core", "megatron.core.transformer"):
    stand_in_module(parent)
stand_in_module("megatron.core.transformer.enums", AttnBackend=AttnBackend)


# ---- the model in Megatron-Core's names ----

ref = mf.Reference(src, tmp, mc.read_safetensors, L, H, HEADS, V, P, model_seed=5,
                   moment_seed=13)
ref_dir, masters, avg, avg_sq, corpus = ref.dir, ref.masters, ref.avg, ref.avg_sq, ref.corpus


def mcore_layer(hf, g, te):
    """Layer g of HF GPT-2 tensors in Megatron-Core's names (unsharded), in its modules'
    registration order (the order of its state dict and of named_parameters): TransformerLayer's
    input_layernorm (the local spec), self_attention (Attention makes core_attention and
    linear_proj, then SelfAttention linear_qkv; Transformer Engine's LayerNormLinear registers
    layer_norm_weight, layer_norm_bias, weight, bias), pre_mlp_layernorm (local), mlp
    (linear_fc1, linear_fc2). linear_qkv rows are [heads, 3, head dim] (per query group: its
    query heads, then k, then v)."""
    hn = H // HEADS
    e = lambda n: hf[f"h.{g}.{n}"]
    out = {}
    if not te:
        out["input_layernorm.weight"], out["input_layernorm.bias"] = e("ln_1.weight"), e("ln_1.bias")
    out["self_attention.linear_proj.weight"] = e("attn.c_proj.weight").t()
    out["self_attention.linear_proj.bias"] = e("attn.c_proj.bias")
    if te:
        out["self_attention.linear_qkv.layer_norm_weight"] = e("ln_1.weight")
        out["self_attention.linear_qkv.layer_norm_bias"] = e("ln_1.bias")
    out["self_attention.linear_qkv.weight"] = \
        e("attn.c_attn.weight").t().reshape(3, HEADS, hn, H).transpose(0, 1).reshape(-1, H)
    out["self_attention.linear_qkv.bias"] = \
        e("attn.c_attn.bias").reshape(3, HEADS, hn).transpose(0, 1).reshape(-1)
    norm2 = "mlp.linear_fc1.layer_norm_" if te else "pre_mlp_layernorm."
    out[norm2 + "weight"], out[norm2 + "bias"] = e("ln_2.weight"), e("ln_2.bias")
    out["mlp.linear_fc1.weight"] = e("mlp.c_fc.weight").t()
    out["mlp.linear_fc1.bias"] = e("mlp.c_fc.bias")
    out["mlp.linear_fc2.weight"] = e("mlp.c_proj.weight").t()
    out["mlp.linear_fc2.bias"] = e("mlp.c_proj.bias")
    return out


# The dim tensor-parallel ranks split (absent: replicated).
TP_DIM = {"self_attention.linear_qkv.weight": 0, "self_attention.linear_qkv.bias": 0,
          "self_attention.linear_proj.weight": 1, "mlp.linear_fc1.weight": 0,
          "mlp.linear_fc1.bias": 0, "mlp.linear_fc2.weight": 1,
          "embedding.word_embeddings.weight": 0}


def padded_wte(hf, tp):
    padded = -(-V // (128 * tp)) * 128 * tp
    return torch.cat([hf["wte.weight"], torch.zeros(padded - V, H)]), padded


def make_args(tp, pp, **over):
    args = argparse.Namespace(
        num_layers=L, hidden_size=H, num_attention_heads=HEADS, ffn_hidden_size=4 * H,
        seq_length=P, max_position_embeddings=P, micro_batch_size=2, global_batch_size=8,
        train_iters=30, lr=3e-4, min_lr=3e-5, lr_decay_style="cosine", lr_warmup_iters=2,
        weight_decay=0.01, adam_beta1=0.9, adam_beta2=0.95, clip_grad=1.0, seed=1234,
        bf16=True, fp16=False, tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
        data_path=["1.0", corpus], split="100,0,0", tokenizer_type="GPT2BPETokenizer",
        vocab_size=V, padded_vocab_size=padded_wte(masters, tp)[1],
        make_vocab_size_divisible_by=128, layernorm_epsilon=1e-5, bias_gelu_fusion=True,
        add_bias_linear=True, position_embedding_type="learned_absolute",
        normalization="LayerNorm", hidden_dropout=0.0, attention_dropout=0.0,
        eval_interval=1000, eval_iters=0, consumed_train_samples=CONSUMED,
        consumed_valid_samples=0, iteration=ITER, use_distributed_optimizer=False,
        transformer_impl="transformer_engine", attention_backend=AttnBackend.auto,
        ckpt_format="torch_dist", use_mcore_models=True)
    for k, v in over.items():
        setattr(args, k, v)
    return args


# ---- the legacy torch format with Megatron-Core's names ----

def mcore_torch_checkpoint(root, tp, pp):
    """Rank (t, p)'s flat state dict: decoder.layers.I numbered within the stage, Transformer
    Engine's fused norms and _extra_state, the last stage's output_layer.weight (the tied
    embedding's copy) with pipeline > 1; Float16OptimizerWithFloat16Params' state in
    named_parameters order (weight-decayed first)."""
    per = L // pp
    wte, _ = padded_wte(masters, tp)
    it = os.path.join(root, f"iter_{ITER:07d}")
    for t in range(tp):
        def piece(name, x):
            d = TP_DIM.get(name)
            if d is None:
                return x.clone()
            n = x.shape[d] // tp
            return x.narrow(d, t * n, n).clone()
        for p in range(pp):
            def rank_model(hf, wte):
                m = {}
                if p == 0:
                    m["embedding.word_embeddings.weight"] = piece(
                        "embedding.word_embeddings.weight", wte)
                    m["embedding.position_embeddings.weight"] = hf["wpe.weight"].clone()
                for i in range(per):
                    m[f"decoder.layers.{i}.self_attention.core_attention._extra_state"] = None
                    module = None
                    for n, x in mcore_layer(hf, p * per + i, te=True).items():
                        if module and not n.startswith(module + "."):
                            # Transformer Engine's modules end with their _extra_state.
                            m[f"decoder.layers.{i}.{module}._extra_state"] = io.BytesIO()
                        module = n.rsplit(".", 1)[0]
                        m[f"decoder.layers.{i}.{n}"] = piece(n, x)
                    m[f"decoder.layers.{i}.{module}._extra_state"] = io.BytesIO()
                if p == pp - 1:
                    m["decoder.final_layernorm.weight"] = hf["ln_f.weight"].clone()
                    m["decoder.final_layernorm.bias"] = hf["ln_f.bias"].clone()
                    if pp > 1:
                        m["output_layer.weight"] = piece("embedding.word_embeddings.weight", wte)
                return m
            model = rank_model(masters, wte)
            e = rank_model(avg, padded_wte(avg, tp)[0])
            e2 = rank_model(avg_sq, padded_wte(avg_sq, tp)[0])
            params = [(n, x) for n, x in model.items() if torch.is_tensor(x)]
            wd = [(n, x) for n, x in params if not (n.endswith(".bias") or x.dim() == 1)]
            no_wd = [(n, x) for n, x in params if n.endswith(".bias") or x.dim() == 1]
            order = wd + no_wd
            adam = {"state": {i: {"step": torch.tensor(float(STEP)), "exp_avg": e[n].clone(),
                                  "exp_avg_sq": e2[n].clone()}
                              for i, (n, _) in enumerate(order)},
                    "param_groups": [{"params": list(range(len(wd))), "lr": LR,
                                      "weight_decay": 0.01},
                                     {"params": list(range(len(wd), len(order))), "lr": LR,
                                      "weight_decay": 0.0}]}
            saved = {n: (x.bfloat16() if torch.is_tensor(x) else x) for n, x in model.items()}
            state = {"args": make_args(tp, pp, ckpt_format="torch"), "checkpoint_version": 3.0,
                     "iteration": ITER, "model": saved,
                     "optimizer": {"optimizer": adam, "fp32_from_fp16_params":
                                   [[x.clone() for _, x in wd], [x.clone() for _, x in no_wd]]}}
            d = os.path.join(it, f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else ""))
            os.makedirs(d)
            torch.save(state, os.path.join(d, "model_optim_rng.pt"))
    mf.write_latest(root, ITER)


LINEARS = ("self_attention.linear_proj", "self_attention.linear_qkv", "mlp.linear_fc1",
           "mlp.linear_fc2")


def core_state(hf, t, p, tp, pp, te, v=0, vp=1):
    """Rank (t, p)'s Megatron-Core state dict (values; None for an _extra_state), in its order:
    each module's parameters, then its _extra_state (Megatron's parallel linears and every
    Transformer Engine module have one; the local spec's norms and attention do not). With a
    virtual pipeline, its chunk v: layers v L/vp + p L/(pp vp) on (get_transformer_layer_offset),
    the embedding in stage 0's chunk 0, the final norm and output layer in the last one."""
    per = L // (pp * vp)
    wte, _ = padded_wte(hf, tp)

    def piece(name, x):
        d = TP_DIM.get(name)
        return x.clone() if d is None else x.narrow(d, t * (x.shape[d] // tp), x.shape[d] // tp)

    m = {}
    if p == 0 and v == 0:
        m["embedding.word_embeddings.weight"] = piece("embedding.word_embeddings.weight", wte)
        m["embedding.position_embeddings.weight"] = hf["wpe.weight"].clone()
    for i in range(per):
        pre = f"decoder.layers.{i}."
        if te:
            m[pre + "self_attention.core_attention._extra_state"] = None
        items = list(mcore_layer(hf, v * (L // vp) + p * per + i, te).items())
        for j, (n, x) in enumerate(items):
            m[pre + n] = piece(n, x)
            module = n.rsplit(".", 1)[0]
            last = j + 1 == len(items) or items[j + 1][0].rsplit(".", 1)[0] != module
            if last and module in LINEARS:
                m[pre + module + "._extra_state"] = None
    if p == pp - 1 and v == vp - 1:
        m["decoder.final_layernorm.weight"] = hf["ln_f.weight"].clone()
        m["decoder.final_layernorm.bias"] = hf["ln_f.bias"].clone()
        if pp > 1:
            m["output_layer.weight"] = piece("embedding.word_embeddings.weight", wte)
        m["output_layer._extra_state"] = None
    return m


# ---- the torch_dist format ----

def dcp_items(hf, prefix, tp, pp, stacked, te, dtype):
    """Megatron-Core's sharded tensors of one state (weights, a moment, the masters): {key:
    (global tensor, [(offsets, sizes, rank), ...])}; each chunk written by the rank (t, p) that
    holds it, a replicated one by tensor rank 0 alone (Megatron-Core saves one replica)."""
    wte, _ = padded_wte(hf, tp)
    items = {}

    def add(key, x, tp_dim, layer=None, stage=0):
        x = x.to(dtype)
        chunks = []
        for t in range(tp if tp_dim is not None else 1):
            offsets, sizes = [0] * x.dim(), list(x.shape)
            if tp_dim is not None:
                n = x.shape[tp_dim] // tp
                offsets[tp_dim], sizes[tp_dim] = t * n, n
            if layer is not None:  # the stacked layer axis
                offsets, sizes = [layer] + offsets, [1] + sizes
            chunks.append((offsets, sizes, stage * tp + t))
        if layer is not None:
            g, c = items.setdefault(prefix + key, (torch.zeros((L,) + tuple(x.shape),
                                                               dtype=dtype), []))
            g[layer] = x
            c.extend(chunks)
        else:
            items[prefix + key] = (x, chunks)

    add("embedding.word_embeddings.weight", wte, 0)
    add("embedding.position_embeddings.weight", hf["wpe.weight"], None)
    for g in range(L):
        stage = g // (L // pp)
        for n, x in mcore_layer(hf, g, te).items():
            if stacked:
                add(f"decoder.layers.{n}", x, TP_DIM.get(n), layer=g, stage=stage)
            else:
                add(f"decoder.layers.{g}.{n}", x, TP_DIM.get(n), stage=stage)
    add("decoder.final_layernorm.weight", hf["ln_f.weight"], None, stage=pp - 1)
    add("decoder.final_layernorm.bias", hf["ln_f.bias"], None, stage=pp - 1)
    return items


def write_dcp(it_dir, items, byte_items, ranks):
    """PyTorch's FileSystemWriter: rank r's items in __r_0.distcp (bytes items first, then
    tensors, each tensor chunk as torch.save of the chunk), the index in .metadata."""
    os.makedirs(it_dir)
    sd_meta, storage = {}, {}
    files = {r: io.BytesIO() for r in range(ranks)}

    def put(rank, fqn, offset, data):
        f = files[rank]
        start = f.tell()
        f.write(data)
        storage[MetadataIndex(fqn, torch.Size(offset) if offset is not None else None)] = \
            _StorageInfo(f"__{rank}_0.distcp", start, len(data))

    for fqn, (rank, data) in byte_items.items():
        sd_meta[fqn] = BytesStorageMetadata()
        put(rank, fqn, [0], data)
    for fqn, (x, chunks) in items.items():
        metas = []
        for offsets, sizes, rank in chunks:
            piece = x[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))].clone()
            buf = io.BytesIO()
            torch.save(piece, buf)
            put(rank, fqn, offsets, buf.getvalue())
            metas.append(ChunkStorageMetadata(torch.Size(offsets), torch.Size(sizes)))
        sd_meta[fqn] = TensorStorageMetadata(TensorProperties(dtype=x.dtype), x.shape, metas)
    for r, f in files.items():
        with open(os.path.join(it_dir, f"__{r}_0.distcp"), "wb") as out:
            out.write(f.getvalue())
    with open(os.path.join(it_dir, ".metadata"), "wb") as f:
        pickle.dump(Metadata(sd_meta, planner_data={}, storage_data=storage,
                             storage_meta=StorageMeta(checkpoint_id=it_dir), version="1.0.0"), f)
    with open(os.path.join(it_dir, "metadata.json"), "w") as f:
        json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                   "common_backend": "torch", "common_backend_version": 1}, f)


def torch_dist_checkpoint(root, tp, pp, optimizer="float16", stacked=True, te=True,
                          common_inside=False, bf16=True, vp=1):
    it = os.path.join(root, f"iter_{ITER:07d}")
    wdtype = torch.bfloat16 if bf16 else torch.float32
    items = dcp_items(masters, "", tp, pp, stacked, te, wdtype)
    byte_items_dp = {}
    args = make_args(tp, pp, bf16=bf16, use_distributed_optimizer=optimizer != "float16")
    group = lambda wd: {"lr": LR, "weight_decay": wd, "betas": (0.9, 0.95), "eps": 1e-8}
    common = {"args": args, "checkpoint_version": 3.0, "iteration": ITER,
              "num_floating_point_operations_so_far": 0}
    if optimizer not in (None, "dp_reshardable"):
        items.update(dcp_items(avg, "optimizer.state.exp_avg.", tp, pp, stacked, te,
                               torch.float32))
        items.update(dcp_items(avg_sq, "optimizer.state.exp_avg_sq.", tp, pp, stacked, te,
                               torch.float32))
    if optimizer == "float16":  # Float16OptimizerWithFloat16Params: one common_step
        if bf16:
            items.update(dcp_items(masters, "optimizer.state.fp32_param.", tp, pp, stacked, te,
                                   torch.float32))
        common["optimizer"] = {"optimizer": {"state": {"common_step": STEP},
                                             "param_groups": [group(0.01), group(0.0)]},
                               "grad_scaler": {"scale": 1.0}}
    elif optimizer == "fully_reshardable":  # the distributed optimizer, model-space tensors
        items.update(dcp_items(masters, "optimizer.state.param.", tp, pp, stacked, te,
                               torch.float32))
        common["optimizer"] = {"optimizer": {"param_groups": [dict(group(0.01), step=STEP),
                                                              dict(group(0.0), step=STEP)]},
                               "param_state_sharding_type": "fully_reshardable"}
    elif optimizer == "dp_reshardable":  # the distributed optimizer's default: its buckets
        dp, size = 2, 20000  # --overlap-grad-reduce --ddp-bucket-size 20000 on 2 data ranks
        args.data_parallel_size, args.overlap_grad_reduce, args.ddp_bucket_size = dp, True, size
        dtype = "dtype_(torch.bfloat16, torch.float32)" if bf16 else "dtype_(torch.float32, torch.float32)"
        if vp > 1:
            args.virtual_pipeline_model_parallel_size = vp
        for t, p in ((t, p) for t in range(tp) for p in range(pp)):
            per_bucket = []
            for v in range(vp):  # a buffer per model chunk: gbuf_idx_v
                values = {k: core_state(x, t, p, tp, pp, te, v, vp) for k, x in
                          (("param", masters), ("exp_avg", avg), ("exp_avg_sq", avg_sq))}
                params = [(n, x) for n, x in values["param"].items() if x is not None]
                first, last = p == 0 and v == 0, p == pp - 1 and v == vp - 1
                shared = lambda n: pp > 1 and (
                    (first and not last and n == "embedding.word_embeddings.weight")
                    or (last and not first and n == "output_layer.weight"))
                index, buckets, unpadded = mf.megatron_buffer(
                    params, size if (p == 0 and v == 0) else None, dp, shared)
                per_bucket.append(unpadded)
                prefix = f"optimizer.distributed.dp_group_idx_{t + p * tp}."
                for key, vals in values.items():
                    for b, x in enumerate(mf.gathered_buckets(vals, index, buckets, unpadded, dp)):
                        # Each data rank writes its shard of the bucket, cut at numel_unpadded.
                        local = (buckets[b][1] - buckets[b][0]) // dp
                        chunks = [([r * local], [min(x.numel(), (r + 1) * local) - r * local],
                                   p * tp + t) for r in range(dp) if r * local < x.numel()]
                        items[f"{prefix}gbuf_idx_{v}.{dtype}.bucket_idx_{b}.{key}"] = (x, chunks)
            byte_items_dp[f"optimizer.distributed.dp_group_idx_{t + p * tp}."
                          "per_bucket_numel_unpadded/shard_0_1"] = (p * tp + t,
                                                                    pickle.dumps(per_bucket))
        common["optimizer"] = {"optimizer": {"param_groups": [dict(group(0.01), step=STEP),
                                                              dict(group(0.0), step=STEP)]},
                               "param_state_sharding_type": "dp_reshardable"}
    byte_items = {"rng_state/shard_0.0_1.1": (0, b"\x80\x04]\x94.")}
    byte_items.update(byte_items_dp)
    if te:
        for g in range(L):
            byte_items[f"decoder.layers.self_attention.linear_qkv._extra_state/shard_{g}_{L}"] = (
                0, b"\x80\x04N.")
    if common_inside:
        buf = io.BytesIO()
        torch.save([common], buf)
        byte_items["common_state/shard_0_1"] = (0, buf.getvalue())
    write_dcp(it, items, byte_items, tp * pp)
    if not common_inside:
        torch.save(common, os.path.join(it, "common.pt"))
    mf.write_latest(root, ITER)


# ---- the checks ----

def eval_loss(*model):
    return ref.eval_loss(build, *model)  # on the reference's corpus


ckpt = f"{build}/mtnlg-ckpt"
want_loss = eval_loss("--hf-model", os.path.join(ref_dir, "model.safetensors"))
check(f"the reference loss ({want_loss[:80]})", want_loss.startswith("{"))


def exported(out, name):
    hf = os.path.join(tmp, name, "model.safetensors")
    r = run(ckpt, "export", out, "--output", hf)
    return mc.read_safetensors(hf) if r.returncode == 0 else {}


def equal(a, b):
    return sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in b)


def imports(name, meg, layout, moments=True, extra=(), loss=False):
    """Imports meg; checks the masters, moments, iteration, position and step (and with `loss`,
    mtnlg-eval's loss through it); returns out."""
    out = os.path.join(tmp, "imported-" + name)
    r = run(ckpt, "import", "--format", "megatron", meg, "--output", out, "--layout", layout,
            *extra)
    text = (r.stdout + r.stderr).strip()
    check(f"{name}: imports ({text[-300:]})", r.returncode == 0)
    if r.returncode != 0:
        return None
    manifest = json.load(open(os.path.join(out, f"iter_{ITER:07d}", "manifest.json")))
    if loss:
        check(f"{name}: mtnlg-eval's loss through it is the masters' loss",
              eval_loss("--checkpoint", out) == want_loss)
    # --weights-only of a bf16 run: its bf16 weights (widened), not the optimizer's masters.
    want = masters if moments else {k: v.bfloat16().float() for k, v in masters.items()}
    check(f"{name}: the weights are the run's " + ("fp32 masters" if moments else "bf16 weights")
          + " bit for bit", equal(exported(out, "hf-" + name), want))
    if moments:
        check(f"{name}: the iteration, the data position and Adam's step carried over",
              (manifest["iteration"], manifest["consumed_samples"], manifest["optimizer_steps"],
               manifest["has_optimizer"]) == (ITER, CONSUMED, STEP, True))
        back = os.path.join(tmp, "back-" + name)
        again = os.path.join(tmp, "again-" + name)
        r1 = run(ckpt, "export", "--format", "megatron", out, "--output", back)
        r2 = run(sys.executable, f"{src}/scripts/megatron_ckpt.py", "read", back, again)
        ok = r1.returncode == 0 and r2.returncode == 0
        check(f"{name}: Adam's moments bit for bit (exported to Megatron and read back)",
              ok and equal(mc.read_safetensors(os.path.join(again, "exp_avg.safetensors")), avg)
              and equal(mc.read_safetensors(os.path.join(again, "exp_avg_sq.safetensors")),
                        avg_sq))
    return out


# 1. The legacy torch format with Megatron-Core's names, tensor 2 x pipeline 2.
meg = os.path.join(tmp, "mcore-torch")
mcore_torch_checkpoint(meg, 2, 2)
imports("mcore torch format 2x2", meg, "1,2,1", loss=True)

# 2. torch_dist, layers stacked, Transformer Engine names, bf16 with the non-distributed
# optimizer (fp32_param masters, common_step), common.pt; tensor 2 x pipeline 2.
dist = os.path.join(tmp, "dist-stacked")
torch_dist_checkpoint(dist, 2, 2)
out = imports("torch_dist stacked 2x2", dist, "2,1,1", loss=True)
if out:
    manifest = json.load(open(os.path.join(out, f"iter_{ITER:07d}", "manifest.json")))
    recipe = os.path.join(tmp, "imported.yaml")
    with open(recipe, "w") as f:
        f.write(manifest["recipe"])
    r = run(f"{build}/mtnlg-train", "--config", recipe, "--set", "checkpoint.resume=true",
            "--set", "parallel.tensor=1", "--set", f"schedule.train_iters={ITER + 1}",
            "--set", "checkpoint.save_interval=0", "--threads", "1")
    text = r.stdout + r.stderr
    check(f"torch_dist: mtnlg-train continues from iteration {ITER} to {ITER + 1} "
          f"({text.strip()[-300:]})",
          r.returncode == 0 and f"continuing at iteration {ITER + 1}" in text and
          re.search(rf"iteration\s+{ITER + 1}/", text) is not None)

# 3. torch_dist, one key per layer, the local spec's norms, an fp32 run with the distributed
# optimizer saved fully reshardable (the masters as optimizer.state.param, the step in
# param_groups), the common state inside the checkpoint; tensor 1 x pipeline 2.
dist2 = os.path.join(tmp, "dist-per-layer")
torch_dist_checkpoint(dist2, 1, 2, optimizer="fully_reshardable", stacked=False, te=False,
                      common_inside=True, bf16=False)
imports("torch_dist per-layer keys, distributed optimizer", dist2, "1,1,1")

# 4. The distributed optimizer's default dp_reshardable buffers (optimizer.distributed.*): tensor
# 2 x pipeline 2 x data 2, Transformer Engine's names, stage 0 in 20,000-element buckets, the tied
# embedding's copies in buckets of their own, the buffers' padding NaN; interleaved (a buffer per
# chunk); and --weights-only.
dist3 = os.path.join(tmp, "dist-dp-reshardable")
torch_dist_checkpoint(dist3, 2, 2, optimizer="dp_reshardable")
imports("torch_dist dp_reshardable 2x2", dist3, "1,1,1", loss=True)
dist3vp = os.path.join(tmp, "dist-dp-reshardable-vp")
torch_dist_checkpoint(dist3vp, 2, 2, optimizer="dp_reshardable", vp=2)
imports("torch_dist dp_reshardable 2x2 x 2 virtual chunks", dist3vp, "1,1,1")
imports("torch_dist --weights-only", dist3, "1,1,1", moments=False, extra=("--weights-only",))
dist4 = os.path.join(tmp, "dist-no-optimizer")
torch_dist_checkpoint(dist4, 1, 1, optimizer=None)
r = run(ckpt, "import", "--format", "megatron", dist4, "--output", os.path.join(tmp, "x2"))
check("torch_dist without optimizer state is exit 3 naming --weights-only",
      r.returncode == 3 and "--weights-only" in r.stderr)

# 5. scripts/megatron_to_hf.py reads torch_dist too.
hf_out = os.path.join(tmp, "to-hf", "model.safetensors")
r = run(sys.executable, f"{src}/scripts/megatron_to_hf.py", dist, "--output", hf_out)
check(f"megatron_to_hf.py on torch_dist: the bf16 weights ({r.stderr.strip()[-200:]})",
      r.returncode == 0 and equal(mc.read_safetensors(hf_out),
                                  {k: v.bfloat16().float() for k, v in masters.items()}))

# 6. Damage, each named: a truncated .distcp, no .metadata, a missing chunk.
it = os.path.join(dist4, f"iter_{ITER:07d}")
data = open(os.path.join(it, "__0_0.distcp"), "rb").read()
with open(os.path.join(it, "__0_0.distcp"), "wb") as f:
    f.write(data[:len(data) // 2])
r = run(ckpt, "import", "--format", "megatron", dist4, "--output", os.path.join(tmp, "x3"),
        "--weights-only")
check(f"a truncated .distcp is exit 4 naming it ({r.stderr.strip()[-200:]})",
      r.returncode == 4 and "__0_0.distcp" in r.stderr and "truncated" in r.stderr)
os.remove(os.path.join(it, ".metadata"))
r = run(ckpt, "import", "--format", "megatron", dist4, "--output", os.path.join(tmp, "x4"),
        "--weights-only")
check(f"a missing .metadata is exit 4 naming it ({r.stderr.strip()[-200:]})",
      r.returncode == 4 and ".metadata" in r.stderr)
dist5 = os.path.join(tmp, "dist-missing-chunk")
torch_dist_checkpoint(dist5, 2, 1, optimizer=None)
it5 = os.path.join(dist5, f"iter_{ITER:07d}")
meta = pickle.load(open(os.path.join(it5, ".metadata"), "rb"))
key = "decoder.layers.self_attention.linear_qkv.weight"
meta.state_dict_metadata[key].chunks.pop()
pickle.dump(meta, open(os.path.join(it5, ".metadata"), "wb"))
r = run(ckpt, "import", "--format", "megatron", dist5, "--output", os.path.join(tmp, "x5"),
        "--weights-only")
check(f"a missing chunk is exit 4 naming the tensor ({r.stderr.strip()[-200:]})",
      r.returncode == 4 and key in r.stderr)
del meta.state_dict_metadata["embedding.word_embeddings.weight"].chunks[0].sizes
pickle.dump(meta, open(os.path.join(it5, ".metadata"), "wb"))
r = run(ckpt, "import", "--format", "megatron", dist5, "--output", os.path.join(tmp, "x6"),
        "--weights-only")
check(f"a chunk without its sizes is exit 4 naming the index and the key "
      f"({r.stderr.strip()[-200:]})", r.returncode == 4 and ".metadata" in r.stderr and
      "embedding.word_embeddings.weight" in r.stderr)
# 7. export --format megatron the other way, for today's Megatron-LM: Megatron-Core's names
# (Transformer Engine's spec and the local one) in the torch format, each rank's file checked as
# Megatron's load_checkpoint reads it (megatron/training/checkpointing.py, megatron/core/
# optimizer): the model state dict key by key in Megatron-Core's order, Adam's state loaded by
# torch's own load_state_dict into parameters in get_param_groups' order, the groups paired as
# _filter_and_reorder_param_groups pairs them, the scheduler's state equal to what Megatron's
# get_optimizer_param_scheduler computes from the run's args, and the RNG state Megatron seeds.
# Megatron-Core's optimizer: the keys pairing a saved param group with a current one, and the
# groups _get_param_groups makes with the default overrides (biases and 1-D: wd_mult 0).
IDENTIFIER = tuple(sorted(("max_lr", "min_lr", "start_wd", "end_wd", "wd_mult", "optimizer"))) + (
    "lr_mult", "is_expert_parallel", "is_decoupled_lr")


def identifier(group):
    return tuple(group.get(k) for k in IDENTIFIER)


def megatron_scheduler(args):
    """get_optimizer_param_scheduler's values for an iteration-based run, in samples."""
    gbs = args.global_batch_size
    decay = (getattr(args, "lr_decay_iters", None) or args.train_iters) * gbs
    return {"max_lr": args.lr, "min_lr": args.min_lr, "lr_warmup_steps": args.lr_warmup_iters * gbs,
            "num_steps": args.consumed_train_samples, "lr_decay_style": args.lr_decay_style,
            "lr_decay_steps": decay, "start_wd": args.weight_decay, "end_wd": args.weight_decay,
            "wd_incr_style": "constant", "wd_incr_steps": args.train_iters * gbs}


def check_core_export(out, impl, tp, pp):
    te = impl == "transformer_engine"
    back = os.path.join(tmp, f"core-export-{impl}")
    # Iteration ITER itself (mtnlg-train continued the run past it above).
    r = run(ckpt, "export", "--format", "megatron", os.path.join(out, f"iter_{ITER:07d}"),
            "--output", back, "--layout", f"{tp},{pp}", "--transformer-impl", impl)
    text = (r.stdout + r.stderr).strip()
    check(f"export --transformer-impl {impl} at {tp} x {pp} ({text[-300:]})",
          r.returncode == 0 and f"--transformer-impl {impl}" in r.stdout)
    if r.returncode != 0:
        return
    check(f"{impl}: latest_checkpointed_iteration.txt names iteration {ITER}",
          open(os.path.join(back, "latest_checkpointed_iteration.txt")).read().strip() == str(ITER))
    args = make_args(tp, pp, consumed_train_samples=CONSUMED)
    keys_ok = values_ok = adam_ok = groups_ok = masters_ok = sched_ok = rng_ok = args_ok = True
    for t in range(tp):
        for p in range(pp):
            name = f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else "")
            state = torch.load(os.path.join(back, f"iter_{ITER:07d}", name, "model_optim_rng.pt"))
            want = core_state(masters, t, p, tp, pp, te)
            model = state["model"]
            keys_ok &= list(model) == list(want)
            values_ok &= all(
                (model.get(k) is None) if x is None else
                (torch.is_tensor(model.get(k)) and model[k].dtype == torch.bfloat16 and
                 torch.equal(model[k], x.bfloat16())) for k, x in want.items())
            # Megatron-Core's parameters in named_parameters order, fp32 as its masters are;
            # get_param_groups: weight-decayed first.
            params = [(k, x) for k, x in want.items() if x is not None]
            wd = [(k, x) for k, x in params if not (k.endswith(".bias") or x.dim() == 1)]
            no_wd = [(k, x) for k, x in params if k.endswith(".bias") or x.dim() == 1]
            current = [{"wd_mult": 1.0, "lr_mult": 1.0, "is_expert_parallel": False,
                        "is_decoupled_lr": False, "max_lr": args.lr, "min_lr": args.min_lr},
                       dict(wd_mult=0.0, lr_mult=1.0, is_expert_parallel=False,
                            is_decoupled_lr=False, max_lr=args.lr, min_lr=args.min_lr)]
            saved = state["optimizer"]["optimizer"]
            by_id = {identifier(g): g for g in saved["param_groups"]}
            groups_ok &= len(by_id) == 2 and all(identifier(g) in by_id for g in current)
            groups_ok &= [g["weight_decay"] for g in saved["param_groups"]] == [0.01, 0.0]
            tensors = [torch.nn.Parameter(x.clone()) for _, x in wd + no_wd]
            adam = torch.optim.Adam([{"params": tensors[:len(wd)]},
                                     {"params": tensors[len(wd):]}], lr=args.lr)
            try:
                adam.load_state_dict(saved)
                e = core_state(avg, t, p, tp, pp, te)
                e2 = core_state(avg_sq, t, p, tp, pp, te)
                adam_ok &= all(
                    torch.equal(adam.state[q]["exp_avg"], e[k]) and
                    torch.equal(adam.state[q]["exp_avg_sq"], e2[k]) and
                    int(adam.state[q]["step"]) == STEP for q, (k, _) in zip(tensors, wd + no_wd))
            except (ValueError, RuntimeError, KeyError):
                adam_ok = False
            fp32 = state["optimizer"]["fp32_from_fp16_params"]
            masters_ok &= [len(g) for g in fp32] == [len(wd), len(no_wd)] and all(
                torch.equal(a, x) for a, (_, x) in zip(fp32[0] + fp32[1], wd + no_wd))
            sched_ok &= state.get("opt_param_scheduler") == megatron_scheduler(args)
            # Megatron's load: random.setstate, np.random.set_state, torch.set_rng_state,
            # torch.cuda.set_rng_state (16 bytes: Philox seed, offset), the tracker's states.
            try:
                import random
                import numpy as np
                rng = state["rng_state"][0]
                random.Random().setstate(rng["random_rng_state"])
                np.random.RandomState().set_state(rng["np_rng_state"])
                torch.Generator().set_state(rng["torch_rng_state"])
                seed = lambda x: struct.unpack("<Qq", bytes(x.tolist()))
                s = args.seed + 100 * p
                rng_ok &= (seed(rng["cuda_rng_state"]) == (s, 0) and
                           seed(rng["rng_tracker_states"]["model-parallel-rng"]) ==
                           (s + 2718 + t, 0) and
                           {"data-parallel-rng", "expert-parallel-rng"} <=
                           set(rng["rng_tracker_states"]) and
                           rng["random_rng_state"] == random.Random(s).getstate())
            except (KeyError, ValueError, TypeError, RuntimeError, IndexError):
                rng_ok = False
            a = state["args"]
            args_ok &= (state["checkpoint_version"] == 3.0 and state["iteration"] == ITER and
                        all(getattr(a, k, None) == getattr(args, k) for k in (
                            "num_layers", "hidden_size", "num_attention_heads",
                            "max_position_embeddings", "make_vocab_size_divisible_by",
                            "padded_vocab_size", "tokenizer_type", "consumed_train_samples"))
                        and (a.tensor_model_parallel_size, a.pipeline_model_parallel_size) ==
                        (tp, pp) and a.transformer_impl == impl and a.ckpt_format == "torch")
    check(f"{impl}: each rank's model holds Megatron-Core's keys in its state dict's order", keys_ok)
    check(f"{impl}: bf16 weights equal to the masters' bf16, every _extra_state None", values_ok)
    check(f"{impl}: Adam's state loads into parameters in get_param_groups' order (torch's "
          "load_state_dict), each moment and the step the run's", adam_ok)
    check(f"{impl}: the param groups pair with Megatron-Core's own by its identifier keys "
          "(max_lr, min_lr, wd_mult, lr_mult, ...)", groups_ok)
    check(f"{impl}: fp32_from_fp16_params holds the masters in the groups' order", masters_ok)
    check(f"{impl}: opt_param_scheduler equals Megatron's from the run's args (samples)", sched_ok)
    check(f"{impl}: rng_state loads and is seeded as Megatron seeds --seed", rng_ok)
    check(f"{impl}: args pass Megatron's check_checkpoint_args", args_ok)
    # megatron_args.txt: the command line that resumes from it. Megatron asserts its scheduler's
    # values equal the checkpoint's: computed here from the flags as get_optimizer_param_scheduler
    # computes them.
    words = " ".join(line.rstrip("\\\n") for line in
                     open(os.path.join(back, "megatron_args.txt")) if not line.startswith("#"))
    flags, key = {}, None
    for w in words.split():
        if w.startswith("--"):
            key = w
            flags[key] = []
        else:
            flags[key].append(w)
    one = lambda f, default=None: flags[f][0] if f in flags else default
    gbs = int(one("--global-batch-size"))
    if "--train-iters" in flags:
        train = int(one("--train-iters")) * gbs
        warm = int(one("--lr-warmup-iters", 0)) * gbs
        decay = int(one("--lr-decay-iters", one("--train-iters"))) * gbs
    else:
        train = int(one("--train-samples"))
        warm = int(one("--lr-warmup-samples", 0))
        decay = int(one("--lr-decay-samples", train))
    wd = float(one("--weight-decay"))
    want = {"max_lr": float(one("--lr")), "min_lr": float(one("--min-lr")),
            "lr_warmup_steps": warm, "lr_decay_steps": decay,
            "lr_decay_style": one("--lr-decay-style"), "start_wd": wd, "end_wd": wd,
            "wd_incr_style": "constant", "wd_incr_steps": train}
    sched = dict(state.get("opt_param_scheduler", {}))
    sched.pop("num_steps", None)
    check(f"{impl}: megatron_args.txt resumes it: --save/--load the export, --ckpt-format torch, "
          f"--transformer-impl, the layout, no distributed optimizer, and the scheduler Megatron "
          f"computes from its flags equal to the checkpoint's ({sched} vs {want})",
          one("--save") == back and one("--load") == back and one("--ckpt-format") == "torch" and
          one("--transformer-impl") == impl and one("--tensor-model-parallel-size") == str(tp)
          and one("--pipeline-model-parallel-size") == str(pp) and
          "--use-distributed-optimizer" not in flags and sched == want)
    r = run(f"{build}/mtnlg-recipe", "from-megatron", "-o", os.path.join(tmp, f"back-{impl}.yaml"),
            "--", *words.split())
    check(f"{impl}: from-megatron reads megatron_args.txt ({r.stderr.strip()[-200:]})",
          r.returncode == 0)


if out:
    for impl in ("transformer_engine", "local"):
        check_core_export(out, impl, 2, 2)

leftovers = [d for d in os.listdir(tmp) if ".megatron-" in d]
check("no scratch directory is left behind", not leftovers)
shutil.rmtree(tmp, ignore_errors=True)
check.exit("megatron_core_import_test")
