#!/usr/bin/env bash
# A single-node Slurm cluster on this machine (Debian's slurm-wlm and munge), for trying
# sbatch/srun --mpi=pmix launches and for the CTest tests that do. No systemd, no cgroups: runs
# as root in a container (or as any user, who then owns the jobs), everything under one folder.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: scripts/slurm/cluster.sh start|stop|status [--cpus N] [--dir DIR] [--timeout S]

  start    write DIR/slurm.conf and start munged, slurmctld and slurmd on localhost (each with
           its pid file in DIR), then wait until sinfo shows the node idle. A cluster already
           running from DIR is stopped first.
  stop     cancel this cluster's jobs and stop exactly the daemons whose pid files are in DIR;
           does nothing when none runs. Logs stay in DIR/log.
  status   print sinfo and squeue of the cluster in DIR (exit 1 when it is not running).

  --cpus N     CPUs the node offers, whatever the machine has (default 8)
  --dir DIR    the cluster's folder: config, munge key and socket, state, logs, pid files
               (default: /tmp/mtnlg-slurm)
  --timeout S  seconds start waits for the node to become idle (default 60)
  -h, --help   this text

Then use the cluster with its configuration:
  export SLURM_CONF=DIR/slurm.conf
  srun --mpi=pmix -n 4 build/tests/mtnlg-comm-check
The daemons choose two free TCP ports on 127.0.0.1 (from 6817 up), so clusters in different
folders can run side by side. Packages: slurm-wlm, slurm-wlm-basic-plugins (mpi_pmix.so),
munge (scripts/setup.sh installs them).
USAGE
}

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

action=${1:-}
case "$action" in
  start | stop | status) shift ;;
  -h | --help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
  *) echo "cluster.sh: unknown action '$action' (start, stop or status; see --help)" >&2; exit 2 ;;
