#!/usr/bin/env bash
# A rank that fails before the rendezvous under a launcher that leaves the other ranks running
# (srun --kill-on-bad-exit=0): rank 1's layout does not divide the world (exit 2); rank 0, which
# waits for rank 1's keys, stops within seconds rather than its 300 s parallel.timeout_s, naming
# rank 1 (Runtime leaves failed@1 in its PMIx data; PmixStore::get looks for it once a second).
# Usage: tests/cmd/rank_fails_at_start_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/rank.sh" <<WRAP
#!/usr/bin/env bash
extra=()
[[ \$PMIX_RANK == 1 ]] && extra=(--set parallel.data=2)
exec "$build/mtnlg-train" --config "$src/configs/tiny.yaml" --threads 1 \\
  --set parallel.tensor=2 --set parallel.timeout_s=300 \\
  --set logging.metrics_file="$tmp/metrics.jsonl" "\${extra[@]}" >"$tmp/rank.\$PMIX_RANK.log" 2>&1
WRAP
chmod +x "$tmp/rank.sh"
start=$SECONDS
set +e
srun --mpi=pmix --kill-on-bad-exit=0 --time=5 -n 2 "$tmp/rank.sh" 2>"$tmp/srun.err"
set -e
took=$((SECONDS - start))
cat "$tmp"/rank.*.log
((took < 60)) || { echo "FAIL: rank 0 waited $took s for a rank that had failed"; exit 1; }
grep -q "parallel.data" "$tmp/rank.1.log" || { echo "FAIL: rank 1 did not name its key"; exit 1; }
grep -q "rank 1 stopped with an error" "$tmp/rank.0.log" ||
  { echo "FAIL: rank 0 did not name the failed rank"; exit 1; }
grep -q "task 0: Exited with exit code 4" "$tmp/srun.err" ||
  { echo "FAIL: rank 0's status is not 4"; cat "$tmp/srun.err"; exit 1; }
echo "a rank failing at the start stops the others in $took s: ok"
