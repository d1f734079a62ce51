#!/usr/bin/env bash
# test/bench/bench_recipe_threads.sh: each recipe's embedded default timed with the old thread setting and
# the new one (issue 40), each run in a fresh clean copy of HEAD, one run at a time:
#
#   old  ./run.sh --num_threads 1, OMP_NUM_THREADS=MKL_NUM_THREADS=1 (every job on one thread: the default
#        before issue 40)
#   new  ./run.sh (--num_threads auto: the cores spread over the jobs each stage runs at once), no thread
#        variable exported
#
# The copy is a `git worktree` of HEAD (committed work only) with tools/venv linked to this checkout's and
# PYTHONPATH on the copy (the venv's editable install would otherwise import this checkout's speechkit), the
# ABX C kernels copied (loaded only if built from the same source); it is removed after its run (the run's
# output is kept in the log). Nothing is written into this checkout but the two results files.
#
# Usage: test/bench/bench_recipe_threads.sh [options]
#   --recipes "A B"   recipes to time (default: zerospeech2019 tcstar_salad vctk_continual indic_multilingual)
#   --settings "A B"  old, new or both, in this order (default: "old new")
#   --stop_stage N    pass --stop_stage N to run.sh (default: none, the whole recipe)
#   --run_args "..."  more run.sh options, shell words (e.g. "--mini_sentences 10 --vqvae_args '--trainer.max_epochs 2'")
#   --workdir DIR     where the copies and logs go (default: a new folder under ${TMPDIR:-/tmp}; logs kept)
#   --results DIR     where recipe_threads.{json,md} go (default: test/bench/results)
#
# About 3 hours for the four defaults twice on 2 cores: not part of any test run. Run it on an otherwise idle
# machine (the load average at each run's start is recorded). A tiny check of the script itself (minutes):
#   test/bench/bench_recipe_threads.sh --recipes zerospeech2019 --stop_stage 3 \
#     --run_args "--mini_speakers 4 --mini_sentences 10 --vqvae_args '--trainer.max_epochs 3'"
#
# results/recipe_threads.json holds one entry per (recipe, --stop_stage, --run_args) and setting: wall
# seconds, exit status, the cores, the load average (1, 5, 15 min) at start and end, the commit, the exact
# command and the run's own "threads" line; a new run replaces the entries of its key and keeps the others.
# results/recipe_threads.md is rendered from the JSON (old vs new wall time and speed-up per key).
# Exit status: 1 if a run failed (its entry is still recorded, with its status), else 0.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
recipes="zerospeech2019 tcstar_salad vctk_continual indic_multilingual"
settings="old new"
stop_stage=
run_args=
workdir=
results=$repo/test/bench/results

die() { echo "$0: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --recipes|--settings|--stop_stage|--run_args|--workdir|--results)
      [ $# -ge 2 ] || die "option $1 needs a value"
      printf -v "${1#--}" '%s' "$2"; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
py=$repo/tools/venv/bin/python
[ -x "$py" ] || die "$py missing: run tools/install.sh first"
for r in $recipes; do [ -f "$repo/egs/$r/run.sh" ] || die "--recipes: no recipe egs/$r"; done
for s in $settings; do case "$s" in old|new) ;; *) die "--settings: '$s' is neither old nor new" ;; esac; done
[ -z "$stop_stage" ] || [[ "$stop_stage" =~ ^[0-9]+$ ]] || die "--stop_stage $stop_stage: not a stage number"
eval "extra=($run_args)" || die "--run_args: not shell words: $run_args"
[ -n "$workdir" ] || workdir=$(mktemp -d "${TMPDIR:-/tmp}/bench_recipe_threads.XXXXXX")
mkdir -p "$workdir/logs" "$results"
workdir=$(cd "$workdir" && pwd)
commit=$(git -C "$repo" rev-parse HEAD)
cores=$(OMP_NUM_THREADS='' OMP_THREAD_LIMIT='' nproc)
entries=$workdir/entries.jsonl
: > "$entries"
wt=
cleanup() { if [ -n "$wt" ] && [ -d "$wt" ]; then git -C "$repo" worktree remove --force "$wt" || true; fi; }
trap cleanup EXIT

failed=0
for recipe in $recipes; do
  for setting in $settings; do
    wt=$workdir/copy_${recipe}_$setting
    [ ! -e "$wt" ] || die "$wt exists (a --workdir of an earlier run?): give a new --workdir"
    git -C "$repo" worktree add --quiet --detach "$wt" "$commit"
    ln -s "$repo/tools/venv" "$wt/tools/venv"
    so=$repo/speechkit/scoring/libspeechkit_abx.so
    [ ! -f "$so" ] || cp "$so" "$wt/speechkit/scoring/"
    args=(${stop_stage:+--stop_stage "$stop_stage"} ${extra[@]+"${extra[@]}"})
    if [ "$setting" = old ]; then
      env_args=(-u SPEECHKIT_CORES OMP_NUM_THREADS=1 MKL_NUM_THREADS=1)
      args=(--num_threads 1 ${args[@]+"${args[@]}"})
    else
      env_args=(-u SPEECHKIT_CORES -u OMP_NUM_THREADS -u MKL_NUM_THREADS)
    fi
    log=$workdir/logs/$recipe.$setting.log
    command="$(printf '%s ' env "${env_args[@]}" "PYTHONPATH=$wt")./run.sh$(printf ' %q' ${args[@]+"${args[@]}"})"
    echo "$(date '+%F %T') $recipe, $setting: $command (log: $log)"
    load_start=$(cut -d' ' -f1-3 /proc/loadavg)
    start=$(date +%s.%N)
    rc=0
    (cd "$wt/egs/$recipe" && env "${env_args[@]}" "PYTHONPATH=$wt" ./run.sh ${args[@]+"${args[@]}"}) > "$log" 2>&1 || rc=$?
    end=$(date +%s.%N)
    load_end=$(cut -d' ' -f1-3 /proc/loadavg)
    plan=$(grep -m1 -o 'threads (num_threads .*' "$log" || true)
    "$py" - "$entries" "$recipe" "$setting" "$stop_stage" "$run_args" "$command" "$rc" "$start" "$end" \
      "$load_start" "$load_end" "$plan" <<'EOF'
