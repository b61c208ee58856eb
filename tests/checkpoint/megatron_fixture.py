"""What the Megatron checkpoint tests share: their checks' bookkeeping, a command runner, the
reference model (a random GPT-2 in Hugging Face's layout, written by tests/cmd/make_tiny_gpt2.py
independently of our writers) with Adam moments drawn for it, a token corpus, and mtnlg-eval's
loss of a model on that corpus, and Megatron-Core's distributed-optimizer buffers (the layout and
the gathered state) as read in its sources."""
import json
import math
import os
import subprocess
import sys

import torch


class Checks:
    """Prints each check as ok/FAIL and counts the failures."""

    def __init__(self):
        self.failures = 0

    def __call__(self, what, ok):
        print(("ok: " if ok else "FAIL: ") + what)
        self.failures += 0 if ok else 1

    def exit(self, name):
        print(f"{name}:", "ok" if self.failures == 0 else f"{self.failures} failed")
        sys.exit(1 if self.failures else 0)


def run(*cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def write_latest(root, iteration):
    """Megatron's tracker file: the checkpoint root's latest iteration."""
    with open(os.path.join(root, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(iteration))


class Reference:
    """The reference model under tmp/ref (model.safetensors, config.json): `masters` its fp32
    tensors by HF name, `avg` and `avg_sq` Adam moments drawn from `moment_seed`; the corpus
    tmp/corpus of 200 documents over its vocabulary."""

    def __init__(self, src, tmp, read_safetensors, layers, hidden, heads, vocab, positions,
                 model_seed, moment_seed):
        self.dir = os.path.join(tmp, "ref")
        os.makedirs(self.dir)
        self.model = os.path.join(self.dir, "model.safetensors")
        subprocess.run([sys.executable, f"{src}/tests/cmd/make_tiny_gpt2.py", self.model,
                        str(layers), str(hidden), str(vocab), str(positions), str(model_seed)],
                       check=True)
        with open(os.path.join(self.dir, "config.json"), "w") as f:
            json.dump({"model_type": "gpt2", "vocab_size": vocab, "n_positions": positions,
                       "n_embd": hidden, "n_layer": layers, "n_head": heads,
                       "n_inner": 4 * hidden, "activation_function": "gelu_new",
                       "layer_norm_epsilon": 1e-5}, f)
        self.masters = read_safetensors(self.model)
        gen = torch.Generator().manual_seed(moment_seed)
        self.avg = {k: torch.randn(v.shape, generator=gen) * 1e-3
                    for k, v in self.masters.items()}
        self.avg_sq = {k: torch.rand(v.shape, generator=gen) * 1e-6
                       for k, v in self.masters.items()}
        self.corpus = os.path.join(tmp, "corpus")
        subprocess.run([sys.executable, f"{src}/tests/cmd/make_tiny_corpus.py", self.corpus,
                        "200", str(vocab)], check=True, stdout=subprocess.DEVNULL)

    def eval_loss(self, build, *model):
        """mtnlg-eval's output for `model` (its flags) on the corpus, or "failed: ..."."""
        r = run(f"{build}/mtnlg-eval", *model, "--data", self.corpus, "--max-samples", "8",
                "--threads", "1")
        return r.stdout.strip() if r.returncode == 0 else "failed: " + r.stderr[-300:]


def megatron_buffer(params, bucket_size, dp, shared):
    """Megatron-Core's DistributedOptimizer buffer layout (_compute_per_buffer_param_layout, read
    in its sources; absolute indices, as it keeps them) of one chunk's [(name, tensor)] in
    named_parameters order: {name: (start, end, bucket)}, [(bucket start, padded end)],
    [bucket numel_unpadded]."""
    ceil_to = lambda n, d: int(math.ceil(n / d) * d)
    index, buckets, unpadded = {}, [], []
    param_start = bucket_start = 0
    open_params = []

    def finalize(param_end):
        unpadded.append(param_end - bucket_start)
        buckets.append((bucket_start, ceil_to(param_end, math.lcm(dp, 128))))
        return buckets[-1][1]

    for name, x in params[::-1]:
        param_start = ceil_to(param_start, 64)
        if shared(name) and open_params:
            bucket_start = finalize(param_start)
            open_params, param_start = [], bucket_start
        param_end = param_start + x.numel()
        index[name] = (param_start, param_end, len(buckets))
        open_params.append(name)
        if (bucket_size is not None and param_end - bucket_start >= bucket_size) or shared(name):
            bucket_start = finalize(param_end)
            open_params, param_start = [], bucket_start
        else:
            param_start = param_end
    if open_params:
        finalize(param_end)
    return index, buckets, unpadded


def gathered_buckets(values, index, buckets, unpadded, dp):
    """One state (masters or a moment: {name: tensor}) of a buffer as the distributed optimizer
    saves it, bucket by bucket: the padded bucket (padding NaN here, so that a reader taking
    it shows) cut into the dp ranks' shards, gathered, concatenated and cut to numel_unpadded."""
    out = []
    for b, (start, end) in enumerate(buckets):
        buf = torch.full((end - start,), float("nan"))
        for name, (a, z, bucket) in index.items():
            if bucket == b:
                buf[a - start:z - start] = values[name].float().reshape(-1)
        local = buf.numel() // dp
        out.append(torch.cat([buf[r * local:(r + 1) * local] for r in range(dp)])[:unpadded[b]])
    return out
