#!/usr/bin/env bash
# egs/tcstar_salad: SALAD, a Transformer-encoder linguistic-to-acoustic decoder, against the LSTM
# MUSA-RNN baseline, small and big, with forced durations, on WORLD vocoder features.
#   Pascual, Bonafonte, Serra, "Self-Attention Linguistic-Acoustic Decoder", IberSPEECH 2018
#   (authors' code: santi-pdp/musa_tts). TC-STAR is not public: any single-speaker corpus with
#   transcripts stands in for its speakers (see README.md).
#
#   ./run.sh                                    # embedded default: one espeak-ng voice of 'mini' (db/mini)
#   ./run.sh --db_root ../../../shared/data     # real speech: 2 msc_malayalam crowd speakers + story
#   ./run.sh --corpus ljspeech --db_root /data/LJSpeech-1.1
#   ./run.sh --corpus commonvoice --db_root /data/cv/en   # any registered corpus (speechkit-prepare-corpus --help):
#                                               # its --num_speakers speakers with the most utterances
#   ./run.sh --stage 5 --models "salad_small"   # later stages reuse what stage 0 prepared
#
# Stages (each safe to re-run: finished work is kept, training resumes from its last checkpoint):
#   0  data      data/<spk>/{train,dev,test} per speaker (100/15/15), data/speakers, data/.setup
#   1  features  WORLD features (conf/world.yaml: 40 mcep + lf0 + V/UV + 1 bap = 43 dims, 5 ms)
#   2  g2p       phones (espeak-ng) with stress/syllable/word info: data/<spk>/<set>_phn
#   3  align     forced aligner trained on each speaker's train set, applied to every set:
#                exp/<spk>/aligner, exp/<spk>/align/<set>/phone_alignments
#   4  labels    frame-level linguistic label vectors, front end fitted on train:
#                exp/<spk>/frontend, dump/<spk>/<set>/{labels.scp,feats.scp}
#   5  train     the --models per speaker (speechkit-train salad|musa_rnn): exp/<spk>/<model>
#   6  test      synthesize the test set with forced durations, score MCD / F0 RMSE / V/UV in both
#                conventions (speechkit-score-mcd --convention speechkit|authors):
#                exp/<spk>/<model>/synth/test, exp/<spk>/<model>/scores/test{,_authors,_with_silence}.{txt,json}
#   7  latency   CPU inference time vs utterance length (1-35 s) of the four models, RANSAC fit:
#                exp/latency/{latency.json,latency.md,latency.png} (+ exp/latency_stepwise with
#                --latency_stepwise_max_seconds)
#   8  results   local/make_results.py --collect: the score files and exp/runs_<corpus>.jsonl copied
#                into results/<corpus>/, then RESULTS.md rendered from results/ alone
#
# Every invocation is appended to exp/runs_<corpus>.jsonl (command line, environment, config hashes).
# Threads (--num_threads auto): the cores spread over what a stage runs at once: the --nj feature,
# alignment and synthesis jobs cores / nj each, the --train_jobs trainings cores / train_jobs each (one
# training: every core), scoring every core; stage 7 times one thread by design. The log's "threads"
# line and runs.jsonl say what each stage got.
set -euo pipefail

# ------------------------------------------------------------------------------------- options
stage=0
stop_stage=100
nj=2                 # parallel jobs (features, G2P, alignment, synthesis)
num_threads=auto     # threads of each job: auto = the cores (path.sh) / the jobs a stage runs at once
                     # (one training: every core); N = N each (1: the setting for a machine busy with other work)
ngpu=                # training GPUs (speechkit-train --ngpu); empty = trainer.device
nproc=1              # training processes on the CPU (DDP with gloo)
corpus=              # mini | msc | ljspeech | a registered corpus (local/prepare_corpus.sh); default: mini without
                     # --db_root, else msc or ljspeech by layout (or mini where it was synthesized before); a
                     # --db_root that does not exist is an error
corpus_opts=         # a registered corpus: its speechkit-prepare-corpus options, e.g. "--table train.tsv"
num_speakers=1       # a registered corpus: the speakers with the most utterances, each split 100/15/15
db_root=             # corpus location: the shared data folder (msc), an LJSpeech root, or where mini is synthesized
                     # (default db/mini; a new folder with --corpus mini: --corpus mini --db_root db/mymini)
