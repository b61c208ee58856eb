#!/usr/bin/env bash
# A rank dies mid-run: under mpirun, rank 1 of mtnlg-comm-check SIGKILLs itself after the first
# all_reduce; every other rank must exit 1 on its own (no hang) with an error naming peer rank 1.
# Usage: pmix_kill_test.sh MPIRUN COMM_CHECK [TRANSPORT]  (default gloo, mtnlg-comm-check's)
# Each rank runs under a small bash wrapper that prints its exit status and exits 0, so that
# mpirun does not abort the job on the first failure; --enable-recovery keeps mpirun from killing
# the survivors when rank 1 dies without PMIx_Finalize, so that each reports on its own.
# Time limits come from the communicator's timeout, not from guesses about the machine: every
# wait (rendezvous, each collective) is bounded by timeout_s, and a survivor's wait can chain
# through at most np - 1 other ranks (it waits on a live rank that waits on the dead one), so a
# run ends within (np + 1) x timeout_s: one for the rendezvous, np - 1 for the chain, one for
# start-up and the work between the waits. Past that the job counts as hung. CTest's TIMEOUT for
# this test is the sum over the runs (tests/extra_tests.cmake).
set -u
mpirun=$1
exe=$2
transport=${3:-gloo}
timeout_s=5
status=0
for np in 3 4; do
  limit_s=$(((np + 1) * timeout_s))
  start=$(date +%s%N)
  out=$(timeout "$limit_s" "$mpirun" --enable-recovery --oversubscribe --allow-run-as-root -np "$np" \
    bash -c '"$0" --timeout-s "$1" --kill-rank 1 --transport "$2"; echo "rank $PMIX_RANK exit $?"' \
    "$exe" "$timeout_s" "$transport" 2>&1)
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  echo "--- np $np: mpirun rc $rc after $ms ms (limit ${limit_s} s)"
  echo "$out"
  if [ "$rc" -eq 124 ]; then echo "FAIL: np $np hung (still running after (np + 1) x timeout_s = ${limit_s} s)"; status=1; fi
  grep -q "^rank 1 exit 137$" <<<"$out" || { echo "FAIL: rank 1 was not killed"; status=1; }
  for ((r = 0; r < np; r++)); do
    [ "$r" -eq 1 ] && continue
    grep -q "^rank $r exit 1$" <<<"$out" || { echo "FAIL: rank $r did not exit 1"; status=1; }
    grep -q "^rank $r: FAILED: .*all_reduce.*group 'world'.*peer rank 1 (global rank 1)" <<<"$out" ||
      { echo "FAIL: rank $r's error does not name the group, the op and peer rank 1"; status=1; }
  done
done
exit $status
