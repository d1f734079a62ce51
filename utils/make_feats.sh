#!/usr/bin/env bash
# utils/make_feats.sh: compute features for a data directory with parallel jobs (Kaldi's
# steps/make_mfcc.sh shape, for every speechkit frontend: mfcc, logmel, spectrogram, fbank, world).
#
# Usage: utils/make_feats.sh [options] --config <frontend.yaml> <data-dir> [<log-dir> [<feat-dir>]]
#   e.g. utils/make_feats.sh --nj 4 --cmd "$train_cmd" --config conf/mfcc.yaml data/train exp/make_mfcc/train mfcc
#
# Options:
#   --config FILE     frontend config (YAML, conf/*.yaml); required. Unlike other recipe scripts,
#                     --config here is the YAML handed to speechkit-compute-feats, not a shell file.
#   --cmd CMD         job runner with Kaldi's run.pl convention (default: utils/run.pl; utils/slurm.pl ...)
#   --nj N            number of parallel jobs / parts (default: 4; capped at the number of utterances)
#   --num-threads T   torch threads of each job (default: 1; the recipes give cores / nj: run.sh's
#                     --num_threads); also handed to CMD (Slurm: --cpus-per-task T)
#   --compress BOOL   Kaldi-compressed matrices, lossy (default: false)
#   --write-utt2dur BOOL  ignored (accepted for Kaldi compatibility)
# <log-dir> defaults to <data-dir>/log, <feat-dir> to <data-dir>/data.
#
# Runs `$cmd --num-threads T JOB=1:$nj <log-dir>/compute_feats.JOB.log speechkit-compute-feats --nj $nj --job JOB ...`,
# then `speechkit-compute-feats --merge-only ...` (writes feats.scp, utt2num_frames, frame_shift,
# feats.yaml), then utils/validate_data_dir.sh --no-text. Parts that are already complete and
# current are not recomputed, so the script is safe to re-run. The outputs are the same bytes
# whichever $cmd runs the jobs.
set -euo pipefail

utils=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=$utils/run.pl
nj=4
num_threads=1
compress=false
write_utt2dur=false
help_message="Usage: $0 [--cmd CMD] [--nj N] [--num-threads T] [--compress BOOL] --config <frontend.yaml> <data-dir> [<log-dir> [<feat-dir>]]"

echo "$0 $*"

# Take --config (the frontend YAML) out before parse_options.sh, which would source it as shell.
feat_config=
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) [ $# -ge 2 ] || { echo "$0: option --config needs a file" >&2; exit 1; }
              feat_config=$2; shift 2 ;;
    --config=*) feat_config=${1#--config=}; shift ;;
    --) args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- ${args[@]+"${args[@]}"}
# shellcheck disable=SC1091
. "$utils/parse_options.sh" || exit 1

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "$help_message" >&2
  exit 1
fi
[ -n "$feat_config" ] || { echo "$0: --config <frontend.yaml> is required" >&2; exit 1; }
[ -f "$feat_config" ] || { echo "$0: --config $feat_config: no such file" >&2; exit 1; }
[[ "$num_threads" =~ ^[1-9][0-9]{0,5}$ ]] || { echo "$0: --num-threads $num_threads: not a whole number >= 1" >&2; exit 1; }

data=$1
logdir=${2:-$data/log}
featdir=${3:-$data/data}

if ! command -v speechkit-compute-feats >/dev/null 2>&1; then
  PATH="$(cd -P "$utils/.." && pwd)/tools/venv/bin:$PATH"
  command -v speechkit-compute-feats >/dev/null 2>&1 || { echo "$0: speechkit-compute-feats not found (run tools/install.sh, then . ./path.sh)" >&2; exit 1; }
fi

for f in "$data/wav.scp" "$data/utt2spk"; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done
mkdir -p "$logdir" "$featdir"
# as Kaldi's split_data.sh: no empty parts (speechkit-compute-feats caps N the same way)
num_utts=$(wc -l < "$data/utt2spk")
if [ "$nj" -gt "$num_utts" ] && [ "$num_utts" -gt 0 ]; then
  echo "$0: --nj $nj capped at $num_utts (the number of utterances)"
  nj=$num_utts
fi

# shellcheck disable=SC2086  # $cmd may carry its own options, e.g. "utils/slurm.pl --mem 4G"
if ! $cmd --num-threads "$num_threads" JOB=1:"$nj" "$logdir/compute_feats.JOB.log" \
    speechkit-compute-feats --config "$feat_config" --nj "$nj" --job JOB --compress "$compress" \
    --num-threads "$num_threads" "$data" "$logdir" "$featdir"; then
  echo "$0: feature extraction failed for some jobs; see $logdir/compute_feats.*.log" >&2
  exit 1
fi

speechkit-compute-feats --merge-only --config "$feat_config" --nj "$nj" --compress "$compress" \
  "$data" "$logdir" "$featdir"

"$utils/validate_data_dir.sh" --no-text "$data"
echo "$0: succeeded computing features for $data"