num_crowd=2          # msc: crowd speakers with the most recordings
mini_sentences=150   # mini: sentences of the one voice (split 100/15/15)
lang=en              # ljspeech, or a registered corpus without utt2lang: the language of the transcripts (G2P)
seed=1               # data split seed
speakers=            # stages 1-8 for these speakers only (default: every speaker of data/speakers)
models=              # conf/train_<model>.yaml each; default: the paper's four (musa_rnn_small salad_small
                     # musa_rnn_big salad_big), the two small ones for mini (the big ones cost ~10x more)
max_epochs=          # trainer.max_epochs (empty: the config's 300 with early stopping, patience 20; mini: 40)
salad_args=          # extra speechkit-train overrides for the SALAD models only (mini: the CPU schedule below)
rnn_args=            # extra speechkit-train overrides for the MUSA-RNN models only (mini: 4 streams, lr 4e-3, below)
train_jobs=2         # trainings run at once (each with cores / train_jobs threads; --train_jobs 1: one at a
                     # time, every core each)
train_args=          # extra speechkit-train overrides for every model, e.g. "--trainer.patience 10"
num_wavs=4           # stage 6: test utterances synthesized to wav (+ spectrogram PNG) per model
latency_max_seconds=35   # stage 7: longest generated utterance (s)
latency_repeats=1        # stage 7: timings per length (every timing is fitted)
latency_stepwise_max_seconds=   # stage 7: also time the RNNs stepped one frame per call, 1 s to this
                                # many s (exp/latency_stepwise; empty: not measured)
results_dir=results  # stage 8: the tracked results: results/<corpus>/ (score files, runs.jsonl), RESULTS.md
datadir=data         # Kaldi data dirs (and .setup)
dumpdir=dump         # training-ready dirs: labels.scp + feats.scp
expdir=exp           # aligners, front ends, models, syntheses, scores, RESULTS.md

help_message="Usage: $0 [--stage N] [--stop_stage N] [--db_root DIR] [--corpus mini|msc|ljspeech|NAME] [--models \"...\"]
       [--corpus_opts '...'] [--num_speakers N]
       [--max_epochs N] [--train_args '...'] [--nj N] [--num_threads auto|N] [--train_jobs N] [--ngpu N] [--nproc N] ...
(see the header of $0 for every option)"
setup_keys="corpus db_root num_crowd mini_sentences lang seed corpus_opts num_speakers"
. ./path.sh
. ./cmd.sh
. utils/parse_options.sh
[ $# -eq 0 ] || { echo "$help_message" >&2; exit 1; }
. utils/recipe_common.sh   # die, check_stages, log, check_db_root, guess_corpus
check_stages 8
check_num_threads   # --num_threads auto|N (the threads of each stage: below)

# ------------------------------------------------------------------ the setup stage 0 prepared
# Stage 0 writes $datadir/.setup (corpus, db_root and the data options); later stages read it, so
# `./run.sh --stage 3` continues what `./run.sh --db_root ... --stop_stage 2` prepared, and an
# option given later (whatever its value) that contradicts it is an error instead of a silent switch
# to another corpus.
. utils/stage_setup.sh
setup_file=$datadir/.setup
if [ "$stage" -gt 0 ]; then
  setup_restore "$setup_file" $setup_keys
else
  check_db_root
  # mini only without --db_root (or where mini was synthesized before)
  guess_corpus ljspeech "an LJSpeech root (metadata.csv)" metadata.csv
  case "$corpus" in
    mini) db_root=${db_root:-db/mini} ;;
    *)  # msc, ljspeech, or a registered corpus (local/prepare_corpus.sh)
      check_corpus mini msc ljspeech
      [ -n "$db_root" ] || die "--corpus $corpus needs --db_root" ;;
  esac
  mkdir -p "$db_root" "$datadir"
  db_root=$(cd "$db_root" && pwd)
