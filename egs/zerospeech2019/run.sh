#!/usr/bin/env bash
# ZeroSpeech 2019 (TTS without T) with a Transformer VQ-VAE and a codebook inverter:
# Tjandra, Sakti & Nakamura, "Transformer VQ-VAE for Unsupervised Unit Discovery and Speech Synthesis:
# ZeroSpeech 2020 Challenge", Interspeech 2020.
#
#   stage 0  data: unit (train) / dev / voice / test sets, ABX item files        -> $datadir/
#            (--speed_perturb true: the unit set + its 0.9 / 1.1 speed copies     -> $datadir/train_sp/)
#   stage 1  features: MFCC+deltas (or log-mel) + per-speaker CMVN for the VQ-VAE,
#            linear spectrograms of the voice and test sets for the inverter     -> $dumpdir/<type>/<set>/
#   stage 2  train the VQ-VAE on the unit set                                    -> $expdir/$tag/vqvae/
#   stage 3  extract units of the voice and test sets (ZeroSpeech 2019 layout:
#            codebook vectors by default, --unit_format onehot)                  -> $expdir/$tag/units/<set>/
#   stage 4  train the codebook inverter on the voice set (retrained when the
#            VQ-VAE checkpoint changed: inverter/vqvae_checkpoint.sha256)        -> $expdir/$tag/inverter/
#   stage 5  resynthesize test utterances in the target voice (wav + PNG)        -> $expdir/$tag/resynth/test/
#   stage 6  ABX (across/within speakers) and bitrate of the units and of the
#            MFCC baseline; $expdir/RESULTS.md over every tag in $expdir         -> $expdir/$tag/scores/
#
# Corpora (--corpus):
#   mini            (default) speechkit's espeak-ng corpus, synthesized into --db_root (default db/mini;
#                   a new folder only with --corpus mini given: `--corpus mini --db_root db/mymini`,
#                   without it a --db_root that does not exist is an error):
#                   English, --mini_speakers speakers x --mini_sentences sentences; the last two speakers
#                   are the test set, the one before them the target voice, the rest the unit set.
#   local           every corpus in --db_root (default ../../../shared/data): the untranscribed audio of
#                   fsdd, msc_malayalam (crowd + story) and hindi_noa (16 kHz through sox pipes) is the
#                   unit set, the msc_malayalam story reader the voice, timit_sample the test set of
#                   unseen speakers (ABX on its hand-labelled phones). Defaults to the real-speech
#                   configuration: conf/tuning/train_vqvae_tr_k128_jitter.yaml, --speed_perturb true.
#   zerospeech2019  the official 2019 data: --db_root DIR/english (or surprise) with train/unit,
#                   train/voice, test, and optionally an ABX item file and bitrate_filelist.txt
#                   (see local/prepare_zerospeech2019.py --help).
#   any other corpus of speechkit's registry (speechkit-prepare-corpus --help; docs/adding_a_corpus.md),
#                   --db_root its folder, --corpus_opts its options: local/prepare_corpus.sh makes the sets
#                   from its one data dir: the speaker with the most audio is the voice, --num_test_speakers
#                   others (drawn with --seed) the unseen test set, the rest the unit set; it prints them.
#                   ABX (stage 6) needs the corpus's phone_alignments.
#
# Training (stages 2, 4) runs through $cuda_cmd (with --ngpu > 0) or $train_cmd, unit extraction (stage 3)
# through $train_cmd (cmd.sh: local or Slurm), each with its log under exp/: vqvae/log/train.log,
# units/log/extract_<set>.log, inverter/log/train.log.
# Threads (--num_threads auto): the cores spread over what a stage runs at once: each training (one at a
# time) every core (over its --nproc processes), the --nj feature and extraction jobs cores / nj each,
# resynthesis and scoring every core; the log's "threads" line and runs.jsonl say what each stage got.
#
# Every stage can be re-run: features are recomputed only when their inputs change, training resumes
# from (or stops at) its latest checkpoint, units and wavs are rewritten atomically.
# Example:  ./run.sh                          (the whole mini recipe)
#           ./run.sh --stage 3                (reuse the trained VQ-VAE)
#           ./run.sh --corpus local --stop_stage 3   (the real-speech default, about 20 min on 2 cores)
#           ./run.sh --corpus local --train_config conf/tuning/train_vqvae_tr_k256.yaml --speed_perturb false
set -euo pipefail

