#!/usr/bin/env bash
# A Slurm cluster on this machine, for tests: munged, slurmctld and slurmd, with all state in one
# directory. It stops exactly the daemons it started, by their pids.
#
# One node (the default): slurmd on loopback under this machine's host name. N nodes: each
# slurmd in its own network and UTS namespace, with its own host name (d500n1, d500n2, ...) and
# address (10.250.P.11, .12, ..., P = the controller's port mod 250), joined to the controller
# (10.250.P.1, on a bridge in this namespace) by a veth pair. Nothing but loopback and the
# cluster's own namespaces is used. D500_TEST_GPUS_PER_NODE=G (default 0) advertises G count-only
# GPUs per node (GresTypes=gpu, Gres=gpu:G, stand-in files for devices): jobs asking for GPUs are planned,
# submitted and allocated as on a GPU cluster, and the worker finds no device.
# D500_TEST_CPUS_PER_NODE=C (default 2) gives each node of a multi-node cluster C CPUs (they share
# this machine's cores). Both are remembered in DIR for a later start.
# slurmd, and so its jobs, run at the caller's priority: at nice 10 (tried for a day) the jobs
# starve beside the suite's CPU-bound tests where the kernel's autogroup is off (docs/testing.md).
set -euo pipefail
usage() {
  cat <<'USAGE'
usage: launchers/test-cluster.sh COMMAND DIR [ARG]
  start DIR [NODES]          start a cluster of NODES nodes (default 1) with its state in DIR;
                             prints the SLURM_CONF to export and waits until every node is idle
  stop DIR                   stop the daemons that start started (and a multi-node cluster's namespaces)
  hang-node DIR NAME         SIGSTOP node NAME's processes (slurmd, its jobs' tasks): it hangs
  fail-node DIR NAME         kill node NAME's processes and mark it DOWN: its jobs end NODE_FAIL
  stop-controller DIR        stop slurmctld only (fault tests)
  start-controller DIR       start it again
  hang-controller DIR        SIGSTOP slurmctld: it accepts connections and answers nothing
  resume-controller DIR      SIGCONT: it handles what queued meanwhile
  min-job-age DIR SECONDS    how long Slurm keeps a finished job's record
Environment: D500_TEST_SLURMCTLD_PORT (16817), D500_TEST_SLURMD_PORT (16818),
D500_TEST_GPUS_PER_NODE (0: GPU GRES per node, no devices), D500_TEST_CPUS_PER_NODE (2, multi-node).
Needs root (slurmd runs jobs as their users) and the Debian packages slurmctld, slurmd,
slurm-client and munge (`launchers/install-deps.sh --tests` installs them).
USAGE
}
case "${1:-}" in
  -h|--help|help) usage; exit 0 ;;
  start|stop|hang-node|fail-node|stop-controller|start-controller|hang-controller|resume-controller|min-job-age) ;;
  "") usage >&2; exit 2 ;;
  *) echo "test-cluster: unknown command '$1'" >&2; usage >&2; exit 2 ;;
esac
[ -n "${2:-}" ] || { echo "test-cluster: $1 needs the cluster's directory" >&2; usage >&2; exit 2; }
cmd=$1
dir=$2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf="$dir/slurm.conf"
host=$(hostname -s)
# Ports away from the standard 6817/6818, so a real Slurm on the machine is left alone.
# (A cluster remembers its ports, so stop, fail-node and a later start find what start made.)
ctld_port=${D500_TEST_SLURMCTLD_PORT:-$(cat "$dir/port" 2>/dev/null || echo 16817)}
slurmd_port=${D500_TEST_SLURMD_PORT:-$(cat "$dir/slurmd_port" 2>/dev/null || echo 16818)}

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
    # A namespace an earlier cluster's process outlived its stop by keeps its veth's host end.
    ip link del "d5v$ctld_port-$i" 2>/dev/null || true
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
    ip link del "d5v$ctld_port-$i" 2>/dev/null || true
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
  case "$nodes" in ''|*[!0-9]*|0) log "start: NODES must be a number of nodes >= 1, not '$nodes'"; exit 2 ;; esac
  # A cluster remembers its shape, so that starting it again (after fail-node) keeps it.
  gpus=${D500_TEST_GPUS_PER_NODE:-$(cat "$dir/gpus" 2>/dev/null || echo 0)}
  cpus=${D500_TEST_CPUS_PER_NODE:-$(cat "$dir/cpus" 2>/dev/null || echo 2)}
  case "$gpus" in ''|*[!0-9]*) log "D500_TEST_GPUS_PER_NODE must be a number of GPUs >= 0, not '$gpus'"; exit 2 ;; esac
  gres_node="" gres_types=""
  if [ "$gpus" -gt 0 ]; then
    # Slurm ignores a GPU without File=, which must be a device: each is a stand-in of this
    # cluster's (a character device like /dev/null, 1:3; no GPU driver behind it), so jobs are
    # allocated GPUs (and CUDA_VISIBLE_DEVICES) and find no device.
    gres_node=" Gres=gpu:$gpus" gres_types="GresTypes=gpu"
    mkdir -p "$dir/gpu"
    for g in $(seq 0 $((gpus - 1))); do [ -c "$dir/gpu/nvidia$g" ] || { rm -f "$dir/gpu/nvidia$g"; mknod "$dir/gpu/nvidia$g" c 1 3; }; done
    echo "Name=gpu File=$dir/gpu/nvidia[0-$((gpus - 1))]" > "$dir/gres.conf"
  else
    rm -f "$dir/gres.conf"
  fi
  case "$cpus" in ''|*[!0-9]*|0) log "D500_TEST_CPUS_PER_NODE must be a number of CPUs >= 1, not '$cpus'"; exit 2 ;; esac
  echo "$gpus" > "$dir/gpus"
  echo "$cpus" > "$dir/cpus"
  echo "$nodes" > "$dir/nodes"
  echo "$ctld_port" > "$dir/port"
  echo "$slurmd_port" > "$dir/slurmd_port"
  if [ "$nodes" -gt 1 ]; then
    make_network "$nodes"
    # The nodes share this machine's /tmp; PMIx's per-step directories must not collide, so each
    # node has its own TmpFS.
    ctld_addr=$net.1 spool="$dir/spool/%n" slurmd_pid="$dir/slurmd.%n.daemon.pid" slurmd_log="$dir/slurmd.%n.log"
    tmp_fs="TmpFS=$dir/tmp/%n"
    node_lines=$(for i in $(seq "$nodes"); do echo "NodeName=d500n$i NodeAddr=$net.$((10 + i)) CPUs=$cpus$gres_node State=UNKNOWN"; done)
    # The nodes share this machine's cores: each slurmd takes the configured CPUs as its own.
    overrides="SlurmdParameters=config_overrides"
    node_names="d500n[1-$nodes]"
  else
    ctld_addr=127.0.0.1 spool="$dir/spool" slurmd_pid="$dir/slurmd.daemon.pid" slurmd_log="$dir/slurmd.log" tmp_fs="" overrides=""
    node_lines="NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc)$gres_node State=UNKNOWN"
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
MaxJobCount=50000
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MessageTimeout=10
SlurmdTimeout=60
$tmp_fs
$overrides
$gres_types
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
hang-node)
  name=${3:?usage: test-cluster.sh hang-node DIR NAME}
  ip netns pids "$(netns "${name#d500n}")" | xargs -r kill -STOP
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
*) log "unknown command '$cmd' (start, stop, hang-node, fail-node, stop-controller, start-controller, hang-controller, resume-controller, min-job-age)"; exit 2 ;;
esac
