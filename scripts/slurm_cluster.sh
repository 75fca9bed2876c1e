#!/usr/bin/env bash
# slurm_cluster.sh - a throwaway single-node Slurm cluster for tests/slurm_spec.lua (and for
# trying `idxlab submit` by hand). Nothing starts system-wide and nothing outlives it:
#   install      installs slurmctld, slurmd, slurm-client and munge from Debian when missing
#                (service starts suppressed by a policy-rc.d); quiet when present; idempotent.
#                The test set-up only: `make run` never needs Slurm.
#   start DIR    writes DIR/slurm.conf (one node: this machine's cores and memory, loopback,
#                free ports, no accounting, proctrack/linuxproc, task/none, select/cons_tres),
#                a munge key of its own and its own munged socket, then starts munged,
#                slurmctld and slurmd, each under `timeout 900` with LD_PRELOAD and ASAN_*
#                stripped, and waits (bounded) until the node is idle. Prints
#                `export SLURM_CONF=DIR/slurm.conf`. DIR must exist and be empty (mktemp -d).
#   stop DIR     cancels the cluster's jobs and stops its daemons by the pids it recorded
#                (never by name); safe to run twice.
# Exit status: 0; 1 with one line on stderr saying why (not root, a package missing, a
# daemon that did not come up: its log's tail follows).
set -uo pipefail

TIMEOUT=${SLURM_CLUSTER_TIMEOUT:-900} # every daemon's lifetime bound (seconds)
PKGS=(slurmctld slurmd slurm-client munge)

die() { echo "slurm_cluster: $*" >&2; exit 1; }

# The daemons' and jobs' environment: no sanitizer runtime preloaded into Slurm's binaries.
# CLEAN holds env's arguments that remove it.
CLEAN=(-u LD_PRELOAD)
for v in $(compgen -e); do
  case $v in ASAN_* | UBSAN_* | LSAN_*) CLEAN+=(-u "$v") ;; esac
done
clean_env() { env "${CLEAN[@]}" "$@"; }

cmd_install() {
  local missing=() p
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
      || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "installing ${missing[*]} needs root"
  echo "slurm_cluster: installing ${missing[*]} (service starts suppressed)"
  # a policy-rc.d that refuses every service start, unless one is there already (kept as is)
  local policy=/usr/sbin/policy-rc.d made=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# slurm_cluster.sh install: no service starts\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local rc=0
  local log
  log=$(mktemp)
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    >"$log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || tail -n 20 "$log" >&2
  rm -f "$log"
  [ "$made" = 1 ] && rm -f "$policy"
  [ "$rc" -eq 0 ] || die "apt-get install ${missing[*]} failed (exit $rc)"
  echo "slurm_cluster: installed"
}

# Free TCP ports on the loopback, as many as asked (the kernel picks them).
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# Starts "$@" in the background under timeout, environment cleaned; records the pid of the
# timeout process (which forwards SIGTERM to the daemon) in $dir/$name.tpid. A simple command,
# so $! is env's pid, which execs timeout.
spawn() {
  local name=$1; shift
  env "${CLEAN[@]}" timeout "$TIMEOUT" "$@" >>"$dir/$name.out" 2>&1 </dev/null &
  echo $! >"$dir/$name.tpid"
}

# Waits up to $2 seconds for the command "${@:3}" to succeed; $1 names what is awaited.
await() {
  local what=$1 secs=$2; shift 2
  local t
  for ((t = 0; t < secs * 10; t++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

show_log() { [ -f "$1" ] && { echo "--- $1"; tail -n 20 "$1"; } >&2; }

cmd_start() {
  dir=${1:?start needs a directory}
  [ -d "$dir" ] || die "$dir is not a directory"
  dir=$(cd "$dir" && pwd)
  [ "$(id -u)" -eq 0 ] || die "not root: this cluster runs its daemons as root"
  local b
  for b in munged slurmctld slurmd sbatch sinfo; do
    command -v "$b" >/dev/null || die "$b is not installed (scripts/slurm_cluster.sh install)"
  done
  command -v python3 >/dev/null || die "python3 is needed to find free ports"
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"
  # munge: a key of its own, its own socket, pid, log and seed files
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  local sock=$dir/munge/munge.socket
  spawn munged munged -F --force --key-file="$dir/munge/munge.key" --socket="$sock" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed"
  if ! await munged 10 test -S "$sock"; then
    show_log "$dir/munged.out"; show_log "$dir/munge/munged.log"
    cmd_stop "$dir"; die "munged did not start"
  fi
  local node cpus mem ports
  node=$(hostname -s)
  cpus=$(nproc --all)
  mem=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  read -r p_ctld p_d < <(free_ports 2)
  cat >"$dir/slurm.conf" <<EOF
# written by scripts/slurm_cluster.sh start: a single-node test cluster, loopback only
ClusterName=idxlabtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$p_ctld
SlurmdPort=$p_d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=15 State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  spawn slurmctld slurmctld -D -i -f "$dir/slurm.conf"
  if ! await slurmctld 20 clean_env scontrol ping; then
    show_log "$dir/slurmctld.out"; show_log "$dir/slurmctld.log"
    cmd_stop "$dir"; die "slurmctld did not answer"
  fi
  spawn slurmd slurmd -D -N "$node" -f "$dir/slurm.conf"
  if ! await "node idle" 30 node_idle; then
    show_log "$dir/slurmd.out"; show_log "$dir/slurmd.log"; show_log "$dir/slurmctld.log"
    cmd_stop "$dir"; die "the node did not come up idle"
  fi
  echo "export SLURM_CONF=$dir/slurm.conf"
}

node_idle() { clean_env sinfo -h -o %t | grep -qx 'idle'; }

# A pid from a file, when that process still runs.
live_pid() {
  local f=$1 pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

cmd_stop() {
  local d=${1:?stop needs a directory}
  [ -d "$d" ] || return 0
  d=$(cd "$d" && pwd)
  if [ -f "$d/slurm.conf" ] && live_pid "$d/slurmctld.tpid" >/dev/null; then
    # the cluster's own jobs only: this slurmctld knows no others
    SLURM_CONF=$d/slurm.conf clean_env timeout 10 scancel --full --quiet \
      $(SLURM_CONF=$d/slurm.conf clean_env timeout 10 squeue -h -o %A 2>/dev/null) \
      2>/dev/null
  fi
  local group pid t pids
  # the Slurm daemons together (each shutdown waits a while), then munged, which they use
  for group in "slurmd slurmctld" munged; do
    pids=()
    for name in $group; do
      pid=$(live_pid "$d/$name.tpid") || continue
      kill -TERM "$pid" 2>/dev/null # timeout forwards it to the daemon
      pids+=("$pid")
    done
    for pid in "${pids[@]}"; do
      for ((t = 0; t < 50; t++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null
    done
  done
  # a daemon that outlived its timeout process: by the pid it wrote, if it is ours (its
  # command line names this directory)
  local f
  for f in "$d/slurmd.pid" "$d/slurmctld.pid" "$d/munge/munged.pid"; do
    pid=$(live_pid "$f") || continue
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$d"; then
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  rm -f "$d"/*.tpid
  return 0
}

case ${1:-} in
  install) cmd_install ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  *) echo "usage: scripts/slurm_cluster.sh install | start DIR | stop DIR" >&2; exit 2 ;;
esac
