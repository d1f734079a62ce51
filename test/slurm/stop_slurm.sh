#!/usr/bin/env bash
# Stop a cluster started by test/slurm/start_slurm.sh DIR: cancel its jobs, then stop slurmd,
# slurmctld and munged by the pids in their pid files (TERM, then KILL after 10 s). DIR is kept
# (logs for post-mortems); delete it yourself. Safe to run twice or on a half-started cluster.
#
# Usage: test/slurm/stop_slurm.sh DIR
set -uo pipefail

if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -eq 1 ] && exit 0 || exit 1
fi
dir=$1
[ -d "$dir" ] || { echo "stop_slurm.sh: no such directory $dir" >&2; exit 1; }

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
pid_of() { [ -s "$1" ] && tr -cd '0-9' < "$1"; }

if [ -f "$dir/slurm.conf" ] && alive "$(pid_of "$dir/slurmctld.pid")"; then
  export SLURM_CONF=$dir/slurm.conf
  scancel --user="$(id -un)" 2>/dev/null
  for _ in $(seq 20); do   # let slurmd's job steps end before slurmd goes
    [ -z "$(squeue -h -t running,completing -o %i 2>/dev/null)" ] && break
    sleep 0.5
  done
fi

stop() {  # stop PIDFILE...: TERM them all, wait up to 10 s, KILL what is left
  local pids=() pid f left
  for f in "$@"; do
    pid=$(pid_of "$f") && alive "$pid" && { kill -TERM "$pid" 2>/dev/null; pids+=("$pid"); }
  done
  for _ in $(seq 40); do
    left=0
    for pid in ${pids[@]+"${pids[@]}"}; do alive "$pid" && left=1; done
    [ $left = 0 ] && return 0
    sleep 0.25
  done
  for pid in ${pids[@]+"${pids[@]}"}; do
    if alive "$pid"; then
      echo "stop_slurm.sh: pid $pid ignored TERM for 10 s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
  done
}
# slurmd and slurmctld together (each takes seconds to shut down), munged once they are gone.
stop "$dir/slurmd.pid" "$dir/slurmctld.pid"
stop "$dir/munge/munged.pid"
exit 0
