#!/usr/bin/env bash
# A rank dies mid-run: under mpirun, rank 1 of mtnlg-comm-check SIGKILLs itself after the first
# all_reduce; every other rank must exit 1 on its own (no hang) with an error naming peer rank 1.
# Usage: pmix_kill_test.sh MPIRUN COMM_CHECK
# Each rank runs under a small bash wrapper that prints its exit status and exits 0, so that
# mpirun does not abort the job on the first failure; --enable-recovery keeps mpirun from killing
# the survivors when rank 1 dies without PMIx_Finalize, so that each reports on its own.
set -u
mpirun=$1
exe=$2
status=0
for np in 3 4; do
  start=$(date +%s%N)
  out=$(timeout 50 "$mpirun" --enable-recovery --oversubscribe --allow-run-as-root -np "$np" \
    bash -c '"$0" --timeout-s 5 --kill-rank 1; echo "rank $PMIX_RANK exit $?"' "$exe" 2>&1)
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  echo "--- np $np: mpirun rc $rc after $ms ms"
  echo "$out"
  if [ "$rc" -eq 124 ]; then echo "FAIL: np $np hung"; status=1; fi
  grep -q "^rank 1 exit 137$" <<<"$out" || { echo "FAIL: rank 1 was not killed"; status=1; }
  for ((r = 0; r < np; r++)); do
    [ "$r" -eq 1 ] && continue
    grep -q "^rank $r exit 1$" <<<"$out" || { echo "FAIL: rank $r did not exit 1"; status=1; }
    grep -q "^rank $r: FAILED: .*all_reduce.*group 'world'.*peer rank 1 (global rank 1)" <<<"$out" ||
      { echo "FAIL: rank $r's error does not name the group, the op and peer rank 1"; status=1; }
  done
done
exit $status