esac
cpus=8
dir=/tmp/mtnlg-slurm
timeout_s=60
while (($#)); do
  case "$1" in
    --cpus | --dir | --timeout)
      [[ $# -ge 2 ]] || { echo "cluster.sh: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --cpus) cpus=$2 ;;
        --dir) dir=$2 ;;
        --timeout) timeout_s=$2 ;;
      esac
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) echo "cluster.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $cpus =~ ^[1-9][0-9]*$ ]] || { echo "cluster.sh: --cpus must be a positive integer" >&2; exit 2; }
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] ||
  { echo "cluster.sh: --timeout must be a positive integer" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Unix socket paths (munge's, slurmstepd's $dir/slurmd/stepd.slurm.pmix.JOB.STEP) end at 108 bytes.
((${#dir} <= 64)) ||
  { echo "cluster.sh: --dir $dir is longer than 64 characters: Unix socket paths under it would be too long; choose a shorter folder" >&2; exit 2; }
conf=$dir/slurm.conf
export SLURM_CONF=$conf

# The pid files, in the order the daemons start; stop goes backwards.
daemons=(munged slurmctld slurmd)
pid_file() { echo "$dir/run/$1.pid"; }

# The pid in $1's pid file when that process is alive and is $1 (not a reused pid), else "".
running_pid() {
  local f pid exe
  f=$(pid_file "$1")
  [[ -s $f ]] || return 0
  pid=$(tr -dc '0-9' <"$f")
  [[ -n $pid ]] || return 0
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  # Debian installs slurmctld/slurmd as alternatives of slurmctld-wlm/slurmd-wlm.
  if [[ $(basename "${exe% (deleted)}") == "$1"* ]]; then echo "$pid"; fi
}

stop_daemon() {
  local name=$1 pid i
  pid=$(running_pid "$name")
  if [[ -z $pid ]]; then
    rm -f "$(pid_file "$name")"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    echo "cluster.sh: stopped $name (pid $pid, SIGKILL after 10 s)"
  else
    echo "cluster.sh: stopped $name (pid $pid)"
  fi
  rm -f "$(pid_file "$name")"
}

stop_cluster() {
  local any=0 d
  for d in "${daemons[@]}"; do [[ -n $(running_pid "$d") ]] && any=1; done
  if ((any == 0)); then
    echo "cluster.sh: no cluster running in $dir"
    return 0
  fi
  # Jobs first, so that no job step (slurmstepd and its tasks) outlives slurmd.
  if [[ -n $(running_pid slurmctld) ]]; then
    timeout 10 scancel --quiet --user "$(id -un)" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do
      [[ -z $(timeout 5 squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.2
    done
  fi
  for ((d = ${#daemons[@]} - 1; d >= 0; d--)); do stop_daemon "${daemons[d]}"; done
}

log_tails() {
  local f
  for f in "$dir"/log/*.log; do
    [[ -f $f ]] || continue
    echo "--- last lines of $f:" >&2
    tail -n 25 "$f" >&2
  done
}

# A TCP port nobody listens on (per /proc/net/tcp{,6}), from $1 up, skipping $2.
free_port() {
  local port=$1 used=" " _sl addr _rem st _rest
  while read -r _sl addr _rem st _rest; do
    if [[ $st == 0A ]]; then used+="$((16#${addr##*:})) "; fi  # 0A: LISTEN; the port is hex
  done < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  while [[ $used == *" $port "* || $port == "${2:-}" ]]; do port=$((port + 1)); done
  echo "$port"
}

write_conf() {
  local node user ctld_port slurmd_port
  node=$(hostname -s)
  user=$(id -un)
  ctld_port=$(free_port 6817)
  slurmd_port=$(free_port $((ctld_port + 1)) "$ctld_port")
  cat >"$conf" <<EOF
# Written by scripts/slurm/cluster.sh: one node ($node) on 127.0.0.1, $cpus CPUs.
ClusterName=mtnlg
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/slurmd
# Job steps' scratch (the PMIx plugin's folders), apart from other clusters' same job ids.
TmpFS=$dir/tmp
SlurmctldPidFile=$(pid_file slurmctld)
SlurmdPidFile=$(pid_file slurmd)
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Containers have no usable cgroups: track a step's processes through /proc, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# srun starts a PMIx server per node (mpi_pmix.so of slurm-wlm-basic-plugins), as mtnlg-train
# needs; srun --mpi=pmix says so per call as well.
MpiDefault=pmix
# Trust the node line below over the hardware (a 2-core machine offers --cpus CPUs).
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
PlugStackConfig=$dir/plugstack.conf
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$dir/plugstack.conf"
}

start_cluster() {
  local bin
  for bin in munged mungekey slurmctld slurmd sinfo srun scancel squeue; do
    command -v "$bin" >/dev/null ||
      die "'$bin' not found: install the Debian packages slurm-wlm, slurm-wlm-basic-plugins and munge (scripts/setup.sh)"
  done
  [[ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so || -n $(find /usr/lib -name mpi_pmix.so -print -quit 2>/dev/null) ]] ||
    die "Slurm's PMIx plugin mpi_pmix.so is missing: install slurm-wlm-basic-plugins"
  stop_cluster >/dev/null
  mkdir -p "$dir"/{run,log,state,slurmd,munge,tmp}
  rm -rf "${dir:?}"/slurmd/* "${dir:?}"/tmp/*
  # Each start's logs alone, so that the tails printed on failure are this start's.
  local f
  for f in "$dir"/log/*.log; do [[ -f $f ]] && mv -f "$f" "$f.prev"; done
  chmod 755 "$dir/munge"  # clients of any user reach the socket
  write_conf
  echo "cluster.sh: wrote $conf ($(hostname -s), $cpus CPUs)"

  local key=$dir/munge/munge.key
  if [[ ! -s $key ]]; then
    mungekey --create --keyfile="$key" >/dev/null || die "mungekey could not create $key"
    echo "cluster.sh: created the munge key $key"
  fi
  chmod 600 "$key"
  # --force: munged refuses, without it, to run as root or beside an insecure /tmp.
  munged --force --socket="$dir/munge/munge.socket" --key-file="$key" \
    --pid-file="$(pid_file munged)" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" ||
    { log_tails; die "munged did not start"; }
  echo "cluster.sh: started munged (pid $(running_pid munged), socket $dir/munge/munge.socket)"

  # -c: a fresh controller state each start (no jobs from an earlier cluster).
  slurmctld -c -f "$conf" || { log_tails; stop_cluster >/dev/null; die "slurmctld did not start"; }
  slurmd -f "$conf" || { log_tails; stop_cluster >/dev/null; die "slurmd did not start"; }
  local i pid
  for ((i = 0; i < 50; i++)); do
    [[ -n $(running_pid slurmctld) && -n $(running_pid slurmd) ]] && break
    sleep 0.1
  done
  for d in slurmctld slurmd; do
    pid=$(running_pid "$d")
    [[ -n $pid ]] || { log_tails; stop_cluster >/dev/null; die "$d exited right after starting"; }
    echo "cluster.sh: started $d (pid $pid, log $dir/log/$d.log)"
  done

  local state="" deadline=$((SECONDS + timeout_s))
  while ((SECONDS < deadline)); do
    state=$(timeout 10 sinfo -h -N -o %t 2>/dev/null | head -n 1 || true)
    [[ $state == idle ]] && break
    for d in slurmctld slurmd; do
      [[ -n $(running_pid "$d") ]] || { log_tails; stop_cluster >/dev/null; die "$d died while starting"; }
    done
    sleep 0.5
  done
  if [[ $state != idle ]]; then
    log_tails
    stop_cluster >/dev/null
    die "the node did not become idle within ${timeout_s} s (last state: '${state:-no answer from slurmctld}'); the logs' tails are above"
  fi
  timeout 10 sinfo
  echo "cluster.sh: ready; use it with: export SLURM_CONF=$conf"
}

status_cluster() {
  if [[ -z $(running_pid slurmctld) ]]; then
    echo "cluster.sh: no cluster running in $dir"
    return 1
  fi
  timeout 10 sinfo
  timeout 10 squeue
}

case "$action" in
  start) start_cluster ;;
  stop) stop_cluster ;;
  status) status_cluster ;;
esac