fi
# the threads of each stage's jobs (utils/recipe_common.sh's threads: --num_threads N, or auto: the cores
# over the jobs that run at once), recorded with the run below
[[ "$train_jobs" =~ ^[1-9][0-9]*$ ]] || die "--train_jobs must be a whole number >= 1, got '$train_jobs'"
train_procs=$nproc
[ "${ngpu:-0}" = 0 ] || train_procs=$ngpu
[[ "$train_procs" =~ ^[1-9][0-9]*$ ]] || die "--nproc $nproc, --ngpu $ngpu: training processes must be a whole number >= 1"
threads feat_threads features "$nj"                           # stage 1: --nj make_feats jobs
threads align_threads alignment "$nj"                         # stage 3: --nj worker processes
threads train_threads training "$((train_jobs * train_procs))"  # stage 5: --train_jobs trainings x --nproc
threads synth_threads synthesis "$nj"                         # stage 6: --nj worker processes
threads score_threads scoring 1                               # stage 6: one process
# every command that produced results is on record, one file per corpus (the setups share $expdir)
record_run "$expdir/runs_$corpus.jsonl"
show_threads

# ------------------------------------------------------------------------------------ stage 0
if [ "$stage" -le 0 ] && [ "$stop_stage" -ge 0 ]; then
  log 0 "data preparation: corpus $corpus from $db_root"
  case "$corpus" in
    mini) local/prepare_mini.sh --nj "$nj" --sentences "$mini_sentences" --seed "$seed" "$db_root" "$datadir" ;;
    msc)
      msc=$db_root
      [ -d "$msc/msc_malayalam" ] && msc=$msc/msc_malayalam
      local/prepare_msc.sh --num_crowd "$num_crowd" --seed "$seed" "$msc" "$datadir" ;;
    ljspeech) local/prepare_ljspeech.sh --seed "$seed" --lang "$lang" "$db_root" "$datadir" ;;
    *)  # a registered corpus: the --num_speakers speakers with the most utterances (printed)
      local/prepare_corpus.sh --corpus "$corpus" --num_speakers "$num_speakers" --seed "$seed" --lang "$lang" \
        ${corpus_opts:+--corpus_opts "$corpus_opts"} "$db_root" "$datadir" ;;
  esac
  setup_save "$setup_file" $setup_keys
  log 0 "speakers: $(tr '\n' ' ' < "$datadir/speakers"); setup in $setup_file"
fi

[ -s "$datadir/speakers" ] || die "$datadir/speakers: missing or empty: run stage 0"
spks=$(cat "$datadir/speakers")
if [ -n "$speakers" ]; then
  for spk in $speakers; do
    grep -qxF -- "$spk" "$datadir/speakers" || die "--speakers: '$spk' is not a speaker of $datadir/speakers ($(tr '\n' ' ' < "$datadir/speakers"))"
  done
  spks=$speakers
fi
sets="train dev test"

# ------------------------------------------------------------------------------------ stage 1
if [ "$stage" -le 1 ] && [ "$stop_stage" -ge 1 ]; then
  log 1 "WORLD features (conf/world.yaml) of $sets"
  for spk in $spks; do
    for x in $sets; do
      utils/make_feats.sh --nj "$nj" --num-threads "$feat_threads" --cmd "$train_cmd" --config conf/world.yaml \
        "$datadir/$spk/$x" "$expdir/$spk/make_world/$x" "$datadir/$spk/world"
    done
  done
fi

# ------------------------------------------------------------------------------------ stage 2
if [ "$stage" -le 2 ] && [ "$stop_stage" -ge 2 ]; then
  log 2 "G2P (espeak-ng): $datadir/<spk>/<set>_phn"
  for spk in $spks; do
    for x in $sets; do
      speechkit-g2p --nj "$nj" "$datadir/$spk/$x" "$datadir/$spk/${x}_phn"
    done
  done
fi

# ------------------------------------------------------------------------------------ stage 3
if [ "$stage" -le 3 ] && [ "$stop_stage" -ge 3 ]; then
  log 3 "forced alignment: aligner trained on each speaker's train set"
  for spk in $spks; do
    with_threads "$align_threads" speechkit-align --nj "$nj" "$datadir/$spk/train_phn" "$expdir/$spk/aligner"
    for x in $sets; do
      if [ "$x" = train ]; then
        mkdir -p "$expdir/$spk/align/train"
        cp "$expdir/$spk/aligner/phone_alignments" "$expdir/$spk/align/train/phone_alignments"
      else
        with_threads "$align_threads" speechkit-align --nj "$nj" --model-dir "$expdir/$spk/aligner" \
          "$datadir/$spk/${x}_phn" "$expdir/$spk/align/$x"
      fi
    done
  done
fi

