#!/usr/bin/env bash
# A rank that waits for a late peer sleeps: under mpirun, rank 0 of mtnlg-comm-check joins an
# all_reduce 2 s late, and each other rank's process may spend at most 5% of that wait on the CPU.
# A wait that spins, yields or naps in short sleeps takes the cores from everything else on the
# node (the shared-memory transport's old loop: about 19% here, and under srun it held a shell
# and Slurm's signal up for seconds); one that sleeps until its peer publishes takes under 1%.
# Usage: idle_wait_test.sh MPIRUN COMM_CHECK TRANSPORT
set -euo pipefail
mpirun=$1
exe=$2
transport=$3
np=3
out=$("$mpirun" --oversubscribe --allow-run-as-root -np "$np" "$exe" --timeout-s 30 \
  --transport "$transport" --late-rank 0 --late-ms 2000 2>&1)
echo "$out"
lines=$(grep -c "^rank [0-9]*: waited" <<<"$out" || true)
((lines == np - 1)) || { echo "FAIL: $lines ranks reported their wait, expected $((np - 1))"; exit 1; }
awk '/^rank [0-9]+: waited/ {
  waited = $4; cpu = $7
  if (waited < 1500) { print "FAIL: " $1 " " $2 " waited only " waited " ms for the late rank"; bad = 1 }
  if (cpu > waited / 20) { print "FAIL: " $1 " " $2 " spent " cpu " ms of CPU in a " waited " ms wait (limit 5%)"; bad = 1 }
} END { exit bad }' <<<"$out"
echo "idle_wait_test ($transport): ok"
