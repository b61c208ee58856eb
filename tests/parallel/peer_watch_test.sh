#!/usr/bin/env bash
# PeerWatch on real processes under a PMIx launcher: rank 1 of three stops after the first
# all_reduce, killed (SIGKILL: only its vanished pid tells) or by an error (its Runtime says so
# through the PMIx store); ranks 0 and 2 must each name it with a PeerWatch, and exit 0. Then
# rank 1 is killed before the rendezvous, with each CPU transport: the others' waits for it (its
# keys in the PMIx store, its TCP connection) must stop naming it, well within the 20 s timeout.
# Usage: peer_watch_test.sh mpirun|srun LAUNCHER COMM_CHECK
# Each rank runs under a bash wrapper that prints its exit status and exits 0, so that the
# launcher does not stop the job on rank 1's end (mpirun also needs --enable-recovery, srun
# --kill-on-bad-exit=0: what leaves survivors running, the case the watch exists for).
set -u
kind=$1
launcher=$2
exe=$3
timeout_s=20
status=0
for case_ in "kill tcp" "error tcp" "kill-early tcp" "kill-early gloo" "kill-early shm"; do
  read -r how transport <<<"$case_"
  case $kind in
    mpirun) cmd=("$launcher" --enable-recovery --oversubscribe --allow-run-as-root -np 3) ;;
    srun) cmd=("$launcher" --mpi=pmix --kill-on-bad-exit=0 --time=2 -n 3) ;;
    *) echo "usage: peer_watch_test.sh mpirun|srun LAUNCHER COMM_CHECK" >&2; exit 2 ;;
  esac
  out=$(timeout $((timeout_s + 30)) "${cmd[@]}" bash -c \
    '"$0" --timeout-s "$1" --transport "$3" --watch-rank 1 --watch-how "$2"; echo "rank $PMIX_RANK exit $?"' \
    "$exe" "$timeout_s" "$how" "$transport" 2>&1)
  rc=$?
  echo "--- $kind, $transport, rank 1 stops by $how: launcher rc $rc"
  echo "$out"
  # What ranks 0 and 2 must print (grep -E), and their exit status.
  case $how in
    kill)
      want="watch: peer rank 1 \(global rank 1\) is gone: its process \(pid [0-9]+ on this host\) ended without saying why"
      code=0 ;;
    error)
      want="watch: peer rank 1 \(global rank 1\) stopped with an error \(on host [^,]*, pid [0-9]+; its own output says why\)"
      code=0 ;;
    kill-early)
      # A rank waits for one of its keys (the store's RankSigns) or, over TCP, for its
      # connection (the transport's PeerWatch): each must stop naming it.
      want="FAILED: .*rank 1 (\(global rank 1\) )?is gone: its process \(pid [0-9]+ on this host\)"
      code=1 ;;
  esac
  for r in 0 2; do
    grep -q "^rank $r exit $code$" <<<"$out" || { echo "FAIL: rank $r did not exit $code"; status=1; }
    grep -qE "^rank $r: $want" <<<"$out" || { echo "FAIL: rank $r did not name rank 1 ($how, $transport)"; status=1; }
  done
done
exit $status
