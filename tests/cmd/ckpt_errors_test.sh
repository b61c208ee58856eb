#!/usr/bin/env bash
# Bad checkpoints and failed saves: each is a clear error naming the file (or key) with exit 4,
# and the previous checkpoint stays as it was.
#   a missing shard, a flipped byte (checksum), a truncated shard, a manifest of another model
#   shape (names the key) or of a newer format, a latest file that is not a number or names a
#   missing checkpoint, checkpoint.dir that is a file, checkpoint.load naming nothing, a disk that
#   fills during a save (a small tmpfs; where mounting is not allowed, a file-size limit);
#   mtnlg-ckpt's exit statuses.
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

d=$(copy latest-garbage)
echo "abc" >"$d/latest_checkpointed_iteration.txt"
expect latest-garbage 4 "latest_checkpointed_iteration.txt" $(resume "$d")

d=$(copy latest-missing)
echo "7" >"$d/latest_checkpointed_iteration.txt"
expect latest-missing 4 "iteration 7" $(resume "$d")

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