stage=0
stop_stage=100
nj=2                 # parallel jobs (features, unit extraction)
num_threads=auto     # threads of each job: auto = the cores (path.sh) / the jobs a stage runs at once
                     # (a training: every core); N = N each (1: the setting for a machine busy with other work)
ngpu=                # training GPUs (speechkit-train --ngpu): 0 = CPU, N = N processes (DDP); empty = trainer.device
nproc=1              # training processes on the CPU (speechkit-train --nproc; DDP with gloo)
corpus=mini          # mini | local | zerospeech2019 | a registered corpus (speechkit-prepare-corpus --help)
db_root=             # corpus location (default: db/mini for mini, ../../../shared/data for local)
corpus_opts=         # a registered corpus: its speechkit-prepare-corpus options, e.g. "--table train.tsv"
num_test_speakers=2  # a registered corpus: unseen test speakers
seed=1               # a registered corpus: seed of the test speakers' draw
mini_speakers=8      # mini: synthetic speakers (4..8): units, 1 voice, 2 test
mini_sentences=40    # mini: sentences per speaker
datadir=data         # Kaldi data dirs
dumpdir=dump         # features
expdir=exp           # experiments
feats_type=mfcc      # VQ-VAE input features: mfcc (conf/mfcc.yaml) | logmel (conf/logmel.yaml)
train_config=        # VQ-VAE config (speechkit-train vqvae --print-config lists every key); default: conf/train_vqvae.yaml,
                     # --corpus local: conf/tuning/train_vqvae_tr_k128_jitter.yaml (README: the real-speech default)
inverter_config=     # inverter config; default: conf/train_inverter.yaml (sized for mini), --corpus local:
                     # conf/tuning/train_inverter.yaml (the paper's 3 Transformer layers, 2 multi-scale blocks per conv stack)
tag=                 # experiment name (default: train_config's name without 'train_' and '.yaml', + _<feats_type>
                     # unless mfcc or the name says it)
vqvae_args=          # extra speechkit-train overrides for the VQ-VAE, e.g. "--model.codebook_size 128"
inverter_args=       # extra speechkit-train overrides for the inverter
voice=               # stage 5 target voice (default: the voice set's first speaker)
num_resynth=8        # stage 5: test utterances to resynthesize (0 = all)
aux_units=           # stage 3: also write the continuous z of the test set (units/test_aux), stage 6 scores it;
                     # default false, --corpus local: true
aux_phases=all       # stage 3, with --aux_units: z every stride/N input frames (speechkit-extract-units --phases;
                     # all = every input frame, 10 ms; 1 = once per code frame, 40 ms at stride 4)
unit_format=codebook # stage 3: codebook (each frame its codebook vector; ZeroSpeech 2019 VQ submissions) | onehot
speed_perturb=       # stage 0: add 0.9 / 1.1 speed copies of the unit set (utils/perturb_data_dir_speed_3way.sh);
                     # default false, --corpus local: true
abx_bootstrap=1000   # stage 6: resamples of the test speakers for the 95 % interval of the no-context across ABX (0 = none)
kmeans_k=0           # stage 6: also score k-means units of the input features (K clusters, at the code rate); 0 = no
results_dir=results  # stage 6: the tracked results, <results_dir>/<results_name>/ (score JSONs, runs.jsonl), and the
                     # page made from every run there, RESULTS.md beside <results_dir> (local/make_results.py --render)
results_name=        # default: the corpus (mini, local, zerospeech2019) for its default configuration, else <corpus>_<tag>
help_message="Usage: $0 [--stage N] [--stop_stage N] [--corpus mini|local|zerospeech2019|NAME] [--db_root DIR]
       [--corpus_opts '...'] [--num_test_speakers N] [--seed S]
       [--nj N] [--num_threads auto|N] [--ngpu N] [--nproc N] [--train_config YAML] [--inverter_config YAML] [--tag NAME] [--feats_type mfcc|logmel]
       [--vqvae_args '--key value ...'] [--inverter_args '...'] [--voice SPK] [--num_resynth N] [--aux_units true|false] [--aux_phases N|all]
       [--unit_format codebook|onehot] [--speed_perturb true|false] [--kmeans_k K] [--results_dir DIR] [--results_name NAME]
       [--datadir DIR] [--dumpdir DIR] [--expdir DIR] [--mini_speakers N] [--mini_sentences N]
Stages: 0 data, 1 features, 2 train VQ-VAE, 3 extract units, 4 train inverter, 5 resynthesize,
        6 score, paired comparisons, results/<name>/ + RESULTS.md"

