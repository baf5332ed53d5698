#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, to try `hydra/launcher=submitit_slurm` without a cluster
# (tests/test_slurm.py uses it).  Needs root: it installs slurm-wlm + munge with apt if missing.
#
#   bash scripts/slurm_local.sh start DIR   # config, state and logs under DIR; prints `export SLURM_CONF=...`
#   export SLURM_CONF=DIR/slurm.conf        # every client (sbatch, sinfo, submitit) needs it
#   python -m specbench.run -m hydra/launcher=submitit_slurm ... tree=chain,binary
#   bash scripts/slurm_local.sh stop DIR    # stops every daemon it started, by PID
#
# No cgroups needed: proctrack/linuxproc, task/none, accounting off (so submitit reads job states as
# UNKNOWN: check the jobs' results, not their states).  Ports: SLURM_LOCAL_PORT (default 16817) and +1.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [[ -z "$cmd" || -z "$dir" ]]; then
  echo "usage: bash scripts/slurm_local.sh start|stop DIR" >&2
  exit 2
fi
dir=$(realpath -m "$dir")
port=${SLURM_LOCAL_PORT:-16817}

stop() {
  local pidfile
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [[ -f "$pidfile" ]] || continue
    local pid
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$pidfile"
  done
}

install() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && return
  if [[ $(id -u) -ne 0 ]]; then
    echo "slurm_local: slurm-wlm and munge are not installed and this is not root" >&2
    exit 3
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >"$dir/apt.log" 2>&1 || {
    echo "slurm_local: apt-get install slurm-wlm munge failed (see $dir/apt.log)" >&2; exit 3; }
}

start_munge() {
  # munged daemonizes; its own pid file (not ours) tells us its PID
  mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  if [[ -S /run/munge/munge.socket.2 ]] && munge -n >/dev/null 2>&1; then
    return                                     # someone's munged already answers; not ours to stop
  fi
  runuser -u munge -- munged --force --pid-file=/run/munge/specbench-munged.pid
  for _ in $(seq 50); do [[ -s /run/munge/specbench-munged.pid ]] && break; sleep 0.1; done
  cp /run/munge/specbench-munged.pid "$dir/munged.pid"
}

write_conf() {
  local host mem
  host=$(hostname -s)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
  cat >"$dir/slurm.conf" <<EOF
ClusterName=specbench
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
SlurmctldPidFile=$dir/slurmctld-own.pid
SlurmdPidFile=$dir/slurmd-own.pid
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
NodeName=$host CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

case "$cmd" in
  start)
    mkdir -p "$dir/state" "$dir/spool" "$dir/log"
    stop                                          # a previous start in the same DIR
    install
    start_munge
    write_conf
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -D -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
    echo $! >"$dir/slurmctld.pid"
    slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
    echo $! >"$dir/slurmd.pid"
    for _ in $(seq 150); do
      if sinfo -h -o %t 2>/dev/null | grep -qx idle; then
        echo "export SLURM_CONF=$SLURM_CONF"
        exit 0
      fi
      sleep 0.2
    done
    echo "slurm_local: the node did not come up in 30 s (logs in $dir/log)" >&2
    stop
    exit 4
    ;;
  stop)
    stop
    ;;
  *)
    echo "usage: bash scripts/slurm_local.sh start|stop DIR" >&2
    exit 2
    ;;
esac
