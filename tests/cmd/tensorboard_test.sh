#!/usr/bin/env bash
# logging.tensorboard_dir: a training run writes TensorBoard event files with the metrics file's
# scalars under Megatron-LM's names. Decoded here in Python from the format's definition (the
# TFRecord framing with masked CRC-32C, the Event/Summary protocol buffers), independently of
# core/tensorboard.cc: every CRC holds, 'lm loss' and 'learning-rate' at each iteration equal the
# metrics lines (as float32), the validation scalars are there, and a resume adds a file.
# Usage: tests/cmd/tensorboard_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"
status=0
tb=$tmp/tb
run_layout tb 1 --set schedule.train_iters=4 --set "data.split=[8,1,1]" --set eval.interval=2 --set eval.iters=1 \
  --set logging.tensorboard_dir="$tb" --set checkpoint.dir="$tmp/ck" \
  --set checkpoint.save_interval=2 || { echo "FAIL: training"; exit 1; }
run_layout tb 1 --set schedule.train_iters=6 --set "data.split=[8,1,1]" --set eval.interval=2 --set eval.iters=1 \
  --set logging.tensorboard_dir="$tb" --set checkpoint.dir="$tmp/ck" \
  --set checkpoint.resume=true >/dev/null 2>&1 || { echo "FAIL: resuming"; exit 1; }
/usr/bin/python3 - "$tb" "$tmp/tb/metrics.jsonl" <<'PY' || status=1
import glob, json, struct, sys

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(b, i):
    v = s = 0
    while True:
        x = b[i]; i += 1
        v |= (x & 0x7F) << s; s += 7
        if x < 0x80:
            return v, i

def fields(b):
    """protobuf wire format -> [(field, value)]"""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0:
            v, i = varint(b, i)
        elif t == 1:
            v = b[i:i + 8]; i += 8
        elif t == 5:
            v = b[i:i + 4]; i += 4
        elif t == 2:
            n, i = varint(b, i)
            v = b[i:i + n]; i += n
        else:
            raise ValueError("wire type %d" % t)
        out.append((f, v))
    return out

files = sorted(glob.glob(sys.argv[1] + "/events.out.tfevents.*"))
ok = len(files) == 2
scalars = {}
for path in files:
    data = open(path, "rb").read()
    i, events = 0, []
    while i < len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        ok &= struct.unpack_from("<I", data, i + 8)[0] == masked(data[i:i + 8])
        rec = data[i + 12:i + 12 + n]
        ok &= struct.unpack_from("<I", data, i + 12 + n)[0] == masked(rec)
        events.append(fields(rec))
        i += 16 + n
    ok &= (3, b"brain.Event:2") in events[0]
    for ev in events[1:]:
        d = dict(ev)
        step = d.get(2, 0)
        for f, v in fields(d[5]):
            val = dict(fields(v))
            scalars.setdefault(val[1].decode(), {})[step] = struct.unpack("<f", val[2])[0]
lines = [json.loads(l) for l in open(sys.argv[2])]
train = [l for l in lines if l["split"] == "train"]
valid = [l for l in lines if l["split"] == "valid"]
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
ok &= [l["iteration"] for l in train] == [1, 2, 3, 4, 5, 6]
for l in train:
    ok &= scalars["lm loss"][l["iteration"]] == f32(l["loss"])
    ok &= scalars["learning-rate"][l["iteration"]] == f32(l["lr"])
    ok &= scalars["grad-norm"][l["iteration"]] == f32(l["grad_norm"])
    ok &= scalars["lm loss vs samples"][l["consumed_samples"]] == f32(l["loss"])
    ok &= scalars["batch-size"][l["iteration"]] == l["global_batch_size"]
for l in valid:
    ok &= scalars["lm loss validation"][l["iteration"]] == f32(l["loss"])
    ok &= scalars["lm loss validation ppl"][l["iteration"]] == f32(l["ppl"])
for tag in ["iteration-time", "throughput", "tokens-per-sec", "loss-scale"]:
    ok &= sorted(scalars[tag]) == [1, 2, 3, 4, 5, 6]
print("tensorboard_test:", "ok" if ok else "FAIL", len(files), "files,", sorted(scalars))
sys.exit(0 if ok else 1)
PY
exit $status
