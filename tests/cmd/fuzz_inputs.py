#!/usr/bin/python3
"""Seeded fuzzer for mtnlg-train's inputs: recipes (as files and as --set overrides) and Megatron
.idx/.bin datasets. Every case runs the real executable; a case fails on

  - a crash: death by a signal (SIGSEGV, SIGBUS, SIGABRT, the OOM killer's SIGKILL);
  - a hang: no exit within the case's time limit;
  - an internal error: "internal error" in the output, or exit 1 that is not a diverged run;
  - exit 0 on input that is invalid by construction (an unknown key, a wrong type, a count past
    its documented bound, NaN, a .idx that breaks the format; see the oracles below);
  - a failure (exit 2, 3, 4) whose error line names neither a key nor a file ("[error] kind [X]:");
  - for datasets: a valid file that is refused, or an invalid one refused with the wrong status.

The oracles are written from the docs (docs/recipes.md) and the format description in data/indexed_format.h, not
from the parser: a disagreement is either a bug in the program or in the docs.

Usage: fuzz_inputs.py BUILD_DIR SOURCE_DIR [--seed S] [--recipe-cases N] [--idx-cases M]
                      [--long] [--only KIND:K] [--keep DIR]
  --long        20x the cases (a local soak; CI runs the default, about 90 s on 2 cores)
  --only r:K    run recipe case K alone (i:K: dataset case K), e.g. to reproduce a failure
  --keep DIR    write each failing case's inputs and command there (default: a temp dir, kept
                only when something fails)
Exit status 0 when every case passes, 1 otherwise.
"""
import argparse
import copy
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from prepare_demo_data import write_indexed_dataset  # noqa: E402

VOCAB = 512
DRY_LIMIT_S = 30
TRAIN_LIMIT_S = 120

# Upper bounds docs/recipes.md documents for recipe counts ("Counts have upper bounds ...").
BOUNDS = {
    "model.num_layers": 100_000,
    "model.hidden_size": 2**20,
    "model.num_attention_heads": 2**20,
    "model.ffn_hidden_size": 2**22,
    "model.seq_length": 2**24,
    "model.max_position_embeddings": 2**24,
    "model.vocab_size": 2**30,
    "parallel.tensor": 1024,
    "parallel.pipeline": 100_000,
    "parallel.data": 2**24,
    "parallel.micro_batch_size": 2**24,
    "batch.global_batch_size": 2**30,
    "schedule.train_iters": 2**40,
    "schedule.train_tokens": 2**60,
    "schedule.warmup_tokens": 2**60,
    "schedule.decay_tokens": 2**60,
    "batch.rampup.tokens": 2**60,
    "eval.iters": 2**30,
}
# Counts that must be at least 1.
POSITIVE = {
    "model.num_layers", "model.hidden_size", "model.num_attention_heads", "model.seq_length",
    "model.vocab_size", "parallel.tensor", "parallel.pipeline", "parallel.micro_batch_size",
    "batch.global_batch_size", "model.make_vocab_size_divisible_by",
}
# Keys whose value is a path or a free string: any string may be valid there.
FREE_STRINGS = {"model.init_from", "data.cache_dir", "checkpoint.dir", "checkpoint.load",
                "logging.metrics_file"}
# Keys whose size sets how long a valid run takes: left alone when a case trains.
RUN_LENGTH = {"schedule.train_iters", "schedule.train_tokens", "batch.global_batch_size",
              "model.num_layers", "model.hidden_size", "model.ffn_hidden_size",
              "model.seq_length", "model.max_position_embeddings", "model.vocab_size",
              "eval.iters", "eval.interval", "batch.rampup.start", "batch.rampup.increment",
              "batch.rampup.tokens", "parallel.micro_batch_size", "model.num_attention_heads",
              "logging.interval", "checkpoint.save_interval", "parallel.timeout_s",
              "schedule.exit_duration_minutes"}