setup_keys="corpus db_root mini_speakers mini_sentences speed_perturb corpus_opts num_test_speakers seed"
. ./path.sh
. ./cmd.sh
. utils/parse_options.sh
[ $# -eq 0 ] || { echo "$help_message" >&2; exit 1; }
. utils/recipe_common.sh   # die, check_stages, log, check_db_root
check_stages 6
check_num_threads   # --num_threads auto|N (the threads of each stage: below)

# The setup stage 0 prepared ($datadir/.setup): later stages take the corpus, --db_root, the mini
# options, --speed_perturb and a registered corpus's options from it, so `./run.sh --stage 2`
# continues `./run.sh --corpus local --stop_stage 1`; an option given later (whatever its value)
# that differs from it is an error naming the saved one.
. utils/stage_setup.sh
setup_file=$datadir/.setup
if [ "$stage" -gt 0 ]; then
  setup_restore "$setup_file" $setup_keys
else
  # a new folder only where `--corpus mini --db_root DIR` asks for the mini corpus to be synthesized
  # (created below, once every option is checked); else a mistyped path is not silently made mini
  check_db_root
fi

# the real-speech default (--corpus local): the best configuration measured that finishes stages 0-3 in
# 30 minutes on 2 cores (results/local/NOTES.md); mini and the official data keep the small one
if [ "$corpus" = local ]; then
  train_config=${train_config:-conf/tuning/train_vqvae_tr_k128_jitter.yaml}
  inverter_config=${inverter_config:-conf/tuning/train_inverter.yaml}
  speed_perturb=${speed_perturb:-true}
  aux_units=${aux_units:-true}
fi
aux_units=${aux_units:-false}
train_config=${train_config:-conf/train_vqvae.yaml}
inverter_config=${inverter_config:-conf/train_inverter.yaml}
speed_perturb=${speed_perturb:-false}
case "$speed_perturb" in true|false) ;; *) die "--speed_perturb must be true or false, got '$speed_perturb'" ;; esac
case "$feats_type" in mfcc|logmel) ;; *) die "--feats_type must be mfcc or logmel, got '$feats_type'" ;; esac
[ -f "$train_config" ] || die "--train_config $train_config: no such file"
[ -f "$inverter_config" ] || die "--inverter_config $inverter_config: no such file"
case "$aux_units" in true|false) ;; *) die "--aux_units must be true or false, got '$aux_units'" ;; esac
case "$unit_format" in codebook|onehot) ;; *) die "--unit_format must be codebook or onehot, got '$unit_format'" ;; esac
check_corpus mini local zerospeech2019   # or a registered corpus (local/prepare_corpus.sh)
own_corpus mini local || [ -n "$db_root" ] ||
  die "--corpus $corpus needs --db_root (the corpus folder$([ "$corpus" != zerospeech2019 ] || echo ": 'english' or 'surprise'"))"
if [ "$stage" -eq 0 ] && [ -n "$db_root" ]; then   # the options are valid: the mini folder may be created
  mkdir -p "$db_root"
  db_root=$(cd "$db_root" && pwd)
fi
# default_tag CONFIG: the name of an experiment trained with CONFIG (and --feats_type, --speed_perturb)
default_tag() {
  local t
  t=$(basename "$1" .yaml)
  t=${t#train_}
  # another feature type is another experiment (its input dimension differs): say it in the tag
  case "$t" in *"$feats_type"*) ;; *) [ "$feats_type" = mfcc ] || t=${t}_$feats_type ;; esac
  [ "$speed_perturb" = false ] || t=${t}_sp
  echo "$t"
}
[ -n "$tag" ] || tag=$(default_tag "$train_config")
# the tracked results of this run: results/<corpus> for the corpus's default experiment, else results/<corpus>_<tag>
if [ -z "$results_name" ]; then
  results_name=$corpus
  corpus_default=conf/train_vqvae.yaml
  [ "$corpus" != local ] || corpus_default=conf/tuning/train_vqvae_tr_k128_jitter.yaml
  [ "$tag" = "$(default_tag "$corpus_default")" ] || results_name=${corpus}_$tag
