#!/usr/bin/python3
"""A Hugging Face GPT-2 safetensors file (what `mtnlg-ckpt export --format hf-gpt2` writes, with
config.json beside it) -> a Megatron-LM GPT checkpoint in its `torch` format, split for tensor x
pipeline parallelism, in Megatron-Core's names (--transformer-impl transformer_engine, the
default, or local) or the legacy GPTModel's (legacy), that Megatron-LM loads with --load DIR
--ckpt-format torch and the same --transformer-impl (weights alone: use --no-load-optim, or
--finetune; `mtnlg-ckpt export --format megatron` writes the optimizer state, the schedule's
state and the position too). The layout is scripts/megatron_ckpt.py's.

Usage: hf_to_megatron.py MODEL.safetensors --output DIR [--tensor T] [--pipeline P]
       [--iteration N] [--make-vocab-size-divisible-by 128]
       [--transformer-impl transformer_engine|local|legacy]
Writes DIR/iter_NNNNNNN/mp_rank_TT[_PPP]/model_optim_rng.pt and DIR/latest_checkpointed_iteration.txt.
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_ckpt as mc  # noqa: E402


def main():
    mc.PROG = "hf_to_megatron"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--output", required=True)
    ap.add_argument("--tensor", type=int, default=1)
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--iteration", type=int, default=0)
    ap.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    ap.add_argument("--transformer-impl", default="transformer_engine",
                    choices=["transformer_engine", "local", "legacy"])
    a = ap.parse_args()
    src = os.path.dirname(os.path.abspath(a.model))
    if not os.path.exists(os.path.join(src, "config.json")):
        mc.fail(f"no config.json beside {a.model}")
    # megatron_ckpt's write reads SRC/model.safetensors and SRC/config.json: a directory of
    # links to the two (the model file may have another name), weights alone.
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.abspath(a.model), os.path.join(tmp, "model.safetensors"))
        shutil.copyfile(os.path.join(src, "config.json"), os.path.join(tmp, "config.json"))
        mc.write(argparse.Namespace(src=tmp, out=a.output, tensor=a.tensor, pipeline=a.pipeline,
                                    iteration=a.iteration,
                                    make_vocab_size_divisible_by=a.make_vocab_size_divisible_by,
                                    transformer_impl=a.transformer_impl))


if __name__ == "__main__":
    main()