INTERESTING_INTS = [0, 1, -1, 2, 3, 7, 64, 1000, 2**31 - 1, 2**31, 2**32, 2**53 + 1,
                    2**62, 2**63 - 1, 2**63, 2**64, -(2**63), 10**30]
INTERESTING_FLOATS = [0.0, -0.0, 1e-300, 5e-324, 0.5, 1.0, 1.5, 1e10, 1e300, 1e308, -1e308]
WRONG_TYPES = ["abc", [1, 2], {"a": 1}, [], {}]


# ---- recipes ----------------------------------------------------------------------------------

def leaves(tree, prefix=""):
    """(path, value) of every scalar or list-of-scalars leaf of a recipe dict."""
    out = []
    for k, v in tree.items():
        path = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.extend(leaves(v, path))
        elif k != "blend":
            out.append((path, v))
    return out


def maps(tree, prefix=""):
    out = [(prefix, tree)]
    for k, v in tree.items():
        if isinstance(v, dict):
            out.extend(maps(v, f"{prefix}.{k}" if prefix else k))
    return out


def set_path(tree, path, value):
    node = tree
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[p]
    node[parts[-1]] = value


def del_path(tree, path):
    node = tree
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[p]
    del node[parts[-1]]


def yaml_flow(value):
    """A value as --set takes it (YAML flow)."""
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...").strip()


def misspell(rng, name):
    ops = [lambda s: s + rng.choice("sx_"), lambda s: s[:-1] if len(s) > 1 else s + "q",
           lambda s: s.replace("_", "", 1) if "_" in s else s + "_x",
           lambda s: s[0].upper() + s[1:]]
    return rng.choice(ops)(name)


def recipe_case(rng, base, required):
    """One mutated recipe: (recipe dict or raw text, overrides, invalid: bool, description,
    touched path or None)."""
    tree = copy.deepcopy(base)
    leafs = leaves(tree)
    kind = rng.choice(["unknown_key", "delete_required", "wrong_type", "non_finite", "negative",
                       "over_bound", "interesting", "interesting", "yaml_damage", "bad_override",
                       "map_to_scalar"])
    as_override = kind not in ("delete_required", "yaml_damage", "map_to_scalar") and rng.random() < 0.5
    path, value, invalid = None, None, True
    if kind == "unknown_key":
        where, node = rng.choice(maps(tree))
        name = misspell(rng, rng.choice(list(node.keys())))
        if name in node:
            name += "_zz"
        path = f"{where}.{name}" if where else name
        value = rng.choice([1, "x", 0.5, True])
    elif kind == "delete_required":
        path = rng.choice(sorted(required))
        del_path(tree, path)
        return tree, [], True, f"delete required {path}", path
    elif kind == "wrong_type":
        path, old = rng.choice(leafs)
        candidates = [w for w in WRONG_TYPES
                      if not (isinstance(w, str) and (path in FREE_STRINGS or isinstance(old, str)))
                      and not (isinstance(w, list) and isinstance(old, list))]
        value = rng.choice(candidates)
    elif kind == "non_finite":
        floats = [(p, v) for p, v in leafs if isinstance(v, float)]
        path, _ = rng.choice(floats)
        value = rng.choice([math.nan, math.inf, -math.inf])
    elif kind == "negative":
        nums = [(p, v) for p, v in leafs
                if isinstance(v, (int, float)) and not isinstance(v, bool)
                and (p in POSITIVE or isinstance(v, float))]
        path, _ = rng.choice(nums)
        value = -rng.choice([1, 2, 1000, 2**40]) if path in POSITIVE else -rng.choice([1e-3, 1.0, 1e10])
        if path in POSITIVE and rng.random() < 0.3:
            value = 0
    elif kind == "over_bound":
        path = rng.choice(sorted(BOUNDS))
        value = BOUNDS[path] + rng.choice([1, 2, 1000, BOUNDS[path]])
    elif kind == "interesting":
        path, old = rng.choice(leafs)
        if isinstance(old, bool):
            value = rng.choice([0, 1, "yes", "maybe", 2])
        elif isinstance(old, int):
            value = rng.choice(INTERESTING_INTS)
        elif isinstance(old, float):
            value = rng.choice(INTERESTING_FLOATS + INTERESTING_INTS[:6])
        elif isinstance(old, list):
            value = [rng.choice(INTERESTING_FLOATS) for _ in range(rng.choice([0, 1, 2, 3, 4]))]
        else:
            value = rng.choice(["", "x", "gelu", "cosine", "linear", "bf16", "nonexistent/x",
                                "a" * 300])
        invalid = False  # may or may not be valid: only crashes, hangs and unnamed errors count
    elif kind == "yaml_damage":
        text = yaml.safe_dump(tree, sort_keys=False)
        op = rng.choice(["truncate", "insert", "delete_line", "tab", "dup_line"])
        if op == "truncate":
            text = text[: rng.randrange(len(text))]
        elif op == "insert":
            at = rng.randrange(len(text))
            junk = "".join(rng.choice(":-[]{}'\"\t#&*!|>%@` \n\x00\xff") for _ in range(rng.randint(1, 4)))
            text = text[:at] + junk + text[at:]
        elif op == "delete_line":
            lines = text.splitlines(True)
            del lines[rng.randrange(len(lines))]
            text = "".join(lines)
        elif op == "tab":
            text = text.replace("  ", "\t", 1)
        else:
            lines = text.splitlines(True)
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "".join(lines)
        return text, [], False, f"yaml {op}", None
    elif kind == "bad_override":
        bad = rng.choice(["model.hidden_size", "=1", "model..hidden_size=1", ".model=1",
                          "model.hidden_size.x=1", "model=[1,2]", "model.hidden_size=[",
                          "nosuch=1", "model.hidden_size={a: 1}", "data.blend=5"])
        return tree, [bad], True, f"override {bad}", None
    elif kind == "map_to_scalar":
        section = rng.choice([k for k, v in tree.items() if isinstance(v, dict)])
        tree[section] = rng.choice([5, "x", [1, 2]])
        return tree, [], True, f"section {section} replaced by a scalar", section
    if as_override:
        return tree, [f"{path}={yaml_flow(value)}"], invalid, f"{kind} --set {path}={yaml_flow(value)}", path
    set_path(tree, path, value)
    return tree, [], invalid, f"{kind} {path}: {value!r}", path