fi
case "$results_name" in */*|.|..) die "--results_name $results_name: a name, not a path" ;; esac
# the threads of each stage's jobs (utils/recipe_common.sh's threads: --num_threads N, or auto: the cores
# over the jobs that run at once), recorded with the run below
train_procs=$nproc
[ "${ngpu:-0}" = 0 ] || train_procs=$ngpu
threads feat_threads features "$nj"            # stage 1: --nj make_feats jobs
threads train_threads training "$train_procs"  # stages 2, 4: one training at a time, --nproc (--ngpu) processes
threads extract_threads units "$nj"            # stage 3: --nj worker processes
threads resynth_threads resynthesis 1          # stage 5: one process
threads score_threads scoring 1                # stage 6: one process at a time (ABX, bitrate, k-means, comparisons)
# every invocation on record (command line as typed, environment, config hashes): stage 6 copies it
# into $results_dir/$results_name/runs.jsonl, the header of RESULTS.md
record_run "$expdir/$tag/runs.jsonl" "$train_config" "$inverter_config" "conf/$feats_type.yaml" conf/mfcc.yaml \
  conf/spectrogram.yaml
show_threads
train_set=train
[ "$speed_perturb" = false ] || train_set=train_sp
feat_conf=conf/$feats_type.yaml
vqvae_dir=$expdir/$tag/vqvae
units_dir=$expdir/$tag/units
inverter_dir=$expdir/$tag/inverter
resynth_dir=$expdir/$tag/resynth/test
score_dir=$expdir/$tag/scores

# time_it FILE CMD...: run CMD, append '<seconds> <date>' to FILE (the wall clock of each run)
# (returns CMD's status, also where set -e is off: in a `time_it ... || handler` list)
time_it() {
  local file=$1 start end rc=0
  shift
  start=$(date +%s)
  "$@" || rc=$?
  [ "$rc" -eq 0 ] || return "$rc"
  end=$(date +%s)
  mkdir -p "$(dirname "$file")"
  echo "$((end - start)) $(date '+%F %T')" >> "$file"
}

if [ "$stage" -le 0 ] && [ "$stop_stage" -ge 0 ]; then
  log 0 "data preparation ($corpus)"
  case "$corpus" in
    mini)
      local/prepare_mini.sh --nj "$nj" --speakers "$mini_speakers" --sentences "$mini_sentences" \
        "${db_root:-db/mini}" "$datadir" ;;
    local)
      local/prepare_local.sh "${db_root:-../../../shared/data}" "$datadir" ;;
    zerospeech2019)
      python local/prepare_zerospeech2019.py "$db_root" "$datadir" ;;
    *)  # a registered corpus: the sets made from its one data dir (and printed)
      local/prepare_corpus.sh --corpus "$corpus" --num_test_speakers "$num_test_speakers" --seed "$seed" \
        ${corpus_opts:+--corpus_opts "$corpus_opts"} "$db_root" "$datadir" ;;
  esac
  for x in train dev voice test; do
    utils/validate_data_dir.sh --no-feats --no-text "$datadir/$x"
  done
  if [ "$speed_perturb" = true ]; then
    log 0 "speed perturbation of the unit set (0.9, 1.0, 1.1) -> $datadir/train_sp"
    utils/perturb_data_dir_speed_3way.sh "$datadir/train" "$datadir/train_sp"
    utils/validate_data_dir.sh --no-feats --no-text "$datadir/train_sp"
  fi
  # ZeroSpeech 2019 ABX task (by context: neighbouring phones), plus a no-context variant with many
  # more triplets (steadier on a small test set).
  if [ -f "$datadir/test/phone_alignments" ]; then
    speechkit-make-abx-items "$datadir/test" "$datadir/test/abx.item"
  fi
  if [ -f "$datadir/test/abx.item" ]; then
    awk 'NR == 1 || /^#/ {print; next} {$5 = "-"; $6 = "-"; print}' "$datadir/test/abx.item" \
      > "$datadir/test/abx_nocontext.item.tmp"
    mv "$datadir/test/abx_nocontext.item.tmp" "$datadir/test/abx_nocontext.item"
  fi
  setup_save "$setup_file" $setup_keys
fi

if [ "$stage" -le 1 ] && [ "$stop_stage" -ge 1 ]; then
  log 1 "features: $feats_type ($train_set dev voice test), mfcc (test, baseline), spectrogram (voice test)"
  # make_dump FEAT_TYPE SET: $dumpdir/FEAT_TYPE/SET = $datadir/SET + features + per-speaker CMVN stats
  make_dump() {
    local type=$1 x=$2 dir=$dumpdir/$1/$2
    utils/copy_data_dir.sh "$datadir/$x" "$dir"
    utils/make_feats.sh --nj "$nj" --num-threads "$feat_threads" --cmd "$train_cmd" --config "conf/$type.yaml" \
      "$dir" "$dir/log" "$dir/data"
    speechkit-compute-cmvn-stats --per-speaker "$dir" "$dir/data"
  }
  [ -f "$datadir/$train_set/utt2spk" ] || die "no $datadir/$train_set (run stage 0 with --speed_perturb $speed_perturb)"
  for x in $train_set dev voice test; do make_dump "$feats_type" "$x"; done
  [ "$feats_type" = mfcc ] || make_dump mfcc test
  for x in voice test; do make_dump spectrogram "$x"; done
fi

if [ "$stage" -le 2 ] && [ "$stop_stage" -ge 2 ]; then
  log 2 "training the VQ-VAE ($train_config, $train_threads thread(s) per process) in $vqvae_dir (log: $vqvae_dir/log/train.log)"
  train_dump=$dumpdir/$feats_type/$train_set
  num_spk=$(wc -l < "$train_dump/spk2utt")
  # the input dimension follows the features (39 for MFCC+deltas, n_mels for log-mel)
  input_dim=$(python -c 'import sys, kaldiio
for _, m in kaldiio.load_scp_sequential(sys.argv[1]): print(m.shape[1]); break' "$train_dump/feats.scp")
  # shellcheck disable=SC2086  # $vqvae_args holds several words
  vq_opts=(--config "$train_config" --data.train_dir "$train_dump" --data.valid_dir "$dumpdir/$feats_type/dev"
           --model.num_speakers "$num_spk" --model.input_dim "$input_dim" --trainer.num_threads "$train_threads" $vqvae_args)
  mkdir -p "$vqvae_dir/log"
  # a small unit set: keep the warm-up inside the planned updates (see local/plan_warmup.py)
  # shellcheck disable=SC2046
  vq_opts+=($(speechkit-train vqvae "${vq_opts[@]}" --print-config > "$vqvae_dir/log/.config.$$" && \
              python local/plan_warmup.py --what "stage 2" "$vqvae_dir/log/.config.$$" "$(wc -l < "$train_dump/utt2spk")"))
  rm -f "$vqvae_dir/log/.config.$$"
  train_job="$train_cmd --num-threads $((train_procs * train_threads))"
  [ "${ngpu:-0}" = 0 ] || train_job="$cuda_cmd --gpu $ngpu"
  # shellcheck disable=SC2086
  time_it "$vqvae_dir/wallclock" $train_job "$vqvae_dir/log/train.log" \
    speechkit-train ${ngpu:+--ngpu "$ngpu"} --nproc "$nproc" vqvae --exp-dir "$vqvae_dir" "${vq_opts[@]}" \
    || { echo "$0: stage 2 failed; the end of $vqvae_dir/log/train.log:" >&2; tail -n 20 "$vqvae_dir/log/train.log" >&2; exit 1; }
  grep -E "training (finished|already finished)" "$vqvae_dir/log/train.log" | tail -n 1 || true
fi

# vqvae_checkpoint: the checkpoint speechkit-extract-units uses (best.pt, else the latest)
vqvae_checkpoint() {
  local d=$vqvae_dir/checkpoints
  if [ -e "$d/best.pt" ]; then echo "$d/best.pt"; else ls -t "$d"/*.pt 2>/dev/null | head -n 1; fi
}

if [ "$stage" -le 3 ] && [ "$stop_stage" -ge 3 ]; then
  log 3 "extracting units ($unit_format) with $vqvae_dir, $nj job(s) of $extract_threads thread(s) (logs: $units_dir/log/)"
  mkdir -p "$units_dir/log"
  # extract SET OUT [OPTIONS]: one $train_cmd job with --nj worker processes
  extract() {
    local x=$1 out=$2
    shift 2
    with_threads "$extract_threads" $train_cmd --num-threads "$((nj * extract_threads))" \
      "$units_dir/log/extract_$(basename "$out").log" \
      speechkit-extract-units --model-dir "$vqvae_dir" --nj "$nj" "$@" "$dumpdir/$feats_type/$x" "$out" \
      || { echo "$0: stage 3 failed, see $units_dir/log/extract_$(basename "$out").log" >&2; exit 1; }
  }
  for x in voice test; do extract "$x" "$units_dir/$x" --unit-format "$unit_format"; done
  if [ "$aux_units" = true ]; then
    extract test "$units_dir/test_aux" --aux --phases "$aux_phases"
  fi
fi

# One inverter per target voice (the recipe's choice: the paper, sec. 5.1, trains "the VQ-VAE codebook and
# inverter" on the voice and unit sets and does not say per voice; the official English data has two voices,
# V001 and V002): with a single voice it is $expdir/$tag/inverter, with several
# $expdir/$tag/inverter_<voice> each, trained on that voice's utterances only.
voice_list() { cut -d' ' -f1 "$datadir/voice/spk2utt"; }
has_voice() { awk -v v="$1" '$1 == v {f = 1} END {exit !f}' "$datadir/voice/spk2utt"; }
# the folder of voice $2 under base $1: the base itself when there is one voice, else <base>_<voice>
per_voice() {
  if [ "$(wc -l < "$datadir/voice/spk2utt")" -eq 1 ]; then echo "$1"; else echo "${1}_$2"; fi
}
inverter_of() { per_voice "$inverter_dir" "$1"; }
resynth_of() { per_voice "$resynth_dir" "$1"; }

if [ "$stage" -le 4 ] && [ "$stop_stage" -ge 4 ]; then
  [ -f "$datadir/voice/spk2utt" ] || die "no $datadir/voice/spk2utt (run stage 0)"
  # The inverter is tied to the VQ-VAE checkpoint whose codebook it inverts: a retrained VQ-VAE
  # retrains it (the stale one is kept in <inverter>.stale).
  ckpt=$(vqvae_checkpoint)
  [ -n "$ckpt" ] || die "no VQ-VAE checkpoint in $vqvae_dir/checkpoints (run stage 2)"
  vq_hash=$(sha256sum "$ckpt" | cut -d' ' -f1)
  # codebook size, code dimension and spectrogram frames per code, from the units of the voice set
  info=$(python - "$units_dir/voice/units.yaml" "$dumpdir/spectrogram/voice/frame_shift" <<'PYEOF'
import sys, yaml
u = yaml.safe_load(open(sys.argv[1]))
spec_shift = float(open(sys.argv[2]).read().split()[0])
ratio = u["frame_shift"] / spec_shift
if abs(ratio - round(ratio)) > 1e-6:
    sys.exit(f"code frame shift {u['frame_shift']} s is not a multiple of the spectrogram's {spec_shift} s")
print(u["codebook_size"], u["codebook_dim"], round(ratio))
PYEOF
)
  read -r K De ratio <<< "$info"
  train_job="$train_cmd --num-threads $((train_procs * train_threads))"
  [ "${ngpu:-0}" = 0 ] || train_job="$cuda_cmd --gpu $ngpu"
  for v in $(voice_list); do
    inv=$(inverter_of "$v")
    log 4 "training the inverter of voice $v ($inverter_config, $train_threads thread(s) per process) in $inv (log: $inv/log/train.log)"
    if [ -d "$inv" ] && [ "$(cat "$inv/vqvae_checkpoint.sha256" 2>/dev/null)" != "$vq_hash" ]; then
      log 4 "the VQ-VAE checkpoint changed since $inv was trained (or it has no record): retraining it"
      rm -rf "$inv.stale"
      mv "$inv" "$inv.stale"
    fi
    mkdir -p "$inv/log"
    codes=$units_dir/voice/codes
    if [ "$inv" != "$inverter_dir" ]; then   # several voices: this voice's utterances only
      codes=$inv/codes
      awk -v v="$v" 'NR == FNR {if ($2 == v) keep[$1] = 1; next} $1 in keep' \
        "$datadir/voice/utt2spk" "$units_dir/voice/codes" > "$codes.tmp"
      mv "$codes.tmp" "$codes"
      [ -s "$codes" ] || die "no codes of voice $v in $units_dir/voice/codes (re-run stage 3)"
    fi
    # shellcheck disable=SC2086
    inv_opts=(--config "$inverter_config" --data.codes "$codes" --data.feats_dir "$dumpdir/spectrogram/voice"
              --data.vqvae_dir "$vqvae_dir" --model.codebook_size "$K" --model.input_dim "$De" --model.upsample_ratio "$ratio"
              --trainer.num_threads "$train_threads" $inverter_args)
    # a small target voice: keep the warm-up inside the planned updates (see local/plan_warmup.py)
    # shellcheck disable=SC2046
    inv_opts+=($(speechkit-train inverter "${inv_opts[@]}" --print-config > "$inv/log/.config.$$" && \
                 python local/plan_warmup.py --what "stage 4" "$inv/log/.config.$$" "$(wc -l < "$codes")"))
    rm -f "$inv/log/.config.$$"
    echo "$vq_hash" > "$inv/vqvae_checkpoint.sha256"
    echo "$ckpt" > "$inv/vqvae_checkpoint"
    # shellcheck disable=SC2086
    time_it "$inv/wallclock" $train_job "$inv/log/train.log" \
      speechkit-train ${ngpu:+--ngpu "$ngpu"} --nproc "$nproc" inverter --exp-dir "$inv" "${inv_opts[@]}" \
      || { echo "$0: stage 4 failed; the end of $inv/log/train.log:" >&2; tail -n 20 "$inv/log/train.log" >&2; exit 1; }
    grep -E "training (finished|already finished)" "$inv/log/train.log" | tail -n 1 || true
  done
fi

if [ "$stage" -le 5 ] && [ "$stop_stage" -ge 5 ]; then
  [ -f "$datadir/voice/spk2utt" ] || die "no $datadir/voice/spk2utt (run stage 0)"
  default_voice=${voice:-$(awk 'NR == 1 {print $1}' "$datadir/voice/spk2utt")}
  has_voice "$default_voice" || die "--voice $default_voice: not a speaker of $datadir/voice"
  ckpt=$(vqvae_checkpoint)
  # the utterances to resynthesize, as '<utt> <voice>' lines: the official list (zerospeech2019:
  # synthesis.txt, whose voice column picks the inverter; a line without one takes --voice), else the
  # first --num_resynth test utterances in --voice
  mkdir -p "$expdir/$tag/resynth"
  jobs_file=$expdir/$tag/resynth/synthesis_list
  if [ -f "$datadir/test/synthesis_list" ]; then
    awk -v d="$default_voice" 'NF {print $1, (NF > 1 ? $2 : d)}' "$datadir/test/synthesis_list" > "$jobs_file.tmp"
  else
    n=$num_resynth
    [ "$n" -gt 0 ] || n=$(wc -l < "$units_dir/test/codes")
    cut -d' ' -f1 "$units_dir/test/codes" | LC_ALL=C sort | awk -v n="$n" -v d="$default_voice" 'NR <= n {print $1, d}' > "$jobs_file.tmp"
  fi
  mv "$jobs_file.tmp" "$jobs_file"
  for v in $(cut -d' ' -f2 "$jobs_file" | sort -u); do
    has_voice "$v" || die "$jobs_file: voice '$v' is not a speaker of $datadir/voice"
    inv=$(inverter_of "$v")
    out=$(resynth_of "$v")
    if [ -z "$ckpt" ] || [ "$(sha256sum "$ckpt" | cut -d' ' -f1)" != "$(cat "$inv/vqvae_checkpoint.sha256" 2>/dev/null)" ]; then
      echo "$0: $inv was not trained on the current VQ-VAE checkpoint ${ckpt:-(none)}: re-run stage 4" >&2
      exit 1
    fi
    log 5 "resynthesizing $(awk -v v="$v" '$2 == v' "$jobs_file" | wc -l) test utterances in the voice of $v -> $out"
    awk -v v="$v" '$2 == v {print $1}' "$jobs_file" > "$expdir/$tag/resynth/utts.$v"
    with_threads "$resynth_threads" speechkit-resynthesize --inverter-dir "$inv" --codes "$units_dir/test/codes" --out-dir "$out" \
      --reference-dir "$dumpdir/spectrogram/test" --speaker "$v" --utt-list "$expdir/$tag/resynth/utts.$v"
  done
  if [ -f "$datadir/test/synthesis_list" ]; then
    # the ZeroSpeech 2019 submission folder: the test units (*.txt) and each synthesized utterance as
    # <voice>_<id>.wav (the test file <speaker>_<id> in the voice; required_filelist.txt's names)
    sub=$expdir/$tag/submission/test
    rm -rf "$sub.tmp"
    mkdir -p "$sub.tmp"
    cp "$units_dir"/test/*.txt "$sub.tmp/"
    while read -r utt v; do
      cp "$(resynth_of "$v")/$utt.wav" "$sub.tmp/${v}_${utt#*_}.wav"
    done < "$jobs_file"
    rm -rf "$sub"
    mv "$sub.tmp" "$sub"
    log 5 "submission folder: $sub ($(find "$sub" -name '*.txt' | wc -l) unit files, $(find "$sub" -name '*.wav' | wc -l) wavs)"
  fi
fi

if [ "$stage" -le 6 ] && [ "$stop_stage" -ge 6 ]; then
  log 6 "scoring ABX and bitrate ($score_threads thread(s))"
  score() { with_threads "$score_threads" local/score.sh --bootstrap "$abx_bootstrap" "$datadir" "$1" "$2"; }
  score "$units_dir/test" "$score_dir"
  if [ "$aux_units" = true ]; then
    score "$units_dir/test_aux" "$expdir/$tag/scores_aux"
  fi
  # References (once per test set): MFCC+deltas, and the VQ-VAE's actual input (per-speaker CMVN).
  if [ ! -f "$expdir/baseline_mfcc/scores/bitrate.json" ] || \
     [ "$dumpdir/mfcc/test/feats.scp" -nt "$expdir/baseline_mfcc/scores/bitrate.json" ]; then
    log 6 "baseline: MFCC+deltas"
    score "$dumpdir/mfcc/test" "$expdir/baseline_mfcc/scores"
  fi
  base=$expdir/baseline_${feats_type}_cmvn
  if [ ! -f "$base/scores/bitrate.json" ] || [ "$dumpdir/$feats_type/test/feats.scp" -nt "$base/scores/bitrate.json" ]; then
    log 6 "baseline: $feats_type + per-speaker CMVN (the VQ-VAE's input)"
    with_threads "$score_threads" python local/apply_cmvn.py "$dumpdir/$feats_type/test" "$base/feats"
    score "$base/feats" "$base/scores"
  fi
  if [ "$kmeans_k" -gt 0 ]; then
    stride=$(awk '$1 == "stride:" {print $2}' "$units_dir/test/units.yaml")
    ref=$expdir/kmeans_${feats_type}_k${kmeans_k}_s${stride}
    if [ ! -f "$ref/scores/bitrate.json" ] || [ "$dumpdir/$feats_type/test/feats.scp" -nt "$ref/scores/bitrate.json" ]; then
      log 6 "reference: k-means units of the $feats_type input (K=$kmeans_k, stride $stride)"
      with_threads "$score_threads" python local/kmeans_units.py --k "$kmeans_k" --stride "$stride" "$dumpdir/$feats_type/train" \
        "$dumpdir/$feats_type/test" "$ref/units/test"
      score "$ref/units/test" "$ref/scores"
    fi
  fi
  # Paired comparisons on the same speaker resamples (local/compare_abx.py): the codes against MFCC, the
  # continuous z against the VQ-VAE's CMVN'd input (with two test speakers every usable resample is the
  # original pair, so there is no interval to draw: skipped)
  comparisons=()
  refs=(--reference baseline_mfcc --reference "baseline_${feats_type}_cmvn")
  if [ "$abx_bootstrap" -gt 0 ] && [ -f "$score_dir/abx_nocontext_across.json" ]; then
    if [ "$(wc -l < "$datadir/test/spk2utt")" -ge 3 ]; then
      comparisons=("$tag=baseline_mfcc")
      [ "$aux_units" = false ] || comparisons+=("$tag (z)=baseline_${feats_type}_cmvn")
      log 6 "paired comparisons: ${comparisons[*]}"
      with_threads "$score_threads" python local/compare_abx.py --expdir "$expdir" --bootstrap "$abx_bootstrap" \
        --out "$expdir/$tag/comparisons.md" "${comparisons[@]}" > "$expdir/$tag/comparisons.log" 2>&1 \
        || die "stage 6: local/compare_abx.py failed, see $expdir/$tag/comparisons.log"
    else
      log 6 "paired comparisons skipped: $(wc -l < "$datadir/test/spk2utt") test speakers" \
        "(a paired interval needs 3 or more)"
      rm -f "$expdir/$tag/comparisons.md" "$expdir/$tag/comparisons.json"
    fi
  fi
  [ "$kmeans_k" -eq 0 ] || refs+=(--reference "kmeans_${feats_type}_k${kmeans_k}_s${stride}")
  # every experiment of $expdir in one untracked report (exp/RESULTS.md, with the plot and the wav links) ...
  python local/make_results.py --expdir "$expdir" --datadir "$datadir" --corpus "$corpus" --out "$expdir/RESULTS.md"
  log 6 "wrote $expdir/RESULTS.md"
  # ... and this run's score files copied into $results_dir/$results_name/, the page rendered from $results_dir only
  python local/make_results.py --collect "$results_dir/$results_name" --expdir "$expdir" --datadir "$datadir" \
    --corpus "$corpus" --tag "$tag" "${refs[@]}"
  python local/make_results.py --render "$(dirname "$results_dir")/RESULTS.md" --results "$results_dir"
  log 6 "wrote $results_dir/$results_name/ and $(dirname "$results_dir")/RESULTS.md"
fi
