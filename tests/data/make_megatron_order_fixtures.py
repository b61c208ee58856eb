#!/usr/bin/env python3
"""Writes tests/data/fixtures/megatron_order.json: sample orders computed by Megatron-LM's own dataset code.

Run once, by hand, against a Megatron-LM checkout (the fixture names the commit it used):

    git clone https://github.com/NVIDIA/Megatron-LM && git -C Megatron-LM checkout core_v0.19.0
    apt-get install python3-torch python3-pybind11
    /usr/bin/python3 tests/data/make_megatron_order_fixtures.py --megatron Megatron-LM

It builds Megatron's helpers.cpp with its own Makefile, writes each corpus with Megatron's
IndexedDatasetBuilder, and builds every split with BlendedMegatronDatasetBuilder exactly as
pretrain_gpt.py does (blend, split string, seed, sequence length, per-split sizes). The C++ test
(tests/data/megatron_order_test.cc) rebuilds the corpora from their document lengths and requires our
indices and samples to be these.

Only four modules outside megatron/core/datasets are replaced by stand-ins, because
megatron.core's package __init__ pulls in the whole training stack (torch.distributed.checkpoint
and numpy.dtypes are newer than Debian's torch 1.13 / numpy 1.24): megatron.core.utils
(log_single_rank), megatron.core.tokenizers (the tokenizer base class, used for type hints),
megatron.core.safe_globals (numpy.load; indices are always built fresh here) and the package
itself. Every dataset file runs unmodified.
"""
import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import types

import numpy

MASK64 = (1 << 64) - 1


def token(doc, pos, base):
    # Unique per (document, position) so that any misplaced boundary changes a sample; < 50257.
    return base + doc * 101 + pos


def corpus_lengths(rng, n, max_len, empty_every):
    lengths = [int(x) for x in rng.randint(1, max_len + 1, size=n)]
    if empty_every:
        for d in range(0, n, empty_every):
            lengths[d] = 0
    return lengths


# Document lengths (<= 100 tokens each, so token() stays unique) of the corpora. Some are empty:
# a document of no sequences, as Megatron's preprocess_data.py (and mtnlg-preprocess) record
# empty text. Megatron's GPTDataset splits and indexes sequences, so those documents are skipped.
def make_corpora():
    rng = numpy.random.RandomState(20261124)
    return {
        "a": {"base": 0, "lengths": corpus_lengths(rng, 60, 100, 13)},
        "b": {"base": 7000, "lengths": corpus_lengths(rng, 25, 40, 0)},
        "c": {"base": 10000, "lengths": corpus_lengths(rng, 120, 60, 17)},
        "d": {"base": 30000, "lengths": corpus_lengths(rng, 9, 100, 0)},
        # Preprocessed with --split-sentences: a document's sentences are its sequences.
        "e": {"base": 40000, "sentences": [
            [int(x) for x in rng.randint(1, 34, size=rng.randint(0, 4))] for _ in range(40)]},
    }


# Each case is one pretrain_gpt.py data setup: --data-path (prefixes, weights or none), --split,
# --seed, --seq-length and the per-split sample counts (train, valid, test) that Megatron's
# training loop asks the builder for. They cover one and several epochs, a separate final epoch
# and not, several seeds, and blends of 2, 3 and 4 datasets (equal weights: ties).
CASES = [
    {"name": "one-epoch", "blend": [["a", None]], "split": "1,0,0", "seed": 1234,
     "seq_length": 32, "sizes": [40, 0, 0]},
    {"name": "epochs-split", "blend": [["a", None]], "split": "80,15,5", "seed": 1234,
     "seq_length": 16, "sizes": [700, 90, 12]},
    {"name": "separate-final-epoch", "blend": [["c", None]], "split": "90,8,2", "seed": 42,
     "seq_length": 16, "sizes": [520, 50, 20]},
    {"name": "seed-7", "blend": [["b", None]], "split": "1,0,0", "seed": 7,
     "seq_length": 8, "sizes": [300, 0, 0]},
    {"name": "blend-2", "blend": [["a", 0.3], ["b", 0.7]], "split": "90,8,2", "seed": 1234,
     "seq_length": 16, "sizes": [400, 40, 8]},
    {"name": "blend-3-equal", "blend": [["a", 1.0], ["c", 1.0], ["b", 1.0]], "split": "1,0,0",
     "seed": 1234, "seq_length": 16, "sizes": [999, 0, 0]},
    {"name": "sentences", "blend": [["e", None]], "split": "80,15,5", "seed": 1234,
     "seq_length": 16, "sizes": [300, 30, 10]},
    {"name": "blend-4", "blend": [["a", 0.1], ["b", 0.2], ["c", 0.3], ["d", 0.4]],
     "split": "70,20,10", "seed": 3, "seq_length": 16, "sizes": [800, 60, 10]},
]


def import_megatron(root):
    datasets_dir = os.path.join(root, "megatron", "core", "datasets")
    subprocess.run(["make", "-C", datasets_dir], check=True, stdout=subprocess.DEVNULL)
    sys.path.insert(0, root)

    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    core = module("megatron.core")
    core.__path__ = [os.path.join(root, "megatron", "core")]

    def log_single_rank(logger, *args, rank=0, **kwargs):
        logger.log(*args, **kwargs)

    module("megatron.core.utils", log_single_rank=log_single_rank)
    module("megatron.core.tokenizers", MegatronTokenizerBase=object)
    module("megatron.core.safe_globals", safe_numpy_load=numpy.load)
    from megatron.core.datasets import gpt_dataset, indexed_dataset
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    return gpt_dataset, indexed_dataset, BlendedMegatronDatasetBuilder


