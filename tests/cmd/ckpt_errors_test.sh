#!/usr/bin/env bash
# Bad checkpoints and failed saves: each is a clear error naming the file (or key) with exit 4,
# and the previous checkpoint stays as it was.
#   a missing shard, a flipped byte (checksum), a truncated shard, a manifest of another model
#   shape (names the key) or of a newer format, a latest file that is not a number or names a
#   missing checkpoint, checkpoint.dir that is a file, checkpoint.load naming nothing, a disk that
#   fills during a save (a small tmpfs; where mounting is not allowed, a file-size limit);
#   mtnlg-ckpt's exit statuses. And Megatron's load semantics: a rollback by the latest file,
#   checkpoint.load_iteration, keep_last and pinned checkpoints (mtnlg-ckpt pin/unpin).
# Usage: tests/cmd/ckpt_errors_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
source "$2/tests/cmd/layout_lib.sh"
layout_setup "$1" "$2"
ckpt=$1/mtnlg-ckpt
status=0
fail() {
  echo "FAIL: $*"
  status=1
}

# CASE WANT_STATUS PATTERN [mtnlg-train args]: runs one process, checks status and output.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local out rc=0
  out=$(run_layout "$name" 1 "$@" 2>&1) || rc=$?
  if [[ $rc != "$want" ]]; then
    fail "$name: exit $rc, expected $want: $out"
  elif ! grep -q -- "$pattern" <<<"$out"; then
    fail "$name: output does not mention '$pattern': $out"
  else
    echo "ok: $name: exit $rc: $(grep -m1 -- "$pattern" <<<"$out" | cut -c1-200)"
  fi
}

good=$tmp/good
run_layout good 1 --set schedule.train_iters=2 --set checkpoint.dir="$good" >/dev/null 2>&1 ||
  fail "the first run failed"
iter=$good/iter_0000002
# A fresh copy of the good checkpoint root for each case.
copy() {
  rm -rf "$tmp/$1"
  cp -r "$good" "$tmp/$1"
  echo "$tmp/$1"
}
resume() { echo --set schedule.train_iters=4 --set checkpoint.dir="$1" --set checkpoint.resume=true; }

d=$(copy missing)
rm "$d/iter_0000002/optim_tp00_pp000_dp000.safetensors"
expect missing 4 "optim_tp00_pp000_dp000.safetensors" $(resume "$d")

d=$(copy flipped)
f=$d/iter_0000002/model_tp00_pp000.safetensors
printf '\x5a' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") / 2)) conv=notrunc status=none
expect flipped 4 "checksum" $(resume "$d")
"$ckpt" verify "$d" >/dev/null 2>&1
[[ $? == 4 ]] || fail "mtnlg-ckpt verify of a damaged checkpoint did not exit 4"

d=$(copy truncated)
truncate -s -100 "$d/iter_0000002/model_tp00_pp000.safetensors"
expect truncated 4 "truncated" $(resume "$d")

d=$(copy shape)
expect shape 2 "model.hidden_size" $(resume "$d") --set model.hidden_size=128  # a setting: exit 2

d=$(copy newer)
sed -i 's/"format_version": 1/"format_version": 99/' "$d/iter_0000002/manifest.json"
expect newer 4 "format_version 99" $(resume "$d")

d=$(copy latest-garbage) # unreadable: the newest committed one is the latest, and the log says why
echo "abc" >"$d/latest_checkpointed_iteration.txt"
expect latest-garbage 0 "now names iteration 2: the latest file was unreadable" $(resume "$d")

# A manifest is checked against its directory and its layout (one validation, every tool).
d=$(copy manifest-iteration)
sed -i 's/"iteration": 2,/"iteration": 99,/' "$d/iter_0000002/manifest.json"
out=$("$ckpt" verify "$d" 2>&1)
[[ $? == 4 ]] && grep -q "says iteration 99 but lies in iter_0000002" <<<"$out" ||
  fail "a manifest of iteration 99 in iter_0000002 passed verify: $out"
d=$(copy manifest-files)
/usr/bin/python3 -c "
import json, sys; p = sys.argv[1]; m = json.load(open(p)); m['files'] = []; json.dump(m, open(p, 'w'))" \
  "$d/iter_0000002/manifest.json"
