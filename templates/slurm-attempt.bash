# d500's record of one attempt of a Slurm job, sourced by its Slurm templates (and by yours:
# `source {{slurm_attempt}}` after `cd {{run_dir}}`). Not a template: nothing is substituted.
#
# Slurm reruns a requeued job under the same job id, and forgets a job's end once it purges the
# record (MinJobAge). So each attempt is named by SLURM_RESTART_COUNT and writes what became of
# it into slurm/attempts/<job>_<task>.<attempt>.tsv, synced to disk line by line:
#   start   <utc>  host=<host> job=<SLURM_JOB_ID> log=<this attempt's output file>
#   signal  <utc>  TERM elapsed_s=<s> limit_s=<s> before_s=<s> verdict=timed-out|terminated
#   end     <utc>  exit=<code> elapsed_s=<s>
# A SIGTERM within 10 s of the time limit (Slurm's warning before it kills at the limit) reads
# timed-out; any other (scancel, preemption) terminated. A job submitted with --signal=TERM@S
# (`d500 submit` sets D500_SIGNAL_BEFORE_S=S; [slurm] signal_before_limit) has its steps signalled
# S s before the limit (Slurm may send it up to 60 s earlier still) and not this shell: the worker
# checkpoints and ends by SIGTERM. A step that ended so (or, without --signal, died of the
# limit's SIGTERM before this shell's arrived) while this shell got no signal is recorded as
# `signal ... by=step verdict=timed-out`. No `end` line: the attempt was killed
# outright (SIGKILL, a failed node). `d500 status`, `submit --resume` and `report` read these.
#
# Defines: d500_attempt (0 for the first), d500_results NAME (this attempt's results file for
# a spec), d500_step CMD... (runs the job step so that a SIGTERM is recorded at once),
# d500_module_init [SCRIPT] (defines `module` in this shell, which a batch job started by
# `#!/usr/bin/env bash` lacks on many sites: SCRIPT, else the usual init scripts).
d500_attempt=${SLURM_RESTART_COUNT:-0}
d500_task="${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-0}}_${SLURM_ARRAY_TASK_ID:-0}"
d500_record="slurm/attempts/${d500_task}.${d500_attempt}.tsv"
d500_limit_s=${D500_TIME_LIMIT_S:-}
d500_before_s=${D500_SIGNAL_BEFORE_S:-0}
mkdir -p slurm/attempts
d500_now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
d500_note() {
  printf '%s\t%s\t%s\n' "$1" "$(d500_now)" "$2" >> "$d500_record"
  sync "$d500_record" 2>/dev/null || true
}
d500_results() { echo "results/$(basename "$1" .toml).slurm-${SLURM_JOB_ID:-0}.${d500_attempt}.h5"; }
d500_on_term() {
  local verdict=terminated
  if [ -n "$d500_limit_s" ] && [ "$SECONDS" -ge $(( d500_limit_s - d500_before_s - 10 )) ]; then verdict=timed-out; fi
  d500_note signal "TERM elapsed_s=$SECONDS limit_s=${d500_limit_s:-unknown} before_s=$d500_before_s verdict=$verdict"
  d500_terminated=1
}
d500_step() {
  "$@" &
  local pid=$! rc=0
  wait "$pid" || rc=$?
  # A trapped SIGTERM ends `wait` at once; the step got the signal too: wait for its last words.
  while [ -n "${d500_terminated:-}" ] && kill -0 "$pid" 2>/dev/null; do wait "$pid" || rc=$?; done
  # Slurm signals the step and this shell separately: at the limit the step may die of its
  # SIGTERM before this shell's arrives (or, with --signal, this shell gets none).
  local slack=10
  [ "$d500_before_s" -gt 0 ] && slack=70
  if [ -z "${d500_terminated:-}" ] && [ "$rc" -eq 143 ] && [ -n "$d500_limit_s" ] &&
     [ "$SECONDS" -ge $(( d500_limit_s - d500_before_s - slack )) ]; then
    d500_note signal "TERM elapsed_s=$SECONDS limit_s=$d500_limit_s before_s=$d500_before_s by=step verdict=timed-out"
    local when="at the time limit"
    [ "$d500_before_s" -gt 0 ] && when="${d500_before_s} s before the time limit (--signal)"
    echo "d500: the job step ended on Slurm's SIGTERM $when; the next attempt resumes" >&2
  fi
  return "$rc"
}
d500_module_init() {
  type module >/dev/null 2>&1 && return 0
  local f tried=()
  for f in "$@" ${MODULESHOME:+"$MODULESHOME/init/bash"} /etc/profile.d/modules.sh /etc/profile.d/lmod.sh \
           /usr/share/lmod/lmod/init/bash /opt/cray/pe/modules/default/init/bash /usr/share/modules/init/bash; do
    [ -n "$f" ] || continue
    tried+=("$f")
    if [ -r "$f" ]; then
      # Init scripts read unset variables and return non-zero on their own: not under set -eu.
      set +eu
      source "$f"
      set -eu
      type module >/dev/null 2>&1 && return 0
    fi
  done
  echo "d500: the campaign loads modules ([slurm] modules), but this job has no \`module\` command and none of ${tried[*]} defines it; set [slurm] module_init to the site's init script for bash" >&2
  return 127
}
echo "d500: attempt $d500_attempt of Slurm job ${SLURM_JOB_ID:-?} (task $d500_task) starts on $(hostname) at $(d500_now)"
d500_note start "host=$(hostname) job=${SLURM_JOB_ID:-} log=$(readlink -f /proc/$$/fd/1 2>/dev/null || echo -)"
trap d500_on_term TERM
trap 'd500_note end "exit=$? elapsed_s=$SECONDS"' EXIT