# ---- datasets ---------------------------------------------------------------------------------

def idx_valid(idx, bin_size):
    """What the format (data/indexed_format.h) says of an .idx: 'ok', 'unsupported' (a Megatron
    dtype we do not read), 'corrupt', plus the parsed lengths when ok."""
    if len(idx) < 34 or idx[:9] != b"MMIDIDX\x00\x00":
        return "corrupt", None
    version, = struct.unpack_from("<Q", idx, 9)
    code = idx[17]
    n, d = struct.unpack_from("<QQ", idx, 18)
    if version != 1 or code not in range(1, 9):
        return "corrupt", None
    if code not in (4, 8):
        return "unsupported", None
    item = 2 if code == 8 else 4
    if 34 + 12 * n + 8 * d != len(idx):
        return "corrupt", None
    lengths = struct.unpack_from(f"<{n}i", idx, 34)
    pointers = struct.unpack_from(f"<{n}q", idx, 34 + 4 * n)
    docs = struct.unpack_from(f"<{d}q", idx, 34 + 12 * n)
    at = 0
    for length, ptr in zip(lengths, pointers):
        if length < 0 or ptr != at:
            return "corrupt", None
        at += length * item
    if at != bin_size:
        return "corrupt", None
    if d == 0 or docs[0] != 0 or docs[-1] != n or any(b < a for a, b in zip(docs, docs[1:])):
        return "corrupt", None
    return "ok", (code, lengths, docs)


