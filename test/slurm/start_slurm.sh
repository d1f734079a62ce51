#!/usr/bin/env bash
# Start a private single-node Slurm cluster on loopback, for the backend tests and to try
# utils/slurm.pl on one machine: its own munged (own key and socket), slurmctld and slurmd, every
# state/spool/pid/log file inside DIR. Nothing outside DIR is written; the system's munge and any
# other Slurm on the machine are left alone.
#
# Usage: test/slurm/start_slurm.sh DIR        (DIR: a new or empty directory; keep its path short,
#                                              munge's socket path must fit in 107 bytes)
#        . DIR/env.sh                         (exports SLURM_CONF=DIR/slurm.conf for sbatch, sinfo, ...)
#        test/slurm/stop_slurm.sh DIR         (cancels the jobs and stops the daemons)
#
# Needs root (slurmd launches jobs as the submitting user) and Debian's slurm-wlm and munge
# (tools/install.sh installs them). The node gets this machine's short host name on 127.0.0.1,
# max(4, its CPU count) CPUs and half its memory, one default partition 'debug'; ports are free ones
# picked at start, so several clusters (e.g. parallel test sessions) can run side by side.
# Settings that matter in containers: proctrack/linuxproc and task/none (no cgroups).
#
# Exit status: 0 when the node is idle and ready (prints the export line); 2 when this machine
# cannot run it (not root, a program missing: the reason is printed, nothing was started); 1 when a
# daemon failed to start (the tail of its log is printed; whatever had started is stopped).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -eq 1 ] && exit 0 || exit 1
fi

cannot() { echo "start_slurm.sh: cannot start Slurm here: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || cannot "needs root (slurmd must run as root to launch jobs); running as $(id -un)"
for prog in munged munge slurmctld slurmd sbatch sinfo scontrol; do
  command -v "$prog" >/dev/null 2>&1 \
    || cannot "'$prog' not found (install Debian's slurm-wlm and munge: tools/install.sh)"
done
py=$(command -v python3 || command -v python) || cannot "python3 not found (used to pick free ports)"

mkdir -p "$1" || exit 1
dir=$(cd "$1" && pwd)
if [ -n "$(ls -A "$dir")" ]; then
  echo "start_slurm.sh: $dir is not empty (use a new directory)" >&2
  exit 1
fi
sock=$dir/munge/munge.socket
[ ${#sock} -lt 100 ] || { echo "start_slurm.sh: path too long for a unix socket: $sock" >&2; exit 1; }

fail() {
  echo "start_slurm.sh: $1" >&2
  [ -n "${2:-}" ] && [ -f "$2" ] && { echo "--- last lines of $2:" >&2; tail -n 20 "$2" >&2; }
  "$here/stop_slurm.sh" "$dir" >/dev/null 2>&1
  exit 1
}

# munged wants execute permission for all on the socket's directory (and its parents), the key
# readable by its owner only.
chmod 711 "$dir"
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
chmod 711 "$dir/munge"
head -c 1024 /dev/urandom > "$dir/munge/munge.key" && chmod 400 "$dir/munge/munge.key"
munged --socket="$sock" --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" \
  || fail "munged failed to start" "$dir/munge/munged.log"
munge -S "$sock" -n | unmunge -S "$sock" >/dev/null 2>&1 || fail "munge credential check failed" "$dir/munge/munged.log"

read -r ctld_port slurmd_port < <("$py" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
host=$(hostname -s)
# At least 4 CPUs (oversubscribing a smaller machine) so that a 4-job array runs at once.
cpus=$(nproc); [ "$cpus" -ge 4 ] || cpus=4
mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024 / 2)}' /proc/meminfo)
conf=$dir/slurm.conf
cat > "$conf" <<EOF
# Written by test/slurm/start_slurm.sh: a private single-node cluster on loopback.
ClusterName=sk$(basename "$dir" | tr -cd 'a-z0-9' | tail -c 20)
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
SlurmdParameters=config_overrides
# sbatch --wait polls every 2 s only while 2 < MinJobAge/2 does not hold (else 8 s, 32 s, ...).
MinJobAge=5
SchedulerParameters=sched_min_interval=500000
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
echo "export SLURM_CONF=$conf" > "$dir/env.sh"
export SLURM_CONF=$conf

slurmctld -f "$conf" || fail "slurmctld failed to start" "$dir/log/slurmctld.log"
slurmd -f "$conf" -N "$host" || fail "slurmd failed to start" "$dir/log/slurmd.log"
state=
for _ in $(seq 60); do
  state=$(sinfo -h -o %T 2>/dev/null | head -n 1)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || fail "node not idle after 30 s (state: '${state:-unknown}')" "$dir/log/slurmd.log"
echo "export SLURM_CONF=$conf"
