#!/usr/bin/env bash
# The paper's grids (Tjandra et al. 2020, Tables 1-3) of results/local/NOTES.md (earlier measurements, not in results/): the unit set of
# ../../../shared/data without any test-speaker audio (--corpus local, no speed perturbation), 20 epochs per
# model on one CPU thread, two models at a time; the units of the unseen TIMIT speakers scored by stage 6
# (ABX with the 95 % speaker-bootstrap interval, bitrate), codes and continuous z.
#
#   Table 1  input features at K = 128:           tr_k128 (MFCC+deltas), tr_k128_logmel
#   Table 2  encoder and codebook size:           conv_k256, tr_k64, tr_k128, tr_k256, tr_k512
#   Table 3  regularizers at K = 128:             smoothing lambda in {1e-2, 5e-3, 1e-3}, jitter p in {0.05, 0.075},
#                                                 the paper's two combinations: smoothing 5e-3 + jitter 0.05 (its
#                                                 submitted system) and smoothing 1e-3 + jitter 0.05 (its best);
#                                                 the recipe's own smoothing 1e-2 + jitter 0.075, also with the
#                                                 paper's optimiser (Adam 1e-4, sec. 5.1)
#   (the two paper combinations were added after the measurements of results/local/NOTES.md)
#
# From the recipe folder, after stages 0-1 of `./run.sh --corpus local --speed_perturb false` into data_local /
# dump_local (the script runs them if missing):
#
#   nohup local/run_paper_grids.sh > exp_local/grids.log 2>&1 &
#
# Logs: exp_local/logs/<tag>.log; reports: exp_local/RESULTS.md (every system) and exp_local/COMPARISONS.md (each
# trend as a paired difference, local/compare_abx.py). Every stage resumes or reuses what is finished,
# so the script can be re-run after an interruption.
set -euo pipefail

datadir=data_local
dumpdir=dump_local
expdir=exp_local
jobs=2                         # models trained at once (one thread each)
. utils/parse_options.sh
. ./path.sh   # the toolkit's environment, for the final report

# each model's stage 6 also collects its score files (run.sh --results_dir): under $expdir, not into the
# tracked results/ (copy a folder of $expdir/tracked/results/ there to report it)
common=(--datadir "$datadir" --dumpdir "$dumpdir" --expdir "$expdir" --nj 1 --num_threads 1 --aux_units true
        --results_dir "$expdir/tracked/results")
mkdir -p "$expdir/logs"
# a snapshot of run.sh: an edit of the recipe while this runs cannot change a running stage
cp run.sh "$expdir/logs/run.sh"
recipe=(bash "$expdir/logs/run.sh")
say() { echo "$(date '+%F %T') $*"; }

if [ ! -f "$datadir/.setup" ]; then
  say "stage 0 (data) -> $datadir"
  "${recipe[@]}" --corpus local --speed_perturb false --datadir "$datadir" --stop_stage 0 > "$expdir/logs/data.log" 2>&1
fi
for feats in mfcc logmel; do
  if [ ! -f "$dumpdir/$feats/train/cmvn.scp" ]; then
    say "stage 1 ($feats features) -> $dumpdir"
    "${recipe[@]}" "${common[@]}" --stage 1 --stop_stage 1 --feats_type "$feats" --nj 2 >> "$expdir/logs/features.log" 2>&1
  fi
done

# system TAG CONFIG [run.sh options]: train (stage 2), extract (3), score (6), one after the other
system() {
  local tag=$1 config=$2 s
  shift 2
  for s in 2 3 6; do
    say "$tag: stage $s"
    "${recipe[@]}" "${common[@]}" --train_config "conf/tuning/train_vqvae_$config.yaml" --tag "$tag" \
      --stage "$s" --stop_stage "$s" "$@" >> "$expdir/logs/$tag.log" 2>&1 \
      || { say "$tag: stage $s FAILED (see $expdir/logs/$tag.log)"; return 1; }
  done
}