def idx_case(rng, idx, binary):
    """A mutated (idx, bin) pair and a description."""
    idx, binary = bytearray(idx), bytearray(binary)
    n, d = struct.unpack_from("<QQ", idx, 18)
    kind = rng.choice(["bitflip", "field", "field", "truncate_idx", "append_idx", "truncate_bin",
                       "append_bin", "token", "doc_index"])
    if kind == "bitflip":
        at = rng.randrange(len(idx))
        idx[at] ^= 1 << rng.randrange(8)
        desc = f"idx bit flip at byte {at}"
    elif kind == "field":
        field = rng.choice(["version", "dtype", "n", "d", "length", "pointer"])
        value = rng.choice([0, 1, -1, 2, n - 1, n + 1, d - 1, d + 1, 2**31, 2**63 - 1, rng.randrange(2**16)])
        if field == "version":
            struct.pack_into("<q" if value < 0 else "<Q", idx, 9, value % 2**64 if value >= 0 else value)
        elif field == "dtype":
            idx[17] = value % 256
        elif field in ("n", "d"):
            struct.pack_into("<Q", idx, 18 if field == "n" else 26, value % 2**64)
        elif field == "length":
            i = rng.randrange(n)
            struct.pack_into("<i", idx, 34 + 4 * i, max(-(2**31), min(2**31 - 1, value)))
        else:
            i = rng.randrange(n)
            struct.pack_into("<q", idx, 34 + 4 * n + 8 * i, max(-(2**63), min(2**63 - 1, value)))
        desc = f"idx field {field} = {value}"
    elif kind == "truncate_idx":
        cut = rng.randrange(len(idx))
        del idx[cut:]
        desc = f"idx truncated to {cut} bytes"
    elif kind == "append_idx":
        k = rng.choice([1, 4, 8, 12, 20])
        idx += bytes(rng.randrange(256) for _ in range(k))
        desc = f"idx + {k} bytes"
    elif kind == "truncate_bin":
        cut = rng.randrange(len(binary))
        del binary[cut:]
        desc = f"bin truncated to {cut} bytes"
    elif kind == "append_bin":
        k = rng.choice([1, 2, 4, 100])
        binary += bytes(k)
        desc = f"bin + {k} bytes"
    elif kind == "token":
        i = rng.randrange(len(binary) // 2)
        v = rng.choice([VOCAB - 1, VOCAB, VOCAB + 1, 65535, rng.randrange(65536)])
        struct.pack_into("<H", binary, 2 * i, v)
        desc = f"bin token {i} = {v}"
    else:
        i = rng.randrange(1, d)
        v = rng.choice([0, 1, i - 1, i + 1, n, n + 1, -1])
        struct.pack_into("<q", idx, 34 + 12 * n + 8 * i, v)
        desc = f"document index {i} = {v}"
    return bytes(idx), bytes(binary), desc


# ---- running ----------------------------------------------------------------------------------

ERROR_NAMED = re.compile(r"\[error\] [A-Za-z/ ]+ \[.+?\]: ")


def run(cmd, limit, cwd):
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=limit, errors="replace", text=True)
        return p.returncode, p.stdout, time.monotonic() - start
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out, time.monotonic() - start


def judge(rc, out, invalid, training, expect=None):
    """The reason a run fails the oracle, or None."""
    if rc is None:
        return "hang: no exit within the limit"
    if rc < 0:
        return f"crash: killed by signal {-rc}"
    if rc >= 128:
        return f"crash: exit {rc} (a signal)"
    if "internal error" in out:
        return "internal error"
    if rc == 1 and not (training and "diverged" in out):
        return "exit 1 (not a diverged run)"
    if expect is not None and rc not in expect:
        return f"exit {rc}, expected one of {sorted(expect)}"
    if rc == 0 and invalid:
        return "exit 0 on invalid input"
    if rc in (2, 3, 4) and not ERROR_NAMED.search(out):
        return "the error names no key or file"
    return None


