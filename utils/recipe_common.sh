#!/usr/bin/env bash
# utils/recipe_common.sh: what every recipe's run.sh checks before it runs or creates anything.
# Source it after utils/parse_options.sh (which lists the options given in $cmdline_options):
#
#   . utils/parse_options.sh
#   . utils/recipe_common.sh
#   check_stages 8                       # a recipe whose stages are 0..8
#   option_given corpus && ...
#
#   die MESSAGE...      prints "$0: MESSAGE" on stderr, exits 1.
#   record_run FILE     appends this run (command line, environment, config hashes) to FILE (runs.jsonl).
#   option_given NAME   true if --NAME was given on the command line (or assigned in a --config
#                       file), whatever its value: the default given explicitly counts.
#   check_stages LAST   --stage and --stop_stage are whole numbers, --stage in 0..LAST,
#                       --stop_stage in --stage..LAST or 100 and more (the default 100: to the end);
#                       otherwise an error naming the option. Leading zeros are dropped (08 is 8).
#   log STAGE MESSAGE...  prints "YYYY-MM-DD HH:MM:SS [stage STAGE] MESSAGE" on stdout.
#   check_db_root       stage 0 of a recipe with a --corpus choice: a --db_root given must be a
#                       directory, except with --corpus mini (a new folder to synthesize mini into).
#   guess_corpus NAME DESCRIPTION PATH...
#                       with no --corpus: mini without --db_root (or where mini was synthesized),
#                       msc where the shared data folder is, NAME where --db_root holds one of the
#                       PATHs (PATH/ a folder, else a file), otherwise an error naming DESCRIPTION.
#   registered_corpora  prints the names of speechkit's corpus registry (speechkit/data/corpora/__init__.py,
#                       what `speechkit-prepare-corpus --help` lists), space-separated.
#   check_corpus OWN... $corpus is one of the recipe's own corpora (OWN: the names its local/ prepares
#                       its own way) or a registered one (the recipe's local/prepare_corpus.sh makes its
#                       sets from the one data dir); otherwise an error listing both.
#   own_corpus OWN...   true if $corpus is one of OWN (the recipe's own way), false for a registered corpus.
#
# Threads (Kaldi's --nj / --num-threads habit; docs/scale_out.md, "Threads"). A run.sh with a
# num_threads option (default auto) spreads the cores over what each stage runs at once:
#   check_num_threads   --num_threads is auto or a whole number >= 1, and SPEECHKIT_CORES (path.sh: the
#                       user's OMP_NUM_THREADS, else nproc) a whole number >= 1; otherwise an error naming
#                       it. Sets $cores and starts $threads_plan.
#   threads VAR WHAT JOBS  VAR = the threads of each of JOBS jobs that run at once: --num_threads N as
#                       given, or (auto) max(1, cores / JOBS); a single job gets every core. Appends
#                       "WHAT=VAR" (one job) or "WHAT=VARxJOBS" to $threads_plan, which show_threads
#                       prints and record_run records (runs.jsonl: threads.SPEECHKIT_THREADS).
#   show_threads        prints "YYYY-MM-DD HH:MM:SS threads (num_threads auto, N cores): WHAT=... ..."
#   with_threads N CMD...  runs CMD with OMP_NUM_THREADS = MKL_NUM_THREADS = N: the threads of a command
#                       without a thread option (torch's default), its worker processes included.

die() { echo "$0: $*" >&2; exit 1; }

option_given() { [[ " ${cmdline_options:-} " == *" $1 "* ]]; }

log() { echo "$(date '+%F %T') [stage $1] ${*:2}"; }

# check_db_root: a mistyped --db_root is an error, not the synthetic corpus (and is not created);
# only `--corpus mini --db_root DIR` may name a new folder (the caller creates it).
check_db_root() {
  [ -n "$db_root" ] && [ ! -d "$db_root" ] || return 0
  if option_given corpus && [ -n "$corpus" ]; then
    [ "$corpus" = mini ] || die "--db_root $db_root: no such directory"
  else
    die "--db_root $db_root: no such directory (--corpus mini --db_root DIR synthesizes the mini corpus into a new DIR)"
  fi
}