out=$("$ckpt" inspect "$d" 2>&1)
[[ $? == 4 ]] && grep -q "does not list model_tp00_pp000.safetensors" <<<"$out" ||
  fail "a manifest without files passed inspect: $out"
d=$(copy manifest-shape) # the manifest (model and recipe) says hidden 128; the shards hold 64
sed -i 's/"hidden_size": 64/"hidden_size": 128/; s/"ffn_hidden_size": 256/"ffn_hidden_size": 512/; s/hidden_size: 64/hidden_size: 128/; s/ffn_hidden_size: 256/ffn_hidden_size: 512/' \
  "$d/iter_0000002/manifest.json"
out=$("$ckpt" verify "$d" 2>&1)
[[ $? == 4 ]] && grep -q "in the shards but the manifest's model makes it" <<<"$out" ||
  fail "shards of another shape than the manifest's passed verify: $out"
d=$(copy manifest-layers)
sed -i 's/"num_layers": [0-9]*/"num_layers": -2/' "$d/iter_0000002/manifest.json"
expect manifest-layers 4 "model is impossible (model.num_layers" $(resume "$d")

d=$(copy latest-missing)
echo "7" >"$d/latest_checkpointed_iteration.txt"
expect latest-missing 4 "iteration 7" $(resume "$d")

# Megatron's load semantics. A rollback written into the latest file (echo 2 > latest) is obeyed at
# every start, the newer directories left until this run saves over them; keep_last never deletes
# a pinned checkpoint; checkpoint.load_iteration (--ckpt-step) picks one.
tl=$tmp/timeline
run_layout timeline 1 --set schedule.train_iters=6 --set checkpoint.dir="$tl" \
  --set checkpoint.save_interval=2 >/dev/null 2>&1 || fail "the timeline run failed"
echo 2 >"$tl/latest_checkpointed_iteration.txt"
"$ckpt" pin "$tl/iter_0000004" --note "before the spike" >/dev/null || fail "mtnlg-ckpt pin"
"$ckpt" inspect "$tl/iter_0000004" | grep -q "pinned          before the spike" ||
  fail "inspect does not show the pin"
"$ckpt" verify "$tl/iter_0000004" >/dev/null || fail "a pinned checkpoint does not verify"
rb() { echo --set checkpoint.dir="$tl" --set checkpoint.resume=true "$@"; }
expect rollback 0 "names iteration 2 (a rollback)" $(rb --set schedule.train_iters=5 \
  --set checkpoint.save_interval=0 --set checkpoint.keep_last=1)
[[ $(head -c 200 "$tmp/rollback/metrics.jsonl") == *'"iteration": 3,'* &&
  $(cat "$tl/latest_checkpointed_iteration.txt") == 5 ]] ||
  fail "the rollback run did not continue from iteration 2 to a save of 5: $(head -c 200 "$tmp/rollback/metrics.jsonl")"
[[ -d $tl/iter_0000004 && -d $tl/iter_0000006 ]] ||
  fail "keep_last deleted a pinned checkpoint or one of the timeline rolled back from: $(ls "$tl")"
[[ ! -d $tl/iter_0000002 ]] || fail "keep_last 1 kept iteration 2 after 5 was saved"
expect load-iteration 0 "load_iteration 4 loads an older checkpoint than the latest (5)" $(rb --set schedule.train_iters=5 \
  --set checkpoint.load_iteration=4)
expect load-iteration-missing 4 "committed: 4, 5, 6" $(rb --set checkpoint.load_iteration=3)
expect load-iteration-nothing 2 "checkpoint.load_iteration is 3 but nothing is loaded" \
  --set checkpoint.load_iteration=3
"$ckpt" unpin "$tl/iter_0000004" >/dev/null && [[ ! -e $tl/iter_0000004/pinned.txt ]] ||
  fail "mtnlg-ckpt unpin"

# A tokenizer the model cannot hold is a settings error before anything is built; a model that
# GPT-2's vocabulary does not fit saves checkpoints without one.
expect tokenizer-too-big 2 "has 50257 tokens but model.vocab_size is" \
  --set checkpoint.dir="$tmp/tok" --set tokenizer.vocab_file="$2/data/gpt2/encoder.json" \
  --set tokenizer.merge_file="$2/data/gpt2/vocab.bpe"
