#!/usr/bin/env bash
# The earlier campaign of results/local/NOTES.md (earlier measurements, not in results/): every VQ-VAE configuration of
# conf/tuning/ trained on the local corpus (../../../shared/data), one at a time, one CPU thread each,
# then ABX / bitrate on timit_sample (stage 6); the codebook inverter and resynthesis for the main
# Transformer system. Run it in the background from the recipe folder:
#
#   nohup local/run_campaign.sh > exp/local/campaign.log 2>&1 &
#
# Logs: exp/local/logs/<tag>.log; report: exp/local/RESULTS.md (+ abx_bitrate.png, results.json).
# Re-running skips nothing by itself but every stage resumes or reuses what is finished.
set -euo pipefail

expdir=exp/local
# stage 6 also collects each model's score files (run.sh --results_dir): under $expdir, not into the tracked results/
common=(--corpus local --datadir data/local --dumpdir dump/local --expdir "$expdir" --nj 1 --num_threads 1
        --results_dir "$expdir/tracked/results")
mkdir -p "$expdir/logs"
# A snapshot of run.sh, so that an edit of the recipe during the hours this runs cannot change a running stage.
cp run.sh "$expdir/logs/run.sh"
recipe=(bash "$expdir/logs/run.sh")

say() { echo "$(date '+%F %T') $*"; }

say "stages 0-1 (data, MFCC / log-mel / spectrogram features)"
"${recipe[@]}" "${common[@]}" --stop_stage 1 > "$expdir/logs/data_mfcc.log" 2>&1
"${recipe[@]}" "${common[@]}" --stage 1 --stop_stage 1 --feats_type logmel > "$expdir/logs/data_logmel.log" 2>&1

# system TAG STAGES [run.sh options]: train (stage 2), extract (3), optionally invert + resynthesize (4, 5), score (6)
system() {
  local tag=$1 stages=$2 s
  shift 2
  for s in $stages; do
    say "$tag: stage $s"
    "${recipe[@]}" "${common[@]}" --train_config "conf/tuning/train_vqvae_$tag.yaml" \
      --inverter_config conf/tuning/train_inverter.yaml --tag "$tag" --stage "$s" --stop_stage "$s" "$@" \
      >> "$expdir/logs/$tag.log" 2>&1
  done
}

system tr_k64 "2 3 4 5 6" --aux_units true --kmeans_k 64
system conv_k64 "2 3 6"
system tr_k64_smooth "2 3 6"
system tr_k64_jitter "2 3 6"
system tr_k64_smooth_jitter "2 3 6"
system tr_k128 "2 3 6"
system tr_k256 "2 3 6"
system tr_k512 "2 3 6"
system tr_k64_logmel "2 3 6" --feats_type logmel
system tr_k64_stride2 "2 3 6"
system tr_k64_smooth_jitter_e60 "2 3 6" --aux_units true
say "done: $expdir/RESULTS.md"