# guess_corpus NAME DESCRIPTION PATH...: sets $corpus where --corpus was not given (see above).
guess_corpus() {
  local name=$1 what=$2 path
  shift 2
  [ -z "$corpus" ] || return 0
  if [ -z "$db_root" ] || [ -f "$db_root/.complete" ]; then corpus=mini; return 0; fi
  if [ -d "$db_root/msc_malayalam" ] || [ -f "$db_root/speech.tsv" ]; then corpus=msc; return 0; fi
  for path in "$@"; do
    case "$path" in
      */) [ -d "$db_root/$path" ] ;;
      *) [ -f "$db_root/$path" ] ;;
    esac && { corpus=$name; return 0; }
  done
  die "--db_root $db_root: neither the shared data folder (msc_malayalam/), $what nor a mini corpus; give --corpus (--corpus mini synthesizes the mini corpus there)"
}

registered_corpora() {
  python -c 'from speechkit.data.corpora import CORPORA; print(" ".join(CORPORA))'
}

own_corpus() { [[ " $* " == *" $corpus "* ]]; }

check_corpus() {
  local names
  own_corpus "$@" && return 0
  names=$(registered_corpora) || die "cannot read speechkit's corpus registry (python -c 'import speechkit.data.corpora')"
  [[ "$corpus" =~ ^[A-Za-z0-9_]+$ && " $names " == *" $corpus "* ]] && return 0
  die "unknown --corpus '$corpus': this recipe's own are $*; speechkit's registered corpora are $names" \
    "(speechkit-prepare-corpus --help; docs/adding_a_corpus.md adds one)"
}

check_stages() {
  local last=$1 opt value
  for opt in stage stop_stage; do
    value=${!opt}
    [[ "$value" =~ ^[0-9]{1,9}$ ]] || die "--$opt $value: not a stage number (this recipe's stages are 0..$last)"
    printf -v "$opt" '%d' "$((10#$value))"
  done
  [ "$stage" -le "$last" ] || die "--stage $stage: no such stage (this recipe's stages are 0..$last)"
  [ "$stop_stage" -le "$last" ] || [ "$stop_stage" -ge 100 ] ||
    die "--stop_stage $stop_stage: no such stage (this recipe's stages are 0..$last; 100 or more: to the end)"
  [ "$stop_stage" -ge "$stage" ] || die "--stop_stage $stop_stage is before --stage $stage: no stage would run"
}

# record_run FILE [CONFIG...]: append this invocation (the command line as typed, the environment:
# date, git commit, Python, torch, CPU/GPU, threads; the SHA-256 of every *.yaml under the CONFIG
# paths, default conf/) to FILE, a runs.jsonl that local/make_results.py turns into RESULTS.md's
# environment, commands and configs sections (speechkit-record-run, speechkit.utils.provenance).
record_run() {
  local file=$1
  shift
  [ $# -gt 0 ] || set -- conf
  if [ -n "${threads_plan:-}" ]; then  # the threads of every stage, beside OMP_NUM_THREADS & co.
    SPEECHKIT_THREADS="num_threads=$num_threads cores=$cores $threads_plan" \
      speechkit-record-run --out "$file" --cmdline "${cmdline_args:-$0}" --configs "$@"
  else
    speechkit-record-run --out "$file" --cmdline "${cmdline_args:-$0}" --configs "$@"
  fi
}

check_num_threads() {
  cores=${SPEECHKIT_CORES:-1}
  [[ "$cores" =~ ^[1-9][0-9]{0,5}$ ]] ||
    die "SPEECHKIT_CORES=$cores (path.sh: the OMP_NUM_THREADS you exported, else nproc): not a whole number >= 1"
  [[ "$num_threads" = auto || "$num_threads" =~ ^[1-9][0-9]{0,5}$ ]] ||
    die "--num_threads $num_threads: auto (the cores spread over the jobs that run at once) or a whole number >= 1"
  threads_plan=
}

threads() {
  local var=$1 what=$2 jobs=$3 n
  [[ "$jobs" =~ ^[1-9][0-9]{0,5}$ ]] || die "$what: $jobs jobs at once: not a whole number >= 1 (--nj, --nproc, --train_jobs)"
  if [ "$num_threads" = auto ]; then
    n=$((cores / jobs))
    [ "$n" -ge 1 ] || n=1
  else
    n=$num_threads
  fi
  printf -v "$var" '%d' "$n"
  threads_plan="${threads_plan:+$threads_plan }$what=$n"
  [ "$jobs" -eq 1 ] || threads_plan="${threads_plan}x$jobs"
}

show_threads() { echo "$(date '+%F %T') threads (num_threads $num_threads, $cores cores): $threads_plan"; }

with_threads() {
  local n=$1
  shift
  OMP_NUM_THREADS=$n MKL_NUM_THREADS=$n "$@"
}
