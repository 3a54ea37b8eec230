#!/usr/bin/env bash
# A Slurm cluster on this machine, for tests: munged, slurmctld and slurmd, with all state in one
# directory. It stops exactly the daemons it started, by their pids.
#
# One node (the default): slurmd on loopback under this machine's host name. N nodes: each
# slurmd in its own network and UTS namespace, with its own host name (d500n1, d500n2, ...) and
# address (10.250.P.11, .12, ..., P = the controller's port mod 250), joined to the controller
# (10.250.P.1, on a bridge in this namespace) by a veth pair. Nothing but loopback and the
# cluster's own namespaces is used.
#
#   launchers/test-cluster.sh start DIR [NODES]   # prints the SLURM_CONF to export; waits until every node is idle
#   launchers/test-cluster.sh stop DIR
#   launchers/test-cluster.sh fail-node DIR NAME  # kills a node's processes and marks it DOWN: its jobs end NODE_FAIL
#   launchers/test-cluster.sh stop-controller DIR    # stops slurmctld only (fault tests)
#   launchers/test-cluster.sh start-controller DIR
#   launchers/test-cluster.sh hang-controller DIR    # SIGSTOP: slurmctld accepts connections, answers nothing
#   launchers/test-cluster.sh resume-controller DIR  # SIGCONT: it handles what queued meanwhile
#   launchers/test-cluster.sh min-job-age DIR SECONDS # how long Slurm keeps a finished job's record
#
# Needs root (slurmd runs jobs as their users) and the Debian packages slurmctld, slurmd,
# slurm-client and munge (launchers/install-deps.sh --slurm installs them).
set -euo pipefail
cmd=${1:?usage: test-cluster.sh start|stop|fail-node|stop-controller|start-controller|hang-controller|resume-controller|min-job-age DIR ...}
dir=${2:?usage: test-cluster.sh $cmd DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf="$dir/slurm.conf"
host=$(hostname -s)
# Ports away from the standard 6817/6818, so a real Slurm on the machine is left alone.
# (A cluster remembers its ports, so stop and fail-node find what start made.)
ctld_port=${D500_TEST_SLURMCTLD_PORT:-$(cat "$dir/port" 2>/dev/null || echo 16817)}
slurmd_port=${D500_TEST_SLURMD_PORT:-16818}

log() { echo "test-cluster: $*" >&2; }

# The namespaces, bridge and veths of a multi-node cluster, named after its controller's port.
bridge="d5br$ctld_port"
net="10.250.$((ctld_port % 250))"  # the cluster's subnet: two clusters on other ports do not meet
netns() { echo "d5n$ctld_port-$1"; }
nodes_of() { cat "$dir/nodes" 2>/dev/null || echo 1; }

make_network() {
  local n=$1 i
  ip link show "$bridge" >/dev/null 2>&1 || {
    ip link add "$bridge" type bridge
    ip addr add "$net.1/24" dev "$bridge"
  }
  ip link set "$bridge" up
  for i in $(seq "$n"); do
    ip netns list | grep -qw "$(netns "$i")" && continue
    ip netns add "$(netns "$i")"
    ip link add "d5v$ctld_port-$i" type veth peer name eth0 netns "$(netns "$i")"
    ip link set "d5v$ctld_port-$i" master "$bridge" up
    ip -n "$(netns "$i")" addr add "$net.$((10 + i))/24" dev eth0
    ip -n "$(netns "$i")" link set eth0 up
    ip -n "$(netns "$i")" link set lo up
  done
}

remove_network() {
  local i
  for i in $(seq "$(nodes_of)"); do
    ip netns pids "$(netns "$i")" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$(netns "$i")" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
}

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
  nodes=${3:-1}
  echo "$nodes" > "$dir/nodes"
  echo "$ctld_port" > "$dir/port"
  if [ "$nodes" -gt 1 ]; then
    make_network "$nodes"
    # The nodes share this machine's /tmp; PMIx's per-step directories must not collide, so each
    # node has its own TmpFS.
    ctld_addr=$net.1 spool="$dir/spool/%n" slurmd_pid="$dir/slurmd.%n.daemon.pid" slurmd_log="$dir/slurmd.%n.log"
    tmp_fs="TmpFS=$dir/tmp/%n"
    node_lines=$(for i in $(seq "$nodes"); do echo "NodeName=d500n$i NodeAddr=$net.$((10 + i)) CPUs=2 State=UNKNOWN"; done)
    node_names="d500n[1-$nodes]"
  else
    ctld_addr=127.0.0.1 spool="$dir/spool" slurmd_pid="$dir/slurmd.daemon.pid" slurmd_log="$dir/slurmd.log" tmp_fs=""
    node_lines="NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN"
    node_names=$host
  fi
  cat > "$conf" <<EOF
# Written by launchers/test-cluster.sh: a test cluster of $nodes node(s).
ClusterName=d500test
SlurmctldHost=$host($ctld_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$dir/slurmctld.daemon.pid
SlurmdPidFile=$slurmd_pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$slurmd_log
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
$tmp_fs
$node_lines
PartitionName=debug Nodes=$node_names Default=YES MaxTime=INFINITE State=UP
EOF
  start_controller
  if [ "$nodes" -gt 1 ]; then
    for i in $(seq "$nodes"); do
      alive "$dir/slurmd.$i.pid" && continue
      mkdir -p "$dir/spool/d500n$i" "$dir/tmp/d500n$i"
      # nsenter and unshare exec in place: the pid is slurmd's. (nsenter, not `ip netns exec`,
      # which would remount /sys without the cgroup mounts slurmd needs.)
      setsid nsenter --net="/run/netns/$(netns "$i")" unshare --uts sh -c "hostname d500n$i && exec slurmd -D -N d500n$i -f '$conf'" \
        >>"$dir/slurmd.$i.out" 2>&1 < /dev/null &
      echo $! > "$dir/slurmd.$i.pid"
    done
  elif ! alive "$dir/slurmd.pid"; then
    setsid slurmd -D -f "$conf" >>"$dir/slurmd.out" 2>&1 < /dev/null &
    echo $! > "$dir/slurmd.pid"
  fi
  for _ in $(seq 300); do
    idle=$(SLURM_CONF=$conf sinfo -h -N -o %T 2>/dev/null | grep -cx idle || true)
    if [ "$idle" = "$nodes" ]; then
      log "$nodes node(s) idle ($node_names; slurmctld $(cat "$dir/slurmctld.pid"))"
      echo "export SLURM_CONF=$conf"
      exit 0
    fi
    sleep 0.2
  done
  log "not every node became idle ($idle of $nodes); see $dir/slurmctld.log and $dir/slurmd*.log"
  exit 1
  ;;
stop)
  for f in "$dir"/slurmd.pid "$dir"/slurmd.[0-9]*.pid; do [ -e "$f" ] && stop_pidfile "$f"; done
  stop_pidfile "$dir/slurmctld.pid"
  stop_pidfile "$dir/munged.pid"
  if [ "$(nodes_of)" -gt 1 ]; then remove_network; fi
  log "stopped"
  ;;
fail-node)
  name=${3:?usage: test-cluster.sh fail-node DIR NAME}
  i=${name#d500n}
  ip netns pids "$(netns "$i")" | xargs -r kill -9
  rm -f "$dir/slurmd.$i.pid"
  SLURM_CONF=$conf scontrol update nodename="$name" state=down reason="d500 test: node killed"
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
*) log "unknown command '$cmd' (start, stop, fail-node, stop-controller, start-controller, hang-controller, resume-controller, min-job-age)"; exit 2 ;;
esac
