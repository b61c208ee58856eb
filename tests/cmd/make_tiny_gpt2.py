#!/usr/bin/python3
"""Writes a random GPT-2 checkpoint in Hugging Face's layout and safetensors format (the names
and shapes of the released model.safetensors: wte, wpe, h.{i}.ln_1/attn.c_attn/attn.c_proj/ln_2/
mlp.c_fc/mlp.c_proj, ln_f; Conv1D weights [in, out]), independent of our C++ writer.
Usage: make_tiny_gpt2.py FILE LAYERS HIDDEN VOCAB POSITIONS [SEED]"""
import json
import struct
import sys

import numpy as np


def main():
    path, layers, hidden, vocab, positions = sys.argv[1], *map(int, sys.argv[2:6])
    rng = np.random.default_rng(int(sys.argv[6]) if len(sys.argv) > 6 else 1)
    h = hidden
    shapes = {"wte.weight": [vocab, h], "wpe.weight": [positions, h],
              "ln_f.weight": [h], "ln_f.bias": [h]}
    for i in range(layers):
        p = f"h.{i}."
        shapes.update({p + "ln_1.weight": [h], p + "ln_1.bias": [h],
                       p + "attn.c_attn.weight": [h, 3 * h], p + "attn.c_attn.bias": [3 * h],
                       p + "attn.c_proj.weight": [h, h], p + "attn.c_proj.bias": [h],
                       p + "ln_2.weight": [h], p + "ln_2.bias": [h],
                       p + "mlp.c_fc.weight": [h, 4 * h], p + "mlp.c_fc.bias": [4 * h],
                       p + "mlp.c_proj.weight": [4 * h, h], p + "mlp.c_proj.bias": [h]})
    header, blobs, offset = {}, [], 0
    for name, shape in shapes.items():
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            a = 0.05 * rng.standard_normal(shape)
        data = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
