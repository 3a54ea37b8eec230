#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for tests: munged, slurmctld and slurmd, loopback
# only, with all state in one directory. It stops exactly the daemons it started, by their pids.
#
#   launchers/test-cluster.sh start DIR   # prints the SLURM_CONF to export; waits until the node is idle
#   launchers/test-cluster.sh stop DIR
#   launchers/test-cluster.sh stop-controller DIR    # stops slurmctld only (fault tests)
#   launchers/test-cluster.sh start-controller DIR
#   launchers/test-cluster.sh hang-controller DIR    # SIGSTOP: slurmctld accepts connections, answers nothing
#   launchers/test-cluster.sh resume-controller DIR  # SIGCONT: it handles what queued meanwhile
#   launchers/test-cluster.sh min-job-age DIR SECONDS # how long Slurm keeps a finished job's record
#
# Needs root (slurmd runs jobs as their users) and the Debian packages slurmctld, slurmd,
# slurm-client and munge (launchers/install-deps.sh --slurm installs them).
set -euo pipefail
cmd=${1:?usage: test-cluster.sh start|stop|stop-controller|start-controller DIR}
dir=${2:?usage: test-cluster.sh $cmd DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf="$dir/slurm.conf"
host=$(hostname -s)
# Ports away from the standard 6817/6818, so a real Slurm on the machine is left alone.
ctld_port=${D500_TEST_SLURMCTLD_PORT:-16817}
slurmd_port=${D500_TEST_SLURMD_PORT:-16818}

log() { echo "test-cluster: $*" >&2; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pidfile() {
  local f=$1
  alive "$f" || { rm -f "$f"; return 0; }
  local pid; pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$f"
}

start_controller() {
  alive "$dir/slurmctld.pid" && return 0
  setsid slurmctld -D -f "$conf" >>"$dir/slurmctld.out" 2>&1 < /dev/null &
  echo $! > "$dir/slurmctld.pid"
  for _ in $(seq 100); do
    SLURM_CONF=$conf scontrol ping 2>/dev/null | grep -q "is UP" && return 0
    sleep 0.2
  done
  log "slurmctld did not come up; see $dir/slurmctld.log"; return 1
}

case "$cmd" in
start)
  [ "$(id -u)" -eq 0 ] || { log "must run as root"; exit 1; }
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"
  if ! alive "$dir/munged.pid"; then
    [ -f "$dir/munge/munge.key" ] || { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none; chmod 400 "$dir/munge/munge.key"; }
    munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
      --pid-file="$dir/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
  fi
  cat > "$conf" <<EOF
# Written by launchers/test-cluster.sh: a single-node test cluster.
ClusterName=d500test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.daemon.pid
SlurmdPidFile=$dir/slurmd.daemon.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
MinJobAge=3600
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MessageTimeout=10
SlurmdTimeout=60
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  start_controller
  if ! alive "$dir/slurmd.pid"; then
    setsid slurmd -D -f "$conf" >>"$dir/slurmd.out" 2>&1 < /dev/null &
    echo $! > "$dir/slurmd.pid"
  fi
  for _ in $(seq 150); do
    state=$(SLURM_CONF=$conf sinfo -h -n "$host" -o %T 2>/dev/null || true)
    if [ "$state" = "idle" ]; then
      log "node $host idle (slurmctld $(cat "$dir/slurmctld.pid"), slurmd $(cat "$dir/slurmd.pid"))"
      echo "export SLURM_CONF=$conf"
      exit 0
    fi
    sleep 0.2
  done
  log "node $host did not become idle (state: ${state:-none}); see $dir/slurmctld.log and $dir/slurmd.log"
  exit 1
  ;;
stop)
  stop_pidfile "$dir/slurmd.pid"
  stop_pidfile "$dir/slurmctld.pid"
  stop_pidfile "$dir/munged.pid"
  log "stopped"
  ;;
stop-controller) stop_pidfile "$dir/slurmctld.pid" ;;
start-controller) start_controller ;;
hang-controller) alive "$dir/slurmctld.pid" && kill -STOP "$(cat "$dir/slurmctld.pid")" ;;
resume-controller) alive "$dir/slurmctld.pid" && kill -CONT "$(cat "$dir/slurmctld.pid")" ;;
min-job-age)
  age=${3:?usage: test-cluster.sh min-job-age DIR SECONDS}
  sed -i "s/^MinJobAge=.*/MinJobAge=$age/" "$conf"
  SLURM_CONF=$conf scontrol reconfigure
  ;;
*) log "unknown command '$cmd' (start, stop, stop-controller, start-controller, hang-controller, resume-controller, min-job-age)"; exit 2 ;;
esac
