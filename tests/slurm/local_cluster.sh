#!/usr/bin/env bash
# A single-node SLURM cluster on localhost, for the integration test (tests/test_slurm.py).
#
#   tests/slurm/local_cluster.sh install     Debian's slurmctld, slurmd, slurm-client and munge (root)
#   tests/slurm/local_cluster.sh start DIR   munged, slurmctld and slurmd; state and logs in DIR
#   tests/slurm/local_cluster.sh stop DIR    stops what `start` started, by the pids it recorded
#
# The configuration goes to /etc/slurm (slurm.conf, gres.conf), where every SLURM client finds it:
# the executor's job steps drop SLURM_* variables, SLURM_CONF included. `start` refuses to replace a
# configuration it did not write, and `stop` removes its own.
# The node advertises 4 fake GPUs (gres files /dev/null, /dev/zero, /dev/full, /dev/urandom) so that
# GPU jobs schedule on a machine without one, and 4 CPUs whatever it has (config_overrides), so
# that 4 jobs run at once. No accounting database: query job status with squeue. KillWait (SIGTERM to
# SIGKILL at a time limit) is 60 s, not 30: a phase slowed to 30 s per update finishes its update and
# saves a state after SLURM's SIGTERM (tests/test_slurm.py).
set -euo pipefail

conf=/etc/slurm/slurm.conf
marker="# written by normgrow tests/slurm/local_cluster.sh"

command=${1:?usage: local_cluster.sh install | start DIR | stop DIR}

case "$command" in
install)
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurmctld slurmd slurm-client munge >/dev/null
  fi
  ;;
start)
  dir=$(realpath -m "${2:?start DIR}")
  mkdir -p "$dir"/{spool,state,log,run}
  host=$(hostname -s)
  memory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)

  if ! munge -n >/dev/null 2>&1; then
    [ -f /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    install -d -o munge -g munge /run/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/normgrow-test.pid
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
    cp /run/munge/normgrow-test.pid "$dir/run/munged.pid"  # DIR may be closed to the munge user
  fi

  if [ -f "$conf" ] && ! grep -qF "$marker" "$conf"; then
    echo "$conf exists and was not written by this script: not starting a test cluster over it" >&2
    exit 1
  fi
  mkdir -p /etc/slurm
  cat >"$conf" <<CONF
$marker
ClusterName=normgrow-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
DefMemPerCPU=1000
MinJobAge=600
KillWait=60
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 RealMemory=$memory Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  cat >/etc/slurm/gres.conf <<CONF
$marker
AutoDetect=off
NodeName=$host Name=gpu File=/dev/null
NodeName=$host Name=gpu File=/dev/zero
NodeName=$host Name=gpu File=/dev/full
NodeName=$host Name=gpu File=/dev/urandom
CONF
  slurmctld -i
  for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
  slurmd
  for _ in $(seq 100); do
    state=$(sinfo -h -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.2
  done
  if [ "$state" != idle ]; then
    echo "the test node did not come up idle (state: ${state:-none}); see $dir/log" >&2
    exit 1
  fi
  ;;
stop)
  dir=$(realpath -m "${2:?stop DIR}")
  for pidfile in "$dir/run/slurmd.pid" "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
    if [ -f "$pidfile" ]; then
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
  for file in "$conf" /etc/slurm/gres.conf; do
    if [ -f "$file" ] && grep -qF "$marker" "$file"; then rm -f "$file"; fi
  done
  ;;
*)
  echo "usage: local_cluster.sh install | start DIR | stop DIR" >&2
  exit 2
  ;;
esac