# name|config|options, in order of importance (the first rows of each table first)
grid=(
  "vqvae_tr_k128|tr_k128|"
  "vqvae_tr_k128_logmel|tr_k128|--feats_type logmel"
  "vqvae_tr_k128_smooth1e-2|tr_k128|--vqvae_args --model.smoothing_weight 1e-2"
  "vqvae_tr_k128_jitter0.075|tr_k128|--vqvae_args --model.jitter_prob 0.075"
  "vqvae_tr_k128_smooth_jitter|tr_k128|--vqvae_args --model.smoothing_weight 1e-2 --model.jitter_prob 0.075"
  "vqvae_conv_k256|conv_k256|"
  "vqvae_tr_k256|tr_k256|"
  "vqvae_tr_k64|tr_k64|"
  "vqvae_tr_k512|tr_k512|"
  "vqvae_tr_k128_smooth5e-3|tr_k128|--vqvae_args --model.smoothing_weight 5e-3"
  "vqvae_tr_k128_smooth1e-3|tr_k128|--vqvae_args --model.smoothing_weight 1e-3"
  "vqvae_tr_k128_jitter0.05|tr_k128|--vqvae_args --model.jitter_prob 0.05"
  # Table 3's two combinations: the submitted system (marked in the table) and the best one, found after it
  "vqvae_tr_k128_smooth5e-3_jitter0.05|tr_k128|--vqvae_args --model.smoothing_weight 5e-3 --model.jitter_prob 0.05"
  "vqvae_tr_k128_smooth1e-3_jitter0.05|tr_k128|--vqvae_args --model.smoothing_weight 1e-3 --model.jitter_prob 0.05"
  "vqvae_tr_k128_paper_adam|tr_k128_paper_adam|"
  # a second training seed of the plain and the jittered model: the scale of run-to-run variation,
  # which the paired speaker bootstrap of COMPARISONS.md does not include
  "vqvae_tr_k128_seed2|tr_k128|--vqvae_args --trainer.seed 2"
  "vqvae_tr_k128_jitter0.075_seed2|tr_k128|--vqvae_args --model.jitter_prob 0.075 --trainer.seed 2"
)

failed=0
running=0
for row in "${grid[@]}"; do
  IFS='|' read -r tag config opts <<< "$row"
  if [ "$running" -ge "$jobs" ]; then wait -n || failed=$((failed + 1)); running=$((running - 1)); fi
  if [[ "$opts" == --vqvae_args* ]]; then
    system "$tag" "$config" --vqvae_args "${opts#--vqvae_args }" &
  else
    # shellcheck disable=SC2086  # opts holds several words
    system "$tag" "$config" $opts &
  fi
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do wait -n || failed=$((failed + 1)); running=$((running - 1)); done

# one report over everything in $expdir (the systems' stage 6 runs wrote it while others were still training)
python local/make_results.py --expdir "$expdir" --datadir "$datadir" --corpus local --out "$expdir/RESULTS.md"
# each paper trend as a paired difference (same speaker resamples for both systems)
comparisons=(
  "baseline_logmel_cmvn=baseline_mfcc_cmvn" "vqvae_tr_k128_logmel=vqvae_tr_k128" "vqvae_tr_k128_logmel (z)=vqvae_tr_k128 (z)"
  "vqvae_tr_k256=vqvae_conv_k256" "vqvae_tr_k256 (z)=vqvae_conv_k256 (z)"
  "vqvae_tr_k64=vqvae_tr_k128" "vqvae_tr_k256=vqvae_tr_k128" "vqvae_tr_k512=vqvae_tr_k128"
  "vqvae_tr_k128_smooth1e-2=vqvae_tr_k128" "vqvae_tr_k128_smooth5e-3=vqvae_tr_k128" "vqvae_tr_k128_smooth1e-3=vqvae_tr_k128"
  "vqvae_tr_k128_jitter0.05=vqvae_tr_k128" "vqvae_tr_k128_jitter0.075=vqvae_tr_k128" "vqvae_tr_k128_smooth_jitter=vqvae_tr_k128"
  "vqvae_tr_k128_smooth_jitter=vqvae_tr_k128_jitter0.075" "vqvae_tr_k128_jitter0.075 (z)=vqvae_tr_k128 (z)"
  "vqvae_tr_k128_smooth_jitter (z)=vqvae_tr_k128 (z)" "vqvae_tr_k128_paper_adam=vqvae_tr_k128_smooth_jitter"
  "vqvae_tr_k128_seed2=vqvae_tr_k128" "vqvae_tr_k128_jitter0.075_seed2=vqvae_tr_k128_jitter0.075"
  "vqvae_tr_k128_jitter0.075_seed2=vqvae_tr_k128_seed2" "vqvae_tr_k128_jitter0.075_seed2 (z)=vqvae_tr_k128_seed2 (z)"
  "vqvae_tr_k128_jitter0.05=baseline_mfcc" "vqvae_tr_k128_jitter0.075 (z)=baseline_mfcc_cmvn"
  "vqvae_tr_k128_smooth5e-3_jitter0.05=vqvae_tr_k128" "vqvae_tr_k128_smooth1e-3_jitter0.05=vqvae_tr_k128"
  "vqvae_tr_k128_smooth1e-3_jitter0.05=vqvae_tr_k128_jitter0.05"
  "vqvae_tr_k128_smooth1e-3_jitter0.05=vqvae_tr_k128_smooth5e-3_jitter0.05"
)
python local/compare_abx.py --expdir "$expdir" --out "$expdir/COMPARISONS.md" "${comparisons[@]}" > "$expdir/logs/compare.log" 2>&1 \
  || { say "comparisons FAILED (see $expdir/logs/compare.log)"; failed=$((failed + 1)); }
say "done ($failed failed): $expdir/RESULTS.md, $expdir/COMPARISONS.md"
[ "$failed" -eq 0 ]