# ------------------------------------------------------------------------------------ stage 4
if [ "$stage" -le 4 ] && [ "$stop_stage" -ge 4 ]; then
  log 4 "label vectors: $dumpdir/<spk>/<set>/{labels.scp,feats.scp}"
  for spk in $spks; do
    for x in $sets; do
      src=$datadir/$spk/${x}_phn
      # the features of stage 1 as they are now (a re-run of stage 1 after stage 2 must not leave
      # the phone dir with the copies stage 2 took)
      for f in feats.scp utt2num_frames frame_shift feats.yaml; do
        cp "$datadir/$spk/$x/$f" "$src/$f"
      done
      fit=""; [ "$x" = train ] && fit="--fit"
      # shellcheck disable=SC2086
      speechkit-make-labels $fit --frontend-dir "$expdir/$spk/frontend" "$src" \
        "$expdir/$spk/align/$x/phone_alignments" "$expdir/$spk/labels/$x"
      # the dump dir: the phone data dir of the utterances that have labels (an utterance the
      # aligner could not align has none) + labels.scp + the alignments (for silence masking)
      rm -rf "$dumpdir/$spk/$x"
      utils/subset_data_dir.sh --utt-list "$expdir/$spk/labels/$x/labels.scp" "$src" "$dumpdir/$spk/$x"
      cp "$expdir/$spk/labels/$x/labels.scp" "$expdir/$spk/labels/$x/label_dim" "$dumpdir/$spk/$x/"
      utils/filter_scp.pl "$dumpdir/$spk/$x/utt2spk" "$expdir/$spk/align/$x/phone_alignments" \
        > "$dumpdir/$spk/$x/phone_alignments"
    done
  done
fi

# ------------------------------------------------------------------------------------ stage 5
if [ "$corpus" = mini ]; then
  # The paper's schedule (sec. 3.3: 300 epochs of batches of 32 streams x 120 frames; SALAD: Noam
  # with warmup w = 4000 updates, scale 1) is far beyond the 8 updates per epoch of the embedded corpus.
  # Its CPU budget: 40 epochs, and settings chosen on dev MCD (local/dev_tuning.py,
  # results/mini/analysis/dev_tuning.md; README, deviations):
  #   both models: 4 streams (63 updates per epoch, 2520 in all) over the same frames;
  #   MUSA-RNN: Adam at 4e-3 (the paper's 1e-3, 2e-3 and 8e-3 were worse on dev);
  #   SALAD: w = 256, a tenth of its updates, with the Noam scale 4.096 (peak 2.3e-2 at update 256,
  #   7.2e-3 at 2520; the paper's scale 1 at w = 4000 peaks at 1.4e-3, which reached 5.01 dB here);
  #   the embedding scaled by sqrt(H) before the positions are added, as Vaswani et al. sec. 3.4
  #   (unscaled, the position code is ~5x the label embedding and SALAD stays near the training mean);
  #   dropout 0.1 in the FFN and after the positions (paper 0.5) on 2.5 min of speech.
  max_epochs=${max_epochs:-40}
  salad_args=${salad_args:---data.num_streams 4 --trainer.warmup_steps 256 --trainer.lr 4.096 --model.scale_embedding true --model.ff_dropout 0.1 --model.position_dropout 0.1}
  rnn_args=${rnn_args:---data.num_streams 4 --trainer.lr 4e-3}
  models=${models:-musa_rnn_small salad_small}