import json, sys
out, recipe, setting, stop, run_args, command, rc, start, end, load0, load1, plan = sys.argv[1:]
with open(out, "a") as f:
    f.write(json.dumps({"recipe": recipe, "setting": setting, "stop_stage": stop or None, "run_args": run_args,
                        "command": command, "exit": int(rc), "wall_s": round(float(end) - float(start), 1),
                        "load_start": [float(x) for x in load0.split()], "load_end": [float(x) for x in load1.split()],
                        "threads": plan}) + "\n")
EOF
    if [ "$rc" -ne 0 ]; then
      failed=1
      echo "$0: $recipe ($setting) failed with status $rc; the end of $log:" >&2
      tail -n 15 "$log" >&2
    fi
    echo "$(date '+%F %T') $recipe, $setting: $(tail -n 1 "$entries")"
    git -C "$repo" worktree remove --force "$wt"
    wt=
  done
done

"$py" - "$entries" "$results" "$commit" "$cores" <<'EOF'
import datetime, json, os, platform, sys
from pathlib import Path

entries_file, results, commit, cores = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")), platform.processor() or "unknown CPU")
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
new = [dict(json.loads(line), commit=commit, date=date, cores=cores, cpu=cpu)
       for line in Path(entries_file).read_text().splitlines() if line.strip()]
path = results / "recipe_threads.json"
old = json.loads(path.read_text())["runs"] if path.is_file() else []
key = lambda e: (e["recipe"], e["stop_stage"], e["run_args"], e["setting"])
replaced = {key(e) for e in new}
runs = [e for e in old if key(e) not in replaced] + new
runs.sort(key=lambda e: (e["recipe"], e["stop_stage"] or "", e["run_args"], e["setting"] != "old"))
doc = {"what": "each recipe's embedded default, old (--num_threads 1, OMP/MKL=1) vs new (--num_threads auto) "
               "thread setting, in a clean git worktree of the commit (test/bench/bench_recipe_threads.sh)",
       "runs": runs}
tmp = path.with_name(path.name + ".tmp")
tmp.write_text(json.dumps(doc, indent=1) + "\n")
os.replace(tmp, path)

lines = ["# Recipe wall time: old vs new thread setting (issue 40)", "",
         "Made by `test/bench/bench_recipe_threads.sh` from `recipe_threads.json` (every figure there). old:",
         "`./run.sh --num_threads 1` with `OMP_NUM_THREADS=MKL_NUM_THREADS=1`, the default before issue 40; new:",
         "`./run.sh` (`--num_threads auto`). Each run in a fresh `git worktree` of the commit, one at a time.",
         "Wall clock includes everything the run does (corpus synthesis, start-up); the load average at the",
         "start says whether the machine was idle.", "",
         "| recipe | run | commit | cores | old wall (s) | new wall (s) | old / new | load at start (old; new) | exit (old, new) |",
         "|---|---|---|---|---:|---:|---:|---|---|"]
groups: dict = {}
for e in runs:
    groups.setdefault((e["recipe"], e["stop_stage"], e["run_args"]), {})[e["setting"]] = e
for (recipe, stop, args), g in groups.items():
    o, n = g.get("old"), g.get("new")
    what = " ".join(x for x in (f"--stop_stage {stop}" if stop else "", args) if x) or "the whole default"
    ratio = f"{o['wall_s'] / n['wall_s']:.2f}x" if o and n and n["wall_s"] > 0 else "-"
    first = o or n
    lines.append(f"| {recipe} | `{what}` | {first['commit'][:7]} | {first['cores']} | "
                 f"{o['wall_s'] if o else '-'} | {n['wall_s'] if n else '-'} | {ratio} | "
                 f"{o['load_start'][0] if o else '-'}; {n['load_start'][0] if n else '-'} | "
                 f"{o['exit'] if o else '-'}, {n['exit'] if n else '-'} |")
lines += ["", "The threads each stage got (the run's own `threads` line):", ""]
for (recipe, stop, args), g in groups.items():
    for s in ("old", "new"):
        if s in g:
            lines.append(f"- {recipe} {s}: `{g[s]['threads'] or 'no threads line (the run failed before it)'}`")
md = results / "recipe_threads.md"
tmp = md.with_name(md.name + ".tmp")
tmp.write_text("\n".join(lines) + "\n")
os.replace(tmp, md)
print(f"wrote {path} and {md}")
EOF
echo "logs: $workdir/logs/"
exit "$failed"
