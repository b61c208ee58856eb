#!/usr/bin/python3
"""mtnlg-ckpt import / export --format megatron against checkpoints written here as Megatron-LM
saves them in its legacy `torch` format (Debian's PyTorch): a bf16 run's shards at tensor 2 x
pipeline 2 holding bf16 weights, Megatron's Float16OptimizerWithFloat16Params state (Adam's
state_dict indexed in get_param_groups' order: the rank's weight-decayed parameters in
named_parameters order, then its biases and norms; the fp32 masters in fp32_from_fp16_params),
the iteration and args.consumed_train_samples. Imported, the checkpoint must hold the masters
bit for bit (mtnlg-ckpt export --format hf-gpt2), the moments bit for bit (export --format
megatron, read back), the iteration, the data position and Adam's step; mtnlg-eval's loss through
it must equal the loss through the masters; mtnlg-train must continue from it. Bad input: a
Llama-style run, the distributed optimizer's format of before 2024, a checkpoint without
optimizer state, a missing shard, a torch_dist directory without its index. The distributed
optimizer (distrib_optim.pt) as Megatron-Core lays out and gathers its buffers, with buckets, the
tied embedding's own buckets, an interleaved run and bucket settings that do not fit. Megatron-Core's names and torch_dist:
megatron_core_import_test.py. Usage: megatron_import_test.py BUILD_DIR SOURCE_DIR"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile

import torch

build, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "scripts"))
import megatron_ckpt as mc  # noqa: E402  (its safetensors reader only)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_fixture as mf  # noqa: E402

tmp = tempfile.mkdtemp(prefix="megatron-import-")
L, H, HEADS, V, P = 4, 64, 4, 500, 32
ITER, CONSUMED, STEP, LR = 7, 56, 7, 2.5e-4
check = mf.Checks()
run = mf.run


ref = mf.Reference(src, tmp, mc.read_safetensors, L, H, HEADS, V, P, model_seed=3,
                   moment_seed=11)
ref_dir, masters, avg, avg_sq, corpus = ref.dir, ref.masters, ref.avg, ref.avg_sq, ref.corpus


def rank_dicts(hf, tp, pp, padded, vp=1):
    """Megatron's per-rank model chunks {(t, p): [chunk dict, ...]} of HF-layout tensors, written
    here independently of scripts/megatron_ckpt.py: Megatron's layout, and with a virtual
    pipeline its interleaved layer offsets (chunk v of stage p: layers v L/vp + p L/(pp vp) on)."""
    hn, per, k = H // HEADS, L // (pp * vp), HEADS // tp
    wte = torch.cat([hf["wte.weight"], torch.zeros(padded - V, H)])
    out = {}
    for t in range(tp):
        def part(a, dim):
            n = a.shape[dim] // tp
            return a.narrow(dim, t * n, n).clone()
        for p, v in ((p, v) for p in range(pp) for v in range(vp)):
            enc = {}
            for i in range(per):
                g = v * (L // vp) + p * per + i
                e = lambda n: hf[f"h.{g}.{n}"]
                w = e("attn.c_attn.weight").t().reshape(3, HEADS, hn, H).transpose(0, 1)
                b = e("attn.c_attn.bias").reshape(3, HEADS, hn).transpose(0, 1)
                enc.update({
                    f"layers.{i}.input_norm.weight": e("ln_1.weight").clone(),
                    f"layers.{i}.input_norm.bias": e("ln_1.bias").clone(),
                    f"layers.{i}.self_attention.query_key_value.weight":
                        w[t * k:(t + 1) * k].reshape(-1, H).clone(),
                    f"layers.{i}.self_attention.query_key_value.bias":
                        b[t * k:(t + 1) * k].reshape(-1).clone(),
                    f"layers.{i}.self_attention.dense.weight": part(e("attn.c_proj.weight").t(), 1),
                    f"layers.{i}.self_attention.dense.bias": e("attn.c_proj.bias").clone(),
                    f"layers.{i}.post_attention_norm.weight": e("ln_2.weight").clone(),
                    f"layers.{i}.post_attention_norm.bias": e("ln_2.bias").clone(),
                    f"layers.{i}.mlp.dense_h_to_4h.weight": part(e("mlp.c_fc.weight").t(), 0),
                    f"layers.{i}.mlp.dense_h_to_4h.bias": part(e("mlp.c_fc.bias"), 0),
                    f"layers.{i}.mlp.dense_4h_to_h.weight": part(e("mlp.c_proj.weight").t(), 1),
                    f"layers.{i}.mlp.dense_4h_to_h.bias": e("mlp.c_proj.bias").clone(),
                })
            lm = {}
            if p == 0 and v == 0:
                lm["embedding"] = {"word_embeddings": {"weight": part(wte, 0)},
                                   "position_embeddings": {"weight": hf["wpe.weight"].clone()}}
            lm["encoder"] = enc
            model = {"language_model": lm}
            if p == pp - 1 and v == vp - 1:
                enc["final_norm.weight"] = hf["ln_f.weight"].clone()
                enc["final_norm.bias"] = hf["ln_f.bias"].clone()
                if pp > 1:
                    model["word_embeddings_for_head"] = {"weight": part(wte, 0)}
            out.setdefault((t, p), []).append(model)
    return out


def named_parameters(model, prefix=""):
    """named_parameters order of Megatron's GPTModel: the state dict's order."""
    out = []
    for key, v in model.items():
        if isinstance(v, dict):
            out += named_parameters(v, prefix + key + ".")
        else:
            out.append((prefix + key, v))
    return out


def rebuild(model, values, prefix=""):
    return {k: rebuild(v, values, prefix + k + ".") if isinstance(v, dict) else values[prefix + k]
            for k, v in model.items()}


def distrib_optim(chunks, values, p, pp, dp, bucket_size):
    """distrib_optim.pt of one tensor x pipeline rank as get_parameter_state_dp_zero saves it: a
    buffer per chunk, its buckets gathered (mf.gathered_buckets) one after another."""
    state, vp = {"buckets_coalesced": True}, len(chunks)
    for v, chunk in enumerate(chunks):
        params = named_parameters(chunk)
        first, last = p == 0 and v == 0, p == pp - 1 and v == vp - 1
        shared = lambda n: pp > 1 and ((first and not last and n.endswith(
            "embedding.word_embeddings.weight")) or (last and not first and n.endswith(
                "word_embeddings_for_head.weight")))
        index, buckets, unpadded = mf.megatron_buffer(
            params, bucket_size if (p == 0 and v == 0) else None, dp, shared)
        world = {key: torch.cat(mf.gathered_buckets(per_name[v], index, buckets, unpadded, dp))
                 for key, per_name in values.items()}
        world["numel_unpadded"] = sum(unpadded)
        state[v] = {(torch.bfloat16, torch.float32): world}
    return state


def megatron_checkpoint(root, tp, pp, optimizer="float16", vp=1, **arg_overrides):
    padded = -(-V // (128 * tp)) * 128 * tp
    weights, moments, moments_sq = (rank_dicts(x, tp, pp, padded, vp)
                                    for x in (masters, avg, avg_sq))
    args = argparse.Namespace(
        num_layers=L, hidden_size=H, num_attention_heads=HEADS, ffn_hidden_size=4 * H,
        seq_length=P, max_position_embeddings=P, micro_batch_size=2, global_batch_size=8,
        train_iters=20, lr=3e-4, min_lr=3e-5, lr_decay_style="cosine", lr_warmup_iters=2,
        weight_decay=0.01, adam_beta1=0.9, adam_beta2=0.95, clip_grad=1.0, seed=1234,
        bf16=True, fp16=False, tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
        data_path=["1.0", corpus], split="100,0,0", tokenizer_type="GPT2BPETokenizer",
        vocab_size=V, padded_vocab_size=padded, make_vocab_size_divisible_by=128,
        layernorm_epsilon=1e-5, bias_gelu_fusion=True, add_bias_linear=True,
        position_embedding_type="learned_absolute", normalization="LayerNorm",
        hidden_dropout=0.0, attention_dropout=0.0, eval_interval=1000, eval_iters=0,
        consumed_train_samples=CONSUMED, consumed_valid_samples=0, iteration=ITER,
        use_distributed_optimizer=False)
    for k, v in arg_overrides.items():
        setattr(args, k, v)
    if vp > 1:
        args.virtual_pipeline_model_parallel_size = vp
    for (t, p), chunks in weights.items():
        # get_param_groups walks the chunks in order, each in named_parameters order.
        model = {f"model{v}": c for v, c in enumerate(chunks)}
        params = named_parameters(model)
        wd = [(n, x) for n, x in params if not (n.endswith(".bias") or x.dim() == 1)]
        no_wd = [(n, x) for n, x in params if n.endswith(".bias") or x.dim() == 1]
        order = wd + no_wd
        e = dict(named_parameters({f"model{v}": c for v, c in enumerate(moments[(t, p)])}))
        e2 = dict(named_parameters({f"model{v}": c for v, c in enumerate(moments_sq[(t, p)])}))
        adam = {"state": {i: {"step": STEP, "exp_avg": e[n].clone(), "exp_avg_sq": e2[n].clone()}
                          for i, (n, _) in enumerate(order)},
                "param_groups": [{"params": list(range(len(wd))), "lr": LR, "weight_decay": 0.01},
                                 {"params": list(range(len(wd), len(order))), "lr": LR,
                                  "weight_decay": 0.0}]}
        saved = model if optimizer == "fp32" else rebuild(model, {n: x.bfloat16() for n, x in params})
        state = {"args": args, "checkpoint_version": 3.0, "iteration": ITER, "rng_state": []}
        if vp == 1:
            state["model"] = saved["model0"]
        else:
            state.update(saved)
        if optimizer == "float16":
            state["optimizer"] = {"optimizer": adam, "fp32_from_fp16_params":
                                  [[x.clone() for _, x in wd], [x.clone() for _, x in no_wd]]}
        elif optimizer == "fp32":
            state["optimizer"] = adam
        d = os.path.join(root, f"iter_{ITER:07d}",
                         f"mp_rank_{t:02d}" + (f"_{p:03d}" if pp > 1 else ""))
        os.makedirs(d)
        torch.save(state, os.path.join(d, "model_optim_rng.pt"))
        if optimizer == "distributed":
            groups = [{k: v for k, v in g.items() if k != "params"} | {"step": STEP}
                      for g in adam["param_groups"]]
            state["optimizer"] = {"optimizer": {"param_groups": groups},
                                  "grad_scaler": {"scale": 1.0}}
            values = {k: [dict(named_parameters(c)) for c in x[(t, p)]]
                      for k, x in (("param", weights), ("exp_avg", moments),
                                   ("exp_avg_sq", moments_sq))}
            size = (args.ddp_bucket_size if getattr(args, "overlap_grad_reduce", False)
                    else None)
            torch.save(distrib_optim(chunks, values, p, pp, args.data_parallel_size, size),
                       os.path.join(d, "distrib_optim.pt"))
            torch.save(state, os.path.join(d, "model_optim_rng.pt"))
        if optimizer == "distributed-2023":  # before buckets_coalesced: a list per bucket
            torch.save({0: {torch.float32: {"param": [torch.zeros(4)]}}},
                       os.path.join(d, "distrib_optim.pt"))
    mf.write_latest(root, ITER)


def eval_loss(*model):
    return ref.eval_loss(build, *model)  # on the reference's corpus


ckpt = f"{build}/mtnlg-ckpt"
want_loss = eval_loss("--hf-model", os.path.join(ref_dir, "model.safetensors"))
meg = os.path.join(tmp, "megatron")
megatron_checkpoint(meg, 2, 2)
out = os.path.join(tmp, "imported")
r = run(ckpt, "import", "--format", "megatron", meg, "--output", out, "--layout", "1,2,1")
check(f"a bf16 run at tensor 2 x pipeline 2 imports ({(r.stdout + r.stderr).strip()[-300:]})",
      r.returncode == 0)
if r.returncode == 0:
    manifest = json.load(open(os.path.join(out, f"iter_{ITER:07d}", "manifest.json")))
    check("the iteration, the data position and Adam's step carried over",
          (manifest["iteration"], manifest["consumed_samples"], manifest["optimizer_steps"],
           manifest["has_optimizer"]) == (ITER, CONSUMED, STEP, True))
    check("written at the layout asked for (tensor 1 x pipeline 2)",
          (manifest["layout"]["tensor"], manifest["layout"]["pipeline"]) == (1, 2))
    check("the recipe is the run's: bf16, cosine decay, 2 x 8 batches, its data",
          all(s in manifest["recipe"] for s in ("bf16", "cosine", corpus)))
    r = run(ckpt, "verify", out)
    check("mtnlg-ckpt verify passes", r.returncode == 0)
    hf_out = os.path.join(tmp, "hf-out", "model.safetensors")
    r = run(ckpt, "export", out, "--output", hf_out)
    got = mc.read_safetensors(hf_out) if r.returncode == 0 else {}
    check("the weights are the run's fp32 masters bit for bit",
          sorted(got) == sorted(masters) and all(torch.equal(got[k], masters[k]) for k in masters))
    check("mtnlg-eval's loss through it is the masters' loss",
          eval_loss("--checkpoint", out) == want_loss and want_loss.startswith("{"))
    back = os.path.join(tmp, "back")
    r = run(ckpt, "export", "--format", "megatron", out, "--output", back, "--layout", "2,1",
            "--transformer-impl", "legacy")
    check(f"export --format megatron at tensor 2 x pipeline 1 ({(r.stdout + r.stderr).strip()[-200:]})",
          r.returncode == 0)
    if r.returncode == 0:
        # Read back with the script (which the import check above ties to this test's writer).
        again = os.path.join(tmp, "again")
        r = run(sys.executable, f"{src}/scripts/megatron_ckpt.py", "read", back, again)
        m2 = mc.read_safetensors(os.path.join(again, "exp_avg.safetensors")) if r.returncode == 0 else {}
        s2 = mc.read_safetensors(os.path.join(again, "exp_avg_sq.safetensors")) if r.returncode == 0 else {}
        w2 = mc.read_safetensors(os.path.join(again, "model.safetensors")) if r.returncode == 0 else {}
        info = json.load(open(os.path.join(again, "megatron.json"))) if r.returncode == 0 else {}
        check("the exported Megatron checkpoint holds Adam's moments bit for bit",
              sorted(m2) == sorted(avg) and all(torch.equal(m2[k], avg[k]) for k in avg)
              and all(torch.equal(s2[k], avg_sq[k]) for k in avg_sq))
        check("and the masters (fp32_from_fp16_params), the iteration, position and step",
              all(torch.equal(w2[k], masters[k]) for k in masters) and
              (info.get("iteration"), info.get("consumed_train_samples"),
               info.get("optimizer_steps")) == (ITER, CONSUMED, STEP))
        bf16 = torch.load(os.path.join(back, f"iter_{ITER:07d}", "mp_rank_00",
                                       "model_optim_rng.pt"))
        groups = bf16["optimizer"]["optimizer"]["param_groups"]
        check("the exported Adam groups carry the run's betas, eps and weight decay "
              "(torch's load_state_dict restores them)",
              [tuple(g["betas"]) for g in groups] == [(0.9, 0.95)] * 2 and
              [g["weight_decay"] for g in groups] == [0.01, 0.0] and
              all(g["eps"] == 1e-8 for g in groups))
        check("the exported weights are bf16 beside fp32 masters, as Megatron's bf16 run keeps them",
              bf16["model"]["language_model"]["embedding"]["word_embeddings"]["weight"].dtype
              == torch.bfloat16 and "fp32_from_fp16_params" in bf16["optimizer"])
        check("the legacy names carry the scheduler's and the RNG state too (Megatron stops "
              "without them)", bf16.get("opt_param_scheduler", {}).get("num_steps") == CONSUMED
              and len(bf16.get("rng_state", [])) == 1)
    # mtnlg-train continues from it: the recipe inside, one more iteration.
    recipe = os.path.join(tmp, "imported.yaml")
    with open(recipe, "w") as f:
        f.write(manifest["recipe"])
    r = run(f"{build}/mtnlg-train", "--config", recipe, "--set", "checkpoint.resume=true",
            "--set", "parallel.pipeline=1", "--set", f"schedule.train_iters={ITER + 1}",
            "--set", "checkpoint.save_interval=0", "--threads", "1")
    text = r.stdout + r.stderr
    check(f"mtnlg-train continues from iteration {ITER} to {ITER + 1} ({text.strip()[-400:]})",
          r.returncode == 0 and f"continuing at iteration {ITER + 1}" in text and
          re.search(rf"iteration\s+{ITER + 1}/", text) is not None)

# A fp32 run's optimizer (plain Adam state_dict, the weights are the masters) at 1 x 1.
meg32 = os.path.join(tmp, "megatron-fp32")
megatron_checkpoint(meg32, 1, 1, optimizer="fp32", bf16=False)
out32 = os.path.join(tmp, "imported-fp32")
r = run(ckpt, "import", "--format", "megatron", meg32, "--output", out32)
ok = r.returncode == 0
if ok:
    r2 = run(ckpt, "export", out32, "--output", os.path.join(tmp, "hf32", "model.safetensors"))
    got = mc.read_safetensors(os.path.join(tmp, "hf32", "model.safetensors"))
    ok = r2.returncode == 0 and all(torch.equal(got[k], masters[k]) for k in masters)
check(f"an fp32 run (Adam's own state_dict) imports, weights bit for bit ({r.stderr.strip()[-200:]})", ok)

# An interleaved run (pipeline 2 x 2 virtual chunks: state['model0'], state['model1']) at tensor 2.
megvp = os.path.join(tmp, "megatron-vp")
megatron_checkpoint(megvp, 2, 2, vp=2)
outvp = os.path.join(tmp, "imported-vp")
r = run(ckpt, "import", "--format", "megatron", megvp, "--output", outvp, "--layout", "1,1,1")
ok = r.returncode == 0
if ok:
    hf_vp = os.path.join(tmp, "hf-vp", "model.safetensors")
    r2 = run(ckpt, "export", outvp, "--output", hf_vp)
    back_vp = os.path.join(tmp, "back-vp")
    r3 = run(ckpt, "export", "--format", "megatron", outvp, "--output", back_vp)
    again_vp = os.path.join(tmp, "again-vp")
    r4 = run(sys.executable, f"{src}/scripts/megatron_ckpt.py", "read", back_vp, again_vp)
    got = mc.read_safetensors(hf_vp) if r2.returncode == 0 else {}
    m_vp = mc.read_safetensors(os.path.join(again_vp, "exp_avg.safetensors")) if r4.returncode == 0 else {}
    ok = (r3.returncode == 0 and all(torch.equal(got.get(k, torch.zeros(0)), masters[k]) for k in masters)
          and all(torch.equal(m_vp.get(k, torch.zeros(0)), avg[k]) for k in avg))
check(f"an interleaved run (2 x 2 x 2 virtual chunks) imports: masters and moments bit for bit "
      f"({r.stderr.strip()[-200:]})", ok)

# The distributed optimizer (distrib_optim.pt): tensor 2 x pipeline 2 x data 2 with
# --overlap-grad-reduce and 18,900-element buckets (stage 0 in several buckets, one of them
# ending inside a 64-element block, so that the buckets' cut padding shifts what follows; the
# tied embedding's copies in buckets of their own), and an interleaved run (2 x 2 x 2 virtual chunks,
# one bucket a chunk). The script's read must give the masters and both moments bit for bit
# (the buffers' padding is NaN), the import Adam's step.
for name, vp, extra in (("dist-2x2", 1, {"overlap_grad_reduce": True, "ddp_bucket_size": 18900}),
                        ("dist-vp", 2, {})):
    root = os.path.join(tmp, name)
    megatron_checkpoint(root, 2, 2, optimizer="distributed", vp=vp, use_distributed_optimizer=True,
                        data_parallel_size=2, **extra)
    read_dir = os.path.join(tmp, name + "-read")
    r = run(sys.executable, f"{src}/scripts/megatron_ckpt.py", "read", root, read_dir)
    got = {k: mc.read_safetensors(os.path.join(read_dir, f"{k}.safetensors"))
           if r.returncode == 0 else {} for k in ("model", "exp_avg", "exp_avg_sq")}
    check(f"the distributed optimizer ({name}) reads: masters and moments bit for bit "
          f"({r.stderr.strip()[-300:]})",
          all(sorted(got[k]) == sorted(want) and all(torch.equal(got[k][n], want[n]) for n in want)
              for k, want in (("model", masters), ("exp_avg", avg), ("exp_avg_sq", avg_sq))))
    out_d = os.path.join(tmp, name + "-imported")
    r = run(ckpt, "import", "--format", "megatron", root, "--output", out_d, "--layout", "1,1,1")
    ok = r.returncode == 0 and json.load(open(os.path.join(
        out_d, f"iter_{ITER:07d}", "manifest.json")))["optimizer_steps"] == STEP
    check(f"and imports with Adam's step {STEP} ({r.stderr.strip()[-200:]})", ok)
    if vp == 1:
        # The same file read with other bucket settings than the run's: the layout differs.
        state = torch.load(os.path.join(root, f"iter_{ITER:07d}", "mp_rank_00_000",
                                        "model_optim_rng.pt"))
        state["args"].ddp_bucket_size = 30000
        torch.save(state, os.path.join(root, f"iter_{ITER:07d}", "mp_rank_00_000",
                                       "model_optim_rng.pt"))
        r = run(ckpt, "import", "--format", "megatron", root, "--output",
                os.path.join(tmp, name + "-bad"))
        check("a distrib_optim.pt whose buffers do not fit the run's bucket settings is exit 3 "
              f"naming the file, the sizes and --weights-only ({r.stderr.strip()[-300:]})",
              r.returncode == 3 and "distrib_optim.pt" in r.stderr and "bucket size 30000"
              in r.stderr and "--weights-only" in r.stderr)
        # Of the right length but shifted: the masters no longer round to the saved weights.
        state["args"].ddp_bucket_size = 18900
        torch.save(state, os.path.join(root, f"iter_{ITER:07d}", "mp_rank_00_000",
                                       "model_optim_rng.pt"))
        f = os.path.join(root, f"iter_{ITER:07d}", "mp_rank_01_001", "distrib_optim.pt")
        d = torch.load(f)
        buf = next(iter(d[0].values()))
        buf["param"] = torch.roll(buf["param"], 64)
        torch.save(d, f)
        r = run(ckpt, "import", "--format", "megatron", root, "--output",
                os.path.join(tmp, name + "-shifted"))
        check("a buffer of the right length whose masters do not round to the weights is exit 3 "
              f"naming the file and the parameter ({r.stderr.strip()[-300:]})",
              r.returncode == 3 and "mp_rank_01_001" in r.stderr and "does not round" in r.stderr
              and "--weights-only" in r.stderr)

# Refused, each named.
llama = os.path.join(tmp, "llama")
megatron_checkpoint(llama, 1, 1, swiglu=True, normalization="RMSNorm")
r = run(ckpt, "import", "--format", "megatron", llama, "--output", os.path.join(tmp, "x1"))
check("a Llama-style run is exit 3 naming --swiglu and --normalization",
      r.returncode == 3 and "--swiglu" in r.stderr and "--normalization" in r.stderr)
dist = os.path.join(tmp, "dist")
megatron_checkpoint(dist, 1, 1, optimizer="distributed-2023", use_distributed_optimizer=True)
r = run(ckpt, "import", "--format", "megatron", dist, "--output", os.path.join(tmp, "x2"))
check("the distributed optimizer's format of before February 2024 is exit 3 naming Megatron's "
      "converter and --weights-only",
      r.returncode == 3 and "distrib_optim.pt" in r.stderr and "--weights-only" in r.stderr
      and "--ckpt-convert-update-legacy-dist-opt-format" in r.stderr)
r = run(ckpt, "import", "--format", "megatron", dist, "--output", os.path.join(tmp, "x3"),
        "--weights-only")
check("--weights-only imports it without optimizer state",
      r.returncode == 0 and not json.load(open(os.path.join(
          tmp, "x3", f"iter_{ITER:07d}", "manifest.json")))["has_optimizer"])
none = os.path.join(tmp, "none")
megatron_checkpoint(none, 1, 1, optimizer=None)
r = run(ckpt, "import", "--format", "megatron", none, "--output", os.path.join(tmp, "x4"))
check("a checkpoint without optimizer state is exit 3 naming --weights-only",
      r.returncode == 3 and "--weights-only" in r.stderr)
shutil.rmtree(os.path.join(meg32, f"iter_{ITER:07d}", "mp_rank_00"))
os.makedirs(os.path.join(meg32, f"iter_{ITER:07d}"), exist_ok=True)
open(os.path.join(meg32, f"iter_{ITER:07d}", "__0_0.distcp"), "w").close()
r = run(ckpt, "import", "--format", "megatron", meg32, "--output", os.path.join(tmp, "x5"))
check("a torch_dist directory without its .metadata index is exit 4 naming it",
      r.returncode == 4 and ".metadata" in r.stderr)
r = run(ckpt, "import", "--format", "megatron", os.path.join(tmp, "nowhere"), "--output",
        os.path.join(tmp, "x6"))
check("a directory that is no checkpoint is exit 4 naming it",
      r.returncode == 4 and "nowhere" in r.stderr)
r = run(ckpt, "import", "--format", "megatron", meg, "--output", out)
check("an --output holding a checkpoint is refused without --force",
      r.returncode == 2 and "not empty" in r.stderr)
leftovers = [d for d in os.listdir(tmp) if ".megatron-" in d]
check("no scratch directory is left behind", not leftovers)
shutil.rmtree(tmp, ignore_errors=True)
check.exit("megatron_import_test")