fi
models=${models:-musa_rnn_small salad_small musa_rnn_big salad_big}
# train_one SPK MODEL: one speechkit-train run through $train_cmd (or $cuda_cmd with --ngpu)
train_one() {
  local spk=$1 m=$2 task opts=""
  task=${m%_small}; task=${task%_big}
  [ -n "$max_epochs" ] && opts="$opts --trainer.max_epochs $max_epochs"
  [ "$task" = salad ] && opts="$opts $salad_args"
  [ "$task" = musa_rnn ] && opts="$opts $rnn_args"
  local train_run="$train_cmd --num-threads $((train_procs * train_threads))"
  [ "${ngpu:-0}" -gt 0 ] && train_run="$cuda_cmd --gpu $ngpu"
  # shellcheck disable=SC2086  # $train_run / $opts / $train_args hold several words
  $train_run "$expdir/$spk/$m/log/train.log" \
    speechkit-train ${ngpu:+--ngpu "$ngpu"} --nproc "$nproc" "$task" --config "conf/train_$m.yaml" \
      --exp-dir "$expdir/$spk/$m" --data.train_dir "$dumpdir/$spk/train" --data.valid_dir "$dumpdir/$spk/dev" \
      --trainer.num_threads "$train_threads" $opts $train_args
}
if [ "$stage" -le 5 ] && [ "$stop_stage" -ge 5 ]; then
  for m in $models; do
    [ -f "conf/train_$m.yaml" ] || die "--models: conf/train_$m.yaml: no such file"
  done
  log 5 "training ${models// /, } for each speaker, $train_jobs at a time, $train_threads thread(s) each${max_epochs:+, at most $max_epochs epochs}${salad_args:+, SALAD: $salad_args}${rnn_args:+, MUSA-RNN: $rnn_args}"
  running=0 failed=0
  for spk in $spks; do
    for m in $models; do
      if [ "$running" -ge "$train_jobs" ]; then wait -n || failed=$((failed + 1)); running=$((running - 1)); fi
      log 5 "training $m for $spk: $expdir/$spk/$m (log: $expdir/$spk/$m/log/train.log)"
      train_one "$spk" "$m" &
      running=$((running + 1))
    done
  done
  while [ "$running" -gt 0 ]; do wait -n || failed=$((failed + 1)); running=$((running - 1)); done
  [ "$failed" -eq 0 ] || die "$failed training run(s) failed: see $expdir/<speaker>/<model>/log/train.log"
fi

# ------------------------------------------------------------------------------------ stage 6
if [ "$stage" -le 6 ] && [ "$stop_stage" -ge 6 ]; then
  for spk in $spks; do
    for m in $models; do
      e=$expdir/$spk/$m
      log 6 "synthesizing and scoring the test set of $spk with $m"
      with_threads "$synth_threads" speechkit-tts-synthesize --nj "$nj" --num-wavs "$num_wavs" --model-dir "$e" "$dumpdir/$spk/test" "$e/synth/test"
      mkdir -p "$e/scores"
      with_threads "$score_threads" speechkit-score-mcd --mask-silence "$dumpdir/$spk/test/phone_alignments" \
        --json "$e/scores/test.json" "$dumpdir/$spk/test" "$e/synth/test" > "$e/scores/test.txt"
      # the SALAD authors' convention (c0 included, F0 over every frame, silence zeroed), beside the paper's
      with_threads "$score_threads" speechkit-score-mcd --convention authors --mask-silence "$dumpdir/$spk/test/phone_alignments" \
        --json "$e/scores/test_authors.json" "$dumpdir/$spk/test" "$e/synth/test" > "$e/scores/test_authors.txt"
      with_threads "$score_threads" speechkit-score-mcd --json "$e/scores/test_with_silence.json" \
        "$dumpdir/$spk/test" "$e/synth/test" > "$e/scores/test_with_silence.txt"
      log 6 "$spk $m: $(tail -n 1 "$e/scores/test.txt")"
    done
  done
fi

# ------------------------------------------------------------------------------------ stage 7
if [ "$stage" -le 7 ] && [ "$stop_stage" -ge 7 ]; then
  log 7 "CPU latency of the four models (one thread), 1-$latency_max_seconds s"
  spk=$(head -n 1 "$datadir/speakers")
  python local/measure_latency.py --out-dir "$expdir/latency" --config-dir conf \
    --input-dim "$(cat "$dumpdir/$spk/train/label_dim")" --max-seconds "$latency_max_seconds" \
    --repeats "$latency_repeats"
  if [ -n "$latency_stepwise_max_seconds" ]; then
    log 7 "CPU latency of the RNNs stepped one frame per call, 1-$latency_stepwise_max_seconds s"
    python local/measure_latency.py --out-dir "$expdir/latency_stepwise" --config-dir conf \
      --input-dim "$(cat "$dumpdir/$spk/train/label_dim")" --max-seconds "$latency_stepwise_max_seconds" \
      --repeats 1 --models musa_rnn_small,musa_rnn_big --rnn-mode stepwise
  fi
fi

# ------------------------------------------------------------------------------------ stage 8
if [ "$stage" -le 8 ] && [ "$stop_stage" -ge 8 ]; then
  log 8 "results: $results_dir/$corpus/ and $results_dir/../RESULTS.md"
  python local/make_results.py --collect "$corpus" --models "$models" --speakers "$spks" --data-dir "$datadir" \
    --dump-dir "$dumpdir" --exp-dir "$expdir" --results-dir "$results_dir"
fi
log end "done"
