#!/usr/bin/python3
"""Megatron-LM GPT checkpoint (the legacy `torch` format or `torch_dist`; the legacy GPTModel's
names or Megatron-Core's) -> one Hugging Face GPT-2 safetensors
file with config.json beside it, which mtnlg-train loads as `model.init_from` and mtnlg-generate /
mtnlg-eval read as `--hf-model`. Weights only; `mtnlg-ckpt import --format megatron` brings the
optimizer state, the iteration and the data position too. The layout and the reader are
scripts/megatron_ckpt.py's.

Input: DIR = a Megatron checkpoint root (its latest_checkpointed_iteration.txt names the
iteration) or one iter_NNNNNNN directory. Output: HF GPT-2 names and Conv1D layout ([in, out]),
the vocabulary unpadded to --vocab-size, float32. With --vocab-file/--merge-file the tokenizer is
written beside it too (vocab.json, merges.txt), as mtnlg-ckpt export does.

Usage: megatron_to_hf.py DIR --output OUT/model.safetensors [--vocab-size N]
       [--vocab-file encoder.json --merge-file vocab.bpe]
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ckpt as mc  # noqa: E402


def main():
    mc.PROG = "megatron_to_hf"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--output", required=True)
    ap.add_argument("--vocab-size", type=int, default=0,
                    help="rows of the word embeddings to keep (default: the args' vocab_size, "
                         "else 50257 for GPT2BPETokenizer)")
    ap.add_argument("--vocab-file")
    ap.add_argument("--merge-file")
    a = ap.parse_args()
    mc.need_torch()
    it_dir = mc.iteration_dir(a.dir)
    ck = mc.Opened(it_dir, a.vocab_size)
    out = ck.weights()
    mc.write_safetensors(a.output, out)
    out_dir = os.path.dirname(os.path.abspath(a.output))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(mc.hf_config(out, ck.layers, ck.heads, ck.args), f, indent=1)
    if a.vocab_file and a.merge_file:
        shutil.copyfile(a.vocab_file, os.path.join(out_dir, "vocab.json"))
        shutil.copyfile(a.merge_file, os.path.join(out_dir, "merges.txt"))
    print(f"wrote {a.output} and config.json beside it: {ck.layers} layers, hidden "
          f"{out['wte.weight'].shape[1]}, {ck.heads} heads, vocab {ck.vocab}, from tensor "
          f"{ck.tp} x pipeline {ck.pp} of {os.path.basename(os.path.normpath(it_dir))} "
          f"({ck.format})")


if __name__ == "__main__":
    main()