[[ ! -e $good/iter_0000002/tokenizer ]] || fail "a model of another vocabulary got GPT-2's tokenizer"

echo x >"$tmp/a-file"
expect dir-is-file 4 "is a file" --set checkpoint.dir="$tmp/a-file" --set checkpoint.save_interval=1
expect load-nothing 4 "checkpoint.load" --set checkpoint.load="$tmp/nothing-here"

# A disk that fills during a save: the checkpoint of iteration 2 fits, the next one does not.
full=$tmp/full
mkdir -p "$full"
limit=""
if mount -t tmpfs -o size=2200k tmpfs "$full" 2>/dev/null; then
  trap 'umount "$full" 2>/dev/null; rm -rf "$tmp"' EXIT
  cp -r "$good" "$full/ck"
  kind="a full disk"
  pattern="No space left on device"
else
  cp -r "$good" "$full/ck"
  limit=1000 # KiB per file: the optimizer shard (1.1 MB) cannot be written
  kind="a file-size limit"
  pattern="File too large"
fi
before=$(cat "$full/ck/latest_checkpointed_iteration.txt")
for async in false true; do # a failed background save stops training too
  out=$( (
    trap '' XFSZ
    [[ -n $limit ]] && ulimit -f "$limit"
    run_layout "full-$async" 1 $(resume "$full/ck") --set checkpoint.save_interval=1 \
      --set checkpoint.async=$async
  ) 2>&1)
  rc=$?
  if [[ $rc != 4 ]] || ! grep -q "$pattern" <<<"$out"; then
    fail "save on $kind (async $async): exit $rc: $out"
  else
    echo "ok: save on $kind (async $async): exit 4: $(grep -m1 "$pattern" <<<"$out" | cut -c1-200)"
  fi
  [[ $(cat "$full/ck/latest_checkpointed_iteration.txt") == "$before" ]] || fail "latest moved"
  "$ckpt" verify "$full/ck" >/dev/null || fail "the previous checkpoint does not verify after $kind"
  [[ -z $(ls "$full/ck" | grep '\.tmp$') ]] || fail "a temporary directory was left on $kind"
done
umount "$full" 2>/dev/null

# mtnlg-ckpt's command line.
"$ckpt" --help >/dev/null || fail "mtnlg-ckpt --help"
"$ckpt" >/dev/null 2>&1
[[ $? == 2 ]] || fail "mtnlg-ckpt without a subcommand did not exit 2"
"$ckpt" convert "$iter" --output "$tmp/c3" --layout 3,1,1 >/dev/null 2>&1
[[ $? == 2 ]] || fail "mtnlg-ckpt convert to tensor 3 (4 heads) did not exit 2"
"$ckpt" convert "$iter" --output "$tmp/c3" --layout 2,x >/dev/null 2>&1
[[ $? == 2 ]] || fail "mtnlg-ckpt convert --layout 2,x did not exit 2"
# convert into a directory that holds something: refused without --force, nothing changed.
mkdir -p "$tmp/other-run" && echo 60 >"$tmp/other-run/latest_checkpointed_iteration.txt"
out=$("$ckpt" convert "$iter" --output "$tmp/other-run" --layout 1,1,1 2>&1)
[[ $? == 2 ]] && grep -q "is not empty.*--force" <<<"$out" &&
  [[ $(cat "$tmp/other-run/latest_checkpointed_iteration.txt") == 60 ]] &&
  [[ $(ls "$tmp/other-run") == latest_checkpointed_iteration.txt ]] ||
  fail "mtnlg-ckpt convert into a non-empty directory was not refused: $out"
"$ckpt" convert "$iter" --output "$tmp/other-run" --layout 1,1,1 --force >/dev/null 2>&1 &&
  "$ckpt" verify "$tmp/other-run" >/dev/null || fail "mtnlg-ckpt convert --force"
"$ckpt" inspect "$tmp/nothing-here" >/dev/null 2>&1
[[ $? == 4 ]] || fail "mtnlg-ckpt inspect of nothing did not exit 4"
"$ckpt" inspect "$iter" | grep -q "iteration       2" || fail "mtnlg-ckpt inspect"
[[ $status == 0 ]] && echo "ckpt_errors_test: ok"
exit $status