class Tokenizer:
    """What GPTDatasetConfig reads of a tokenizer: the vocabulary size and the special ids."""

    vocab_size = 50257
    eod = 50256
    pad = -1
    unique_identifiers = {"class": "Tokenizer"}  # part of a dataset's cache description


def fingerprint(rows):
    """sum over samples i and positions t of token * (2654435761 * (i * len + t) + 1), mod 2^64."""
    f = 0
    for i, row in enumerate(rows):
        for t, v in enumerate(row):
            f = (f + int(v) * ((2654435761 * (i * len(row) + t) + 1) & MASK64)) & MASK64
    return f


def describe_gpt(ds):
    return {
        "documents": [int(ds.indices[0]), int(ds.indices[-1]) + 1] if len(ds.indices) else [0, 0],
        "num_samples": int(ds.num_samples),
        "document_index_dtype": str(ds.document_index.dtype),
        "sample_index_dtype": str(ds.sample_index.dtype),
        "shuffle_index_dtype": str(ds.shuffle_index.dtype),
        "document_index": [int(x) for x in ds.document_index],
        "sample_index": [int(x) for x in ds.sample_index.reshape(-1)],
        "shuffle_index": [int(x) for x in ds.shuffle_index],
    }


def gpt_text(ds, i):
    text, _, _ = ds._query_document_sample_shuffle_indices(i)
    return [int(x) for x in text]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megatron", required=True, help="a Megatron-LM checkout")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                     "megatron_order.json"))
    ap.add_argument("--shown", type=int, default=24, help="samples written out in full per split")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    root = os.path.abspath(args.megatron)
    commit = subprocess.run(["git", "-C", root, "describe", "--tags", "--always"],
                            capture_output=True, text=True).stdout.strip()
    sha = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    gpt_dataset, indexed_dataset, Builder = import_megatron(root)

    # Record which documents arrays were indexed with a separate final epoch (a local of
    # GPTDataset's method): wrap the module-level function the method calls.
    # The outermost call of each build is the method's (the function recurses with False); the
    # table is cleared per case, while every dataset of the case is alive (ids stay unique).
    separate = {}
    depth = threading.local()
    build_document_index = gpt_dataset._build_document_index

    def recording(documents, num_epochs, rng, separate_final_epoch):
        if getattr(depth, "n", 0) == 0:
            separate[id(documents)] = separate_final_epoch
        depth.n = getattr(depth, "n", 0) + 1
        try:
            return build_document_index(documents, num_epochs, rng, separate_final_epoch)
        finally:
            depth.n -= 1

    gpt_dataset._build_document_index = recording

    corpora = make_corpora()
    out = {"megatron": {"describe": commit, "commit": sha}, "numpy": numpy.__version__,
           "token_rule": "token(doc, pos) = base + 101 * doc + pos", "corpora": corpora,
           "cases": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name, c in corpora.items():
            prefix = os.path.join(tmp, name)
            b = indexed_dataset.IndexedDatasetBuilder(prefix + ".bin", dtype=numpy.uint16)
            sentences = c.get("sentences") or [[n] if n else [] for n in c["lengths"]]
            for d, lens in enumerate(sentences):
                b.add_document(numpy.array([token(d, p, c["base"]) for p in range(sum(lens))],
                                           dtype=numpy.uint16), lens)
            b.finalize(prefix + ".idx")

        for case in CASES:
            separate.clear()
            prefixes = [os.path.join(tmp, p) for p, _ in case["blend"]]
            weights = [w for _, w in case["blend"]]
            blend = (prefixes, None if weights[0] is None else weights)
            config = gpt_dataset.GPTDatasetConfig(
                random_seed=case["seed"], sequence_length=case["seq_length"], blend=blend,
                split=case["split"], path_to_cache=os.path.join(tmp, "cache-" + case["name"]),
                tokenizer=Tokenizer(), reset_position_ids=False, reset_attention_mask=False,
                eod_mask_loss=False, create_attention_mask=False)
            sizes = list(case["sizes"])
            built = Builder(gpt_dataset.GPTDataset, sizes, lambda: True, config).build()
            result = dict(case)
            result["splits"] = {}
            for split_name, ds in zip(["train", "valid", "test"], built):
                if ds is None or case["sizes"][["train", "valid", "test"].index(split_name)] == 0:
                    continue
                entry = {"size": len(ds)}
                if isinstance(ds, gpt_dataset.GPTDataset):
                    entry["datasets"] = [describe_gpt(ds)]
                    rows = [gpt_text(ds, i) for i in range(len(ds))]
                else:
                    entry["datasets"] = [describe_gpt(m) for m in ds.datasets]
                    entry["dataset_index_dtype"] = str(ds.dataset_index.dtype)
                    entry["dataset_sample_index_dtype"] = str(ds.dataset_sample_index.dtype)
                    entry["dataset_index"] = [int(x) for x in ds.dataset_index]
                    entry["dataset_sample_index"] = [int(x) for x in ds.dataset_sample_index]
                    rows = [gpt_text(ds.datasets[k], j)
                            for k, j in zip(ds.dataset_index, ds.dataset_sample_index)]
                for k, m in enumerate(entry["datasets"]):
                    gds = ds if isinstance(ds, gpt_dataset.GPTDataset) else ds.datasets[k]
                    m["num_epochs"] = int(len(gds.document_index) // max(1, len(gds.indices)))
                    m["separate_final_epoch"] = bool(separate[id(gds.indices)])
                entry["samples"] = rows[: args.shown]
                entry["fingerprint"] = str(fingerprint(rows))
                result["splits"][split_name] = entry
            out["cases"].append(result)

    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes) with Megatron-LM {commit}")


if __name__ == "__main__":
    main()