class Fuzzer:
    def __init__(self, args):
        self.bin = os.path.abspath(os.path.join(args.build, "mtnlg-train"))
        self.src = os.path.abspath(args.source)
        self.seed = args.seed
        self.work = tempfile.mkdtemp(prefix="mtnlg-fuzz-")
        self.keep = args.keep or os.path.join(self.work, "failures")
        self.failures = 0
        self.counts = {}
        self.statuses = {}  # mutation kind -> exit status -> cases
        corpus = os.path.join(self.work, "corpus")
        rng = random.Random(7)
        docs = [[rng.randrange(VOCAB) for _ in range(10 + rng.randrange(40))] for _ in range(30)]
        write_indexed_dataset(corpus, docs)
        with open(corpus + ".idx", "rb") as f:
            self.idx = f.read()
        with open(corpus + ".bin", "rb") as f:
            self.binary = f.read()
        with open(os.path.join(self.src, "configs", "tiny.yaml")) as f:
            tiny = yaml.safe_load(f)
        tiny["data"]["blend"] = [{"prefix": corpus, "weight": 1.0}]
        tiny["data"]["cache_dir"] = os.path.join(self.work, "cache")
        tiny["logging"] = {"metrics_file": os.path.join(self.work, "base", "metrics.jsonl")}
        tiny["schedule"]["train_iters"] = 2
        base_path = os.path.join(self.work, "tiny.yaml")
        with open(base_path, "w") as f:
            yaml.safe_dump(tiny, f)
        rc, out, _ = run([self.bin, "--config", base_path, "--threads", "1"], TRAIN_LIMIT_S, self.work)
        if rc != 0:
            sys.exit(f"fuzz: the base recipe does not train (exit {rc}):\n{out[-2000:]}")
        # Every key, defaults filled in: the trainer's resolved recipe.
        with open(os.path.join(self.work, "base", "resolved_recipe.yaml")) as f:
            self.base = yaml.safe_load(f)
        readme = open(os.path.join(self.src, "docs", "recipes.md")).read()
        self.required = set(re.findall(r"^\| \*\*([a-z_.]+)\*\* \|", readme, re.M))
        if not self.required:
            sys.exit("fuzz: no required keys (| **key** |) found in docs/recipes.md")

    def tally(self, kind, rc):
        row = self.statuses.setdefault(kind, {})
        key = "hang" if rc is None else str(rc)
        row[key] = row.get(key, 0) + 1

    def fail(self, what, k, desc, cmd, files, rc, out, reason):
        self.failures += 1
        d = os.path.join(self.keep, f"{what}-{k}")
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb" if isinstance(data, bytes) else "w") as f:
                f.write(data)
        with open(os.path.join(d, "command"), "w") as f:
            f.write(" ".join(cmd) + "\n")
        print(f"FAIL {what}:{k} ({desc}): {reason}\n  reproduce: {sys.argv[0]} {sys.argv[1]} "
              f"{sys.argv[2]} --seed {self.seed} --only {what}:{k}\n  inputs: {d}\n  output: "
              + "\n    ".join(out.strip().splitlines()[-4:]), flush=True)

    def recipe(self, k):
        rng = random.Random(self.seed * 1_000_003 + k)
        tree, overrides, invalid, desc, path = recipe_case(rng, self.base, self.required)
        training = rng.random() < 0.15 and (invalid or path not in RUN_LENGTH)
        d = os.path.join(self.work, f"r{k}")
        os.makedirs(d, exist_ok=True)
        cfg = os.path.join(d, "recipe.yaml")
        text = tree if isinstance(tree, str) else yaml.safe_dump(tree, sort_keys=False)
        with open(cfg, "w", errors="surrogateescape") as f:
            f.write(text)
        cmd = [self.bin, "--config", cfg, "--threads", "1"]
        for o in overrides:
            cmd += ["--set", o]
        if training:
            # Keep the run short and its files in this case's folder, after the mutation (unless
            # the mutation is the key itself).
            if path != "logging.metrics_file" and "logging.metrics_file" not in " ".join(overrides):
                cmd += ["--set", f"logging.metrics_file={d}/m.jsonl"]
        else:
            cmd += ["--dry-run"]
        rc, out, _ = run(cmd, TRAIN_LIMIT_S if training else DRY_LIMIT_S, d)
        self.counts["recipe"] = self.counts.get("recipe", 0) + 1
        self.tally(desc.split(" ")[0] + (" (train)" if training else ""), rc)
        reason = judge(rc, out, invalid, training)
        if reason:
            self.fail("r", k, desc, cmd, {"recipe.yaml": text}, rc, out, reason)
        shutil.rmtree(d, ignore_errors=True)

    def dataset(self, k):
        rng = random.Random(self.seed * 1_000_003 + 500_000 + k)
        idx, binary, desc = idx_case(rng, self.idx, self.binary)
        d = os.path.join(self.work, f"i{k}")
        os.makedirs(d, exist_ok=True)
        prefix = os.path.join(d, "ds")
        with open(prefix + ".idx", "wb") as f:
            f.write(idx)
        with open(prefix + ".bin", "wb") as f:
            f.write(binary)
        verdict, parsed = idx_valid(idx, len(binary))
        expect = {"corrupt": {4}, "unsupported": {3}}.get(verdict)
        if verdict == "ok":
            code, lengths, docs = parsed
            item = 2 if code == 8 else 4
            tokens = struct.unpack(f"<{len(binary) // item}{'H' if item == 2 else 'i'}", binary)
            if len(docs) < 2:
                expect = {2}  # no documents: names the dataset's data.blend entry
            elif sum(lengths) == 0:
                expect = {2}  # no tokens: names data.split
            elif any(t < 0 or t >= VOCAB for t in tokens):
                expect = {2}  # a token id past model.vocab_size, found at start
            else:
                expect = {0}
        cmd = [self.bin, "--config", os.path.join(self.work, "tiny.yaml"), "--threads", "1",
               "--set", f"data.blend=[{{prefix: {prefix}, weight: 1}}]",
               "--set", f"data.cache_dir={d}/cache", "--set", f"logging.metrics_file={d}/m.jsonl"]
        rc, out, _ = run(cmd, TRAIN_LIMIT_S, d)
        self.counts["dataset"] = self.counts.get("dataset", 0) + 1
        self.tally(f"dataset {verdict}", rc)
        reason = judge(rc, out, expect != {0}, True, expect)
        if reason is None and rc == 4 and "ds.idx" not in out and "ds.bin" not in out:
            reason = "a corrupt dataset's error does not name its .idx or .bin"
        if reason:
            self.fail("i", k, f"{desc}; format says {verdict}", cmd,
                      {"ds.idx": idx, "ds.bin": binary}, rc, out, reason)
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("source")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--recipe-cases", type=int, default=2000)
    ap.add_argument("--idx-cases", type=int, default=200)
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--keep")
    args = ap.parse_args()
    if args.long:
        args.recipe_cases *= 20
        args.idx_cases *= 20
    fuzz = Fuzzer(args)
    start = time.monotonic()
    if args.only:
        what, k = args.only.split(":")
        (fuzz.recipe if what == "r" else fuzz.dataset)(int(k))
    else:
        # Interleaved by position, so that a shortened run still covers both kinds.
        order = [(k / max(args.recipe_cases, 1), 0, k) for k in range(args.recipe_cases)]
        order += [((j + 0.5) / max(args.idx_cases, 1), 1, j) for j in range(args.idx_cases)]
        for _, kind, k in sorted(order):
            (fuzz.dataset if kind else fuzz.recipe)(k)
    print("exit statuses by mutation:")
    for kind in sorted(fuzz.statuses):
        row = fuzz.statuses[kind]
        print(f"  {kind:28s} " + "  ".join(f"{rc}: {n}" for rc, n in sorted(row.items())))
    print(f"fuzz: seed {args.seed}: {fuzz.counts.get('recipe', 0)} recipe cases, "
          f"{fuzz.counts.get('dataset', 0)} dataset cases in {time.monotonic() - start:.0f} s: "
          f"{fuzz.failures} failed")
    if fuzz.failures == 0:
        shutil.rmtree(fuzz.work, ignore_errors=True)
    return 1 if fuzz.failures else 0


if __name__ == "__main__":
    sys.exit(main())
