#!/usr/bin/env bash
# egs/vctk_continual: continual speaker adaptation of a multi-speaker TTS model, judged by a speaker
# verifier on synthesized speech.
#   Hemati, Borth, "Continual Speaker Adaptation for Text-to-Speech Synthesis" (Interspeech 2021; no
#   public code).
# Base TTS (--tts_model): the duration-informed MUSA-RNN (default) or SALAD decoder of egs/tcstar_salad,
# conditioned on a GE2E speaker vector, WORLD features and synthesis; or the paper's Tacotron 2 (phones
# -> log-mel with attention, Griffin-Lim; for a GPU, see README.md). Why the default is not SALAD:
# README.md, "Deviations". Strategies (the paper's, sec. 3): joint training (jt, upper bound: at
# every episode, theta_init trained on all continual speakers seen so far), sequential adaptation
# (sa, lower bound), EWC, experience replay (er), ER with knowledge distillation, the model's own
# outputs as buffer targets (er_kd), ER with buffer replication (er_br); and the recipe's own
# cumulative variant of JT (jt_cumulative: all seen speakers, fine-tuned from the previous episode).
#
#   ./run.sh                                  # embedded default: 8 espeak-ng voices of 'mini' (4 + 4)
#   ./run.sh --db_root ../../../shared/data   # real speech: msc_malayalam (9 continual crowd speakers)
#   ./run.sh --corpus vctk --db_root /data/VCTK-Corpus-0.92 [--ljspeech_root /data/LJSpeech-1.1]
#   ./run.sh --corpus commonvoice --db_root /data/cv/de   # any registered corpus (speechkit-prepare-corpus --help)
#   ./run.sh --stage 7 --strategies "er"      # later stages reuse what stage 0 prepared
#   ./run.sh --stage 7 --stop_stage 8 --ewc_lambda_grid "1e2 1e4 1e6 1e8 1e10"   # EWC's lambda chosen on dev
#   python local/make_results.py --render RESULTS.md --results results   # the page, from results/ only
#
# Stages (each safe to re-run: finished work is kept, training and scoring resume):
#   0  data      data/{all,train,dev,test}, data/{pretrain,continual}_speakers, data/.setup
#   1  features  WORLD features (conf/world.yaml: 43 dims, 5 ms); tacotron2: log-mel (conf/logmel.yaml)
#                of data/<set>_mel
#   2  g2p       phones (espeak-ng) with stress/syllable/word info: data/<set>_phn
#   3  align     one forced aligner on the training audio of every speaker: exp/aligner, exp/align/<set>
#                (tacotron2, which learns its own alignment: skipped)
#   4  labels    frame-level label vectors (front end fitted on train): dump/{pretrain,continual}/<set>;
#                tacotron2: phones + log-mel, dump/phn_mel/{pretrain,continual}/<set>
#   5  speakers  GE2E embeddings (resemblyzer, frozen): speaker vectors = mean of each speaker's
#                training utterances (exp/embed/train/spk_embeddings.scp); the verifier's speakers =
#                the continual ones + --verifier_pretrain pre-training ones (data/verifier_speakers);
#                its data = the vocoded ground truth of the verifier's speakers (WORLD copy synthesis:
#                exp/embed/{train,test}_world; tacotron2: Griffin-Lim from log-mel, exp/embed/{train,test}_gl);
#                the verifier's held-out accuracy: exp/embed/verifier.txt (tacotron2: verifier_gl.txt)
#   6  pretrain  theta_init: --tts_model on the pre-training split (exp/<tts_model>/pretrain)
#   7  continual each run (strategy, speaker order): speechkit-train-continual, then
#                speechkit-score-continual after every episode: exp/<tts_model>/continual/<run>/order<K>/{episode_*,eval};
#                order K = row K of the Williams design over the C-sorted continual speakers (plan.json: the order).
#                With --ewc_lambda_grid: the runs ewc_l<lambda> instead, scored on the dev utterances
#                (<run>/order<K>/eval_dev), and the lambda chosen on dev: exp/<tts_model>/continual/ewc_grid.json
#   8  results   the score files of this setup copied into <results_dir>/<results_name>/ (tracked:
#                results/mini/, results/msc/), then RESULTS.md rendered from <results_dir> only (RA/FG
#                per strategy and episode, mean and spread over orders; ER buffer sizes, the paper's
#                Table 3; paired comparisons; the EWC lambda grid on dev, if run) with its figures in
#                <results_dir>/<name>/figures/
set -euo pipefail

# ------------------------------------------------------------------------------------- options
stage=0
stop_stage=100
nj=2                 # parallel jobs (features, G2P, alignment, embeddings)
align_args=          # extra speechkit-align options for training the aligner, e.g. "--tri-leaves 0" (monophones)
world_config=conf/world.yaml   # WORLD feature config (conf/world_dio.yaml: DIO F0, about 6x faster than Harvest)
num_threads=auto     # threads of each job: auto = the cores (path.sh) / the jobs a stage runs at once (the
                     # pre-training: every core); N = N each (1: the setting for a machine busy with other work)
corpus=              # mini | msc | vctk | a registered corpus (local/prepare_corpus.sh); default: mini without
                     # --db_root, else msc or vctk by layout (or mini where it was synthesized before); a
                     # --db_root that does not exist is an error
corpus_opts=         # a registered corpus: its speechkit-prepare-corpus options, e.g. "--table train.tsv"
db_root=             # corpus location (default for mini: db/mini, synthesized there; a new folder with
                     # --corpus mini: --corpus mini --db_root db/mymini)
ljspeech_root=       # vctk: LJSpeech as the pre-training split's single-speaker set (as the paper)
num_continual=       # continual speakers (mini: the last 4 of 8 voices; vctk: 20 drawn from --seed, as the paper;
                     # a registered corpus: half of those with enough recordings, at most 20, drawn from --seed)
continual_speakers=  # vctk or a registered corpus: the continual speakers by name, comma-separated (e.g.
                     # p225,p226), instead of drawing them
mini_speakers=8      # mini: espeak-ng voices (1-8)
mini_sentences=60    # mini: sentences per voice
seed=1               # data split seed
num_test=5           # test utterances per speaker (the paper synthesizes 5 per seen speaker)
num_dev=3            # dev utterances per speaker (each episode's early stopping)
tts_model=musa_rnn   # base TTS: musa_rnn | salad | tacotron2 (conf/pretrain_<tts_model>.yaml); README: why not salad
strategies="jt jt_cumulative sa ewc er er_kd er_br"   # the runs of the strategy comparison / Figure 3
er_buffer_sizes=auto # the paper's Table 3: extra ER runs with these N_B ('' = none; auto: "1 2 5 10", mini: none)
verifier_pretrain=auto  # stage 5: pre-training speakers among the verifier's classes beside the continual ones:
                     # all (every one with >= 10 training utterances), or N (the N of them with the most);
                     # auto: all for mini and msc (4 each), 0 for vctk (<= 20 classes, as the paper)
buffer_size=5        # N_B of er / er_kd in the strategy comparison
br_buffer_size=1     # er_br: N_B ...
br_replicate=10      # ... and K (the paper's ER-BR setting: buffer 1, K = 10)
ewc_lambda=          # EWC's lambda (default: conf/continual.yaml's; another value names the run ewc_l<lambda>)
ewc_lambda_grid=     # EWC's lambda chosen on dev, e.g. "1e2 1e4 1e6 1e8 1e10": stage 7 then trains ewc_l<lambda> for
                     # every lambda and order instead of --strategies, scores every episode on the dev utterances of
                     # the speakers seen so far (<run>/order<K>/eval_dev; no test evaluation) and writes the choice
                     # (highest mean final dev RA; local/ewc_grid.py) to exp/<tts_model>/continual/ewc_grid.json,
                     # which stage 8 copies into the results; conf/continual.yaml's ewc_lambda is left as it is
orders="1 2 3"       # speaker orders: K = row K of the Williams design over the C-sorted continual speakers (rows
                     # 1..n for n speakers: distinct permutations, no two beginning with the same speaker; odd n:
                     # rows n+1..2n reverse them); one run per order in <run>/order<K>, K also its training seed
continual_epochs=    # at most this many epochs per episode (default: conf/continual.yaml's 10; mini: 6)
train_jobs=2         # continual runs trained at once (each with cores / train_jobs threads)
continual_args=      # extra speechkit-train-continual overrides, e.g. "--trainer.max_epochs 10"
pretrain_args=       # extra speechkit-train overrides for the pre-training
datadir=data
dumpdir=dump
expdir=exp
results_dir=results  # stage 8: the tracked results, <results_dir>/<results_name>/ (score JSONs, runs.jsonl), and the
                     # page made from every run there, RESULTS.md beside <results_dir> (local/make_results.py)
results_name=        # default: the corpus (mini, msc, vctk), <corpus>_<tts_model> for another base TTS

help_message="Usage: $0 [--stage N] [--stop_stage N] [--db_root DIR] [--corpus mini|msc|vctk|NAME] [--corpus_opts '...']
       [--strategies '...']
       [--orders '1 2 3'] [--er_buffer_sizes '1 2 5 10'] [--ewc_lambda_grid '1e2 1e4 1e6 1e8 1e10']
       [--continual_args '...'] [--nj N] [--num_threads auto|N] [--train_jobs N]
       [--results_dir DIR] [--results_name NAME] ...
(see the header of $0 for every option)"
setup_keys="corpus db_root ljspeech_root num_continual continual_speakers mini_speakers mini_sentences seed num_test num_dev world_config align_args corpus_opts"
. ./path.sh
. ./cmd.sh
. utils/parse_options.sh
[ $# -eq 0 ] || { echo "$help_message" >&2; exit 1; }
. utils/recipe_common.sh   # die, check_stages, log, check_db_root, guess_corpus
check_stages 8
check_num_threads   # --num_threads auto|N (the threads of each stage: below)

# ------------------------------------------------------------------ the setup stage 0 prepared
# Stage 0 writes $datadir/.setup; later stages read it, so `./run.sh --stage 5` continues what
# `./run.sh --db_root ... --stop_stage 4` prepared, and an option given later (whatever its value)
# that contradicts it is an error.
. utils/stage_setup.sh
setup_file=$datadir/.setup
if [ "$stage" -gt 0 ]; then
  setup_restore "$setup_file" $setup_keys
else
  check_db_root
  # mini only without --db_root (or where mini was synthesized before)
  guess_corpus vctk "a VCTK root (wav48*/)" wav48_silence_trimmed/ wav48/
  case "$corpus" in
    mini) db_root=${db_root:-db/mini}; num_continual=${num_continual:-4} ;;
    msc) [ -n "$db_root" ] || die "--corpus msc needs --db_root" ;;
    vctk) [ -n "$db_root" ] || die "--corpus vctk needs --db_root"; num_continual=${num_continual:-20} ;;
    *)  # a registered corpus (local/prepare_corpus.sh)
      check_corpus mini msc vctk
      [ -n "$db_root" ] || die "--corpus $corpus needs --db_root" ;;
  esac
  [ -z "$ljspeech_root" ] || [ "$corpus" = vctk ] || die "--ljspeech_root is for --corpus vctk"
  [ -z "$continual_speakers" ] || ! own_corpus mini msc ||
    die "--continual_speakers is for --corpus vctk or a registered corpus"
  [ -z "$ljspeech_root" ] || [ -d "$ljspeech_root" ] || die "--ljspeech_root $ljspeech_root: no such directory"
  [ -z "$ljspeech_root" ] || ljspeech_root=$(cd "$ljspeech_root" && pwd)
  [ -f "$world_config" ] || die "--world_config $world_config: no such file"
  mkdir -p "$db_root" "$datadir"
  db_root=$(cd "$db_root" && pwd)
fi

case "$tts_model" in   # what the base TTS reads, and the vocoder of its syntheses (and of the verifier's data)
  salad|musa_rnn) vocoder=world; in_dump=$dumpdir; verifier_txt=$expdir/embed/verifier.txt ;;
  tacotron2) vocoder=gl; in_dump=$dumpdir/phn_mel; verifier_txt=$expdir/embed/verifier_gl.txt ;;
  *) die "--tts_model: unknown '$tts_model' (musa_rnn, salad, tacotron2)" ;;
esac
case "$verifier_pretrain" in
  auto) [ "$corpus" = vctk ] && verifier_pretrain=0 || verifier_pretrain=all ;;
  all) ;;
  *) [[ "$verifier_pretrain" =~ ^[0-9]+$ ]] || die "--verifier_pretrain $verifier_pretrain: all, auto or a number" ;;
esac
# The embedded corpus's CPU budget (README): 6 epochs per episode, no buffer-size sweep unless asked
if [ "$corpus" = mini ]; then
  continual_epochs=${continual_epochs:-6}
  [ "$er_buffer_sizes" = auto ] && er_buffer_sizes=""
fi
[ "$er_buffer_sizes" = auto ] && er_buffer_sizes="1 2 5 10"
# speaker orders: distinct positive row numbers (stage 7 checks them against the design's rows)
for order in $orders; do
  [[ "$order" =~ ^[1-9][0-9]*$ ]] || die "--orders: '$order' is not a row number (1, 2, ...) of the speaker-order design"
done
[ -n "$orders" ] || die "--orders: no order"
dup=$(printf '%s\n' $orders | sort | uniq -d | tr '\n' ' ')
[ -z "$dup" ] || die "--orders: ${dup% } twice"
# run names: jt, jt_cumulative, sa, ewc (ewc_l<lambda>), er_b<N_B>, er_kd_b<N_B>, er_br_b<N_B>_k<K>; the ER
# buffer sweep adds er_b<N>; --ewc_lambda_grid: only ewc_l<lambda>, scored on dev
runs=""
eval_split=test
if [ -n "$ewc_lambda_grid" ]; then
  [ -z "$ewc_lambda" ] || die "--ewc_lambda $ewc_lambda and --ewc_lambda_grid: give one (the grid chooses lambda on dev)"
  for l in $ewc_lambda_grid; do
    [[ "$l" =~ ^[0-9]+([.][0-9]*)?([eE][+-]?[0-9]+)?$ ]] || die "--ewc_lambda_grid: '$l' is not a number (e.g. 1e4)"
    [[ "$l" =~ ^0*([.]0*)?([eE].*)?$ ]] && die "--ewc_lambda_grid: '$l' must be > 0"
    runs="$runs ewc_l$l"
  done
  strategies="" er_buffer_sizes="" eval_split=dev
fi
for s in $strategies; do
  case "$s" in
    jt|jt_cumulative|sa) runs="$runs $s" ;;
    ewc) runs="$runs ewc${ewc_lambda:+_l$ewc_lambda}" ;;
    er) runs="$runs er_b$buffer_size" ;;
    er_kd) runs="$runs er_kd_b$buffer_size" ;;
    er_br) runs="$runs er_br_b${br_buffer_size}_k$br_replicate" ;;
    *) die "--strategies: unknown strategy '$s' (jt jt_cumulative sa ewc er er_kd er_br)" ;;
  esac
done
for b in $er_buffer_sizes; do
  case " $runs " in *" er_b$b "*) ;; *) runs="$runs er_b$b" ;; esac
done
if [ -z "$results_name" ]; then
  results_name=$corpus
  [ "$tts_model" = musa_rnn ] || results_name=${corpus}_$tts_model
fi
case "$results_name" in */*|.|..|"") die "--results_name $results_name: a name, not a path" ;; esac
# the threads of each stage's jobs (utils/recipe_common.sh's threads: --num_threads N, or auto: the cores
# over the jobs that run at once; docs/scale_out.md, "Threads"), recorded with the run below
[[ "$train_jobs" =~ ^[1-9][0-9]*$ ]] || die "--train_jobs must be a whole number >= 1, got '$train_jobs'"
threads feat_threads features "$nj"         # stage 1: --nj make_feats jobs
threads align_threads alignment "$nj"       # stage 3: --nj worker processes
threads embed_threads speakers "$nj"        # stage 5: --nj embedding / copy-synthesis workers
threads verifier_threads verifier 1         # stage 5: one process
threads pretrain_threads pretraining 1      # stage 6: one training
threads train_threads continual "$train_jobs"  # stage 7: --train_jobs runs at once (training, then scoring)
# this invocation (command line, environment, config hashes) on record: stage 8 copies it into
# $results_dir/$results_name/runs.jsonl, the header of RESULTS.md
record_run "$expdir/runs.jsonl"
show_threads

# ------------------------------------------------------------------------------------ stage 0
if [ "$stage" -le 0 ] && [ "$stop_stage" -ge 0 ]; then
  log 0 "data preparation: corpus $corpus from $db_root"
  split_opts="--seed $seed --num_test $num_test --num_dev $num_dev"
  case "$corpus" in
    # shellcheck disable=SC2086
    mini) local/prepare_mini.sh --nj "$nj" --num_speakers "$mini_speakers" --sentences "$mini_sentences" --num_continual "$num_continual" \
            $split_opts "$db_root" "$datadir" ;;
    msc)
      msc=$db_root
      [ -d "$msc/msc_malayalam" ] && msc=$msc/msc_malayalam
      # shellcheck disable=SC2086
      local/prepare_msc.sh $split_opts "$msc" "$datadir" ;;
    # shellcheck disable=SC2086
    vctk) local/prepare_vctk.sh --num_continual "$num_continual" ${ljspeech_root:+--ljspeech_root "$ljspeech_root"} \
            ${continual_speakers:+--continual_speakers "$continual_speakers"} \
            $split_opts "$db_root" "$datadir" ;;
    # shellcheck disable=SC2086
    *) local/prepare_corpus.sh --corpus "$corpus" ${corpus_opts:+--corpus_opts "$corpus_opts"} \
         ${num_continual:+--num_continual "$num_continual"} ${continual_speakers:+--continual_speakers "$continual_speakers"} \
         $split_opts "$db_root" "$datadir" ;;
  esac
  setup_save "$setup_file" $setup_keys
  log 0 "pre-training speakers: $(wc -l < "$datadir/pretrain_speakers"); continual speakers: $(tr '\n' ' ' < "$datadir/continual_speakers")"
fi

for f in pretrain_speakers continual_speakers; do
  [ -s "$datadir/$f" ] || die "$datadir/$f: missing or empty: run stage 0"
done
sets="train dev test"

# ------------------------------------------------------------------------------------ stage 1
if [ "$stage" -le 1 ] && [ "$stop_stage" -ge 1 ]; then
  log 1 "WORLD features ($world_config) of $sets"
  for x in $sets; do
    utils/make_feats.sh --nj "$nj" --num-threads "$feat_threads" --cmd "$train_cmd" --config "$world_config" \
      "$datadir/$x" "$expdir/make_world/$x" "$datadir/world"
  done
  if [ "$tts_model" = tacotron2 ]; then
    log 1 "log-mel features (conf/logmel.yaml) of $sets: $datadir/<set>_mel"
    for x in $sets; do
      utils/copy_data_dir.sh "$datadir/$x" "$datadir/${x}_mel"
      utils/make_feats.sh --nj "$nj" --num-threads "$feat_threads" --cmd "$train_cmd" --config conf/logmel.yaml \
        "$datadir/${x}_mel" "$expdir/make_logmel/$x" "$datadir/logmel"
    done
  fi
fi

# ------------------------------------------------------------------------------------ stage 2
if [ "$stage" -le 2 ] && [ "$stop_stage" -ge 2 ]; then
  log 2 "G2P (espeak-ng): $datadir/<set>_phn"
  for x in $sets; do
    speechkit-g2p --nj "$nj" "$datadir/$x" "$datadir/${x}_phn"
  done
fi

# ------------------------------------------------------------------------------------ stage 3
if [ "$stage" -le 3 ] && [ "$stop_stage" -ge 3 ] && [ "$tts_model" = tacotron2 ]; then
  log 3 "no forced alignment: tacotron2 learns its own (attention)"
elif [ "$stage" -le 3 ] && [ "$stop_stage" -ge 3 ]; then
  log 3 "forced alignment: one aligner trained on the training utterances of every speaker"
  # shellcheck disable=SC2086
  with_threads "$align_threads" speechkit-align --nj "$nj" $align_args "$datadir/train_phn" "$expdir/aligner"
  mkdir -p "$expdir/align/train"
  cp "$expdir/aligner/phone_alignments" "$expdir/align/train/phone_alignments"
  for x in dev test; do
    with_threads "$align_threads" speechkit-align --nj "$nj" --model-dir "$expdir/aligner" "$datadir/${x}_phn" "$expdir/align/$x"
  done
fi

# ------------------------------------------------------------------------------------ stage 4
if [ "$stage" -le 4 ] && [ "$stop_stage" -ge 4 ] && [ "$tts_model" = tacotron2 ]; then
  log 4 "tacotron2 inputs and targets: phones + log-mel, $in_dump/{pretrain,continual}/<set>"
  missing=$(for x in $sets; do [ -s "$datadir/${x}_mel/feats.scp" ] || printf '%s ' "$datadir/${x}_mel/feats.scp"; done)
  [ -z "$missing" ] || die "missing: ${missing% }: run stage 1 with --tts_model tacotron2"
  for x in $sets; do
    src=$datadir/${x}_phn
    rm -rf "$in_dump/all/$x"
    utils/subset_data_dir.sh --utt-list "$datadir/${x}_mel/feats.scp" "$src" "$in_dump/all/$x"
    cp "$datadir/${x}_mel/frame_shift" "$datadir/${x}_mel/feats.yaml" "$in_dump/all/$x/"
    for f in feats.scp utt2num_frames; do  # the log-mel, for the utterances that have phones
      utils/filter_scp.pl "$in_dump/all/$x/utt2spk" "$datadir/${x}_mel/$f" > "$in_dump/all/$x/$f"
    done
    for split in pretrain continual; do
      [ "$split" = pretrain ] && [ "$x" = test ] && continue
      rm -rf "$in_dump/$split/$x"
      utils/subset_data_dir.sh --spk-list "$datadir/${split}_speakers" "$in_dump/all/$x" "$in_dump/$split/$x"
    done
  done
elif [ "$stage" -le 4 ] && [ "$stop_stage" -ge 4 ]; then
  log 4 "label vectors: $dumpdir/{pretrain,continual}/<set>/{labels.scp,feats.scp}"
  for x in $sets; do
    src=$datadir/${x}_phn
    for f in feats.scp utt2num_frames frame_shift feats.yaml; do
      cp "$datadir/$x/$f" "$src/$f"
    done
    fit=""; [ "$x" = train ] && fit="--fit"
    # shellcheck disable=SC2086
    speechkit-make-labels $fit --frontend-dir "$expdir/frontend" "$src" \
      "$expdir/align/$x/phone_alignments" "$expdir/labels/$x"
    # the utterances that have labels (an utterance the aligner could not align has none)
    rm -rf "$dumpdir/all/$x"
    utils/subset_data_dir.sh --utt-list "$expdir/labels/$x/labels.scp" "$src" "$dumpdir/all/$x"
    cp "$expdir/labels/$x/labels.scp" "$expdir/labels/$x/label_dim" "$dumpdir/all/$x/"
    utils/filter_scp.pl "$dumpdir/all/$x/utt2spk" "$expdir/align/$x/phone_alignments" > "$dumpdir/all/$x/phone_alignments"
    for split in pretrain continual; do
      [ "$split" = pretrain ] && [ "$x" = test ] && continue
      rm -rf "$dumpdir/$split/$x"
      utils/subset_data_dir.sh --spk-list "$datadir/${split}_speakers" "$dumpdir/all/$x" "$dumpdir/$split/$x"
      cp "$dumpdir/all/$x/label_dim" "$dumpdir/$split/$x/"
      for f in labels.scp phone_alignments; do
        utils/filter_scp.pl "$dumpdir/$split/$x/utt2spk" "$dumpdir/all/$x/$f" > "$dumpdir/$split/$x/$f"
      done
    done
  done
fi

# ------------------------------------------------------------------------------------ stage 5
# The verifier's speakers: the continual ones and --verifier_pretrain of the pre-training speakers
# with at least 10 training utterances (all: their classes keep episode 1 from being a one-class
# problem; 0, vctk's default: the paper's <= 20 classes, episode 1 then scores 100 % by construction).
verifier_speakers=$datadir/verifier_speakers
if [ "$stage" -le 5 ] && [ "$stop_stage" -ge 5 ]; then
  log 5 "speaker embeddings (GE2E): speaker vectors of every speaker from its raw training audio"
  with_threads "$embed_threads" speechkit-embed-speakers --nj "$nj" "$datadir/train" "$expdir/embed/train"
  # the pre-training speakers with >= 10 training utterances, most utterances first (ties: C order)
  awk 'NR == FNR {keep[$1]; next} ($1 in keep) && NF - 1 >= 10 {print NF - 1, $1}' "$datadir/pretrain_speakers" \
    "$datadir/train/spk2utt" | LC_ALL=C sort -k1,1nr -k2,2 | awk '{print $2}' > "$datadir/verifier_extra_speakers.all"
  if [ "$verifier_pretrain" = all ]; then
    LC_ALL=C sort "$datadir/verifier_extra_speakers.all" > "$datadir/verifier_extra_speakers"
  else
    head -n "$verifier_pretrain" "$datadir/verifier_extra_speakers.all" | LC_ALL=C sort > "$datadir/verifier_extra_speakers"
  fi
  rm "$datadir/verifier_extra_speakers.all"
  log 5 "the verifier's classes: the continual speakers seen so far + $(wc -l < "$datadir/verifier_extra_speakers") pre-training speakers (--verifier_pretrain $verifier_pretrain)"
  LC_ALL=C sort -u "$datadir/verifier_extra_speakers" "$datadir/continual_speakers" > "$verifier_speakers"
  for x in train test; do
    log 5 "the verifier's data: $vocoder copy synthesis of the $x utterances of $(wc -l < "$verifier_speakers") speakers"
    rm -rf "$datadir/${x}_verifier"
    if [ "$vocoder" = gl ]; then src=$in_dump/all/$x; else src=$datadir/$x; fi
    utils/subset_data_dir.sh --spk-list "$verifier_speakers" "$src" "$datadir/${x}_verifier"
    with_threads "$embed_threads" speechkit-vocode --nj "$nj" --spectrograms 2 "$datadir/${x}_verifier" "$datadir/${x}_$vocoder"
    with_threads "$embed_threads" speechkit-embed-speakers --nj "$nj" "$datadir/${x}_$vocoder" "$expdir/embed/${x}_$vocoder"
  done
  with_threads "$verifier_threads" python local/verifier_accuracy.py "$expdir/embed/train_$vocoder" "$expdir/embed/test_$vocoder" \
    | tee "$verifier_txt"
fi
spk_scp=$expdir/embed/train/spk_embeddings.scp
mexp=$expdir/$tts_model   # the base model's pre-training, continual runs and results

# ------------------------------------------------------------------------------------ stage 6
if [ "$stage" -le 6 ] && [ "$stop_stage" -ge 6 ]; then
  log 6 "pre-training theta_init: $tts_model with speaker vectors on $(wc -l < "$datadir/pretrain_speakers") speakers, $pretrain_threads thread(s) (log: $mexp/pretrain/log/train.log)"
  [ -s "$spk_scp" ] || die "$spk_scp: missing: run stage 5"
  [ -s "$in_dump/pretrain/train/feats.scp" ] || die "$in_dump/pretrain/train: no $tts_model training data: run stages 1-5 with --tts_model $tts_model"
  # shellcheck disable=SC2086
  $train_cmd --num-threads "$pretrain_threads" "$mexp/pretrain/log/train.log" \
    speechkit-train "$tts_model" --config "conf/pretrain_$tts_model.yaml" --exp-dir "$mexp/pretrain" \
      --data.train_dir "$in_dump/pretrain/train" --data.valid_dir "$in_dump/pretrain/dev" \
      --data.speaker_embeddings "$spk_scp" --trainer.num_threads "$pretrain_threads" $pretrain_args
  log 6 "$(grep -h 'epoch .* done' "$mexp/pretrain/log/train.log" | tail -n 1 | sed 's/^.*INFO [^:]*: //' || true)"
fi

# ------------------------------------------------------------------------------------ stage 7
run_opts() {  # the speechkit-train-continual options of a run name
  case "$1" in
    jt|jt_cumulative|sa) echo "--strategy $1" ;;
    ewc) echo "--strategy ewc" ;;
    ewc_l*) echo "--strategy ewc --ewc-lambda ${1#ewc_l}" ;;
    er_kd_b*) echo "--strategy er_kd --buffer-size ${1#er_kd_b}" ;;
    er_br_b*) b=${1#er_br_b}; echo "--strategy er_br --buffer-size ${b%_k*} --replicate ${b#*_k}" ;;
    er_b*) echo "--strategy er --buffer-size ${1#er_b}" ;;
  esac
}
continual_one() {  # RUN ORDER SPLIT: train every episode, then score each with the verifier on the utterances of
                   # SPLIT: test (<run>/order<K>/eval) or dev (<run>/order<K>/eval_dev: the EWC grid; no test eval)
  local run=$1 order=$2 split=$3 e=$mexp/continual/$1/order$2
  local score_log=$e/log/score.log score_opts=()
  if [ "$split" = dev ]; then
    score_log=$e/log/score_dev.log
    score_opts=(--eval-dir "$e/eval_dev" --num-utts "$num_dev" --no-plots)
  fi
  # the speaker order: row $order of the Williams design over the continual speakers; $order also seeds replay
  # shellcheck disable=SC2046,SC2086
  $train_cmd --num-threads "$train_threads" "$e/log/train.log" \
    speechkit-train-continual --config conf/continual.yaml --exp-dir "$e" $(run_opts "$run") \
      --order "$order" --seed "$order" \
      --init-dir "$mexp/pretrain" --train-dir "$in_dump/continual/train" \
      --valid-dir "$in_dump/continual/dev" --speaker-embeddings "$spk_scp" \
      --pretrain-dir "$in_dump/pretrain/train" --trainer.num_threads "$train_threads" \
      ${continual_epochs:+--trainer.max_epochs "$continual_epochs"} $continual_args &&
  with_threads "$train_threads" $train_cmd --num-threads "$train_threads" "$score_log" \
    speechkit-score-continual --test-dir "$in_dump/continual/$split" --gt-train "$expdir/embed/train_$vocoder" \
      --gt-test "$expdir/embed/test_$vocoder" ${extra_opt[@]+"${extra_opt[@]}"} \
      ${score_opts[@]+"${score_opts[@]}"} "$e" &&
  log 7 "$run order $order ($split): $(grep -h 'final RA' "$score_log" | tail -n 1 | sed 's/^.*: final/final/')"
}
if [ "$stage" -le 7 ] && [ "$stop_stage" -ge 7 ]; then
  [ -f "$mexp/pretrain/checkpoints/best.pt" ] || die "$mexp/pretrain: no trained model: run stage 6"
  [ -f "$datadir/verifier_extra_speakers" ] || die "$datadir/verifier_extra_speakers: missing: run stage 5"
  extra_opt=()   # none (--verifier_pretrain 0): the verifier's classes are the continual speakers seen so far
  [ -s "$datadir/verifier_extra_speakers" ] && extra_opt=(--extra-speakers "$datadir/verifier_extra_speakers")
  # the orders: rows of the Williams design over the n continual speakers (n rows; odd n: 2n, the last n reversed)
  n_cont=$(wc -l < "$datadir/continual_speakers")
  design_rows=$n_cont
  [ $((n_cont % 2)) -eq 1 ] && [ "$n_cont" -gt 1 ] && design_rows=$((2 * n_cont))
  for order in $orders; do
    [ "$order" -le "$design_rows" ] ||
      die "--orders: $order is not a row of the Williams design over the $n_cont continual speakers (rows 1-$design_rows)"
  done
  # shellcheck disable=SC2086
  n_orders=$(echo $orders | wc -w)
  [ "$n_orders" -le "$n_cont" ] ||
    log 7 "note: $n_orders orders of $n_cont speakers: some orders begin with the same speaker (rows beyond $n_cont)"
  log 7 "continual runs of $tts_model:$runs; speaker orders (design rows): $orders; scored on $eval_split; $train_jobs at a time, $train_threads thread(s) each (logs: $mexp/continual/<run>/order<K>/log/)"
  running=0 failed=0
  for run in $runs; do
    for order in $orders; do
      if [ "$running" -ge "$train_jobs" ]; then wait -n || failed=$((failed + 1)); running=$((running - 1)); fi
      continual_one "$run" "$order" "$eval_split" &
      running=$((running + 1))
    done
  done
  while [ "$running" -gt 0 ]; do wait -n || failed=$((failed + 1)); running=$((running - 1)); done
  [ "$failed" -eq 0 ] || die "$failed continual run(s) failed: see $mexp/continual/<run>/order<K>/log/{train,score}.log"
  if [ -n "$ewc_lambda_grid" ]; then
    # the choice reads only <run>/order<K>/eval_dev/scores.json (the dev utterances), never the test eval/
    log 7 "EWC's lambda chosen on dev over $n_orders orders: $mexp/continual/ewc_grid.json"
    python local/ewc_grid.py --continual-dir "$mexp/continual" --lambdas "$ewc_lambda_grid" --orders "$orders" \
      --out "$mexp/continual/ewc_grid.json"
  fi
fi

# ------------------------------------------------------------------------------------ stage 8
if [ "$stage" -le 8 ] && [ "$stop_stage" -ge 8 ]; then
  # the score files of every scored run of $mexp/continual (all its orders) copied into
  # $results_dir/$results_name/, then the page rendered from $results_dir only
  python local/make_results.py --collect "$results_dir/$results_name" --datadir "$datadir" --expdir "$expdir" \
    --tts-model "$tts_model" --corpus "$corpus" --buffer-size "$buffer_size" --verifier "$verifier_txt"
  python local/make_results.py --render "$(dirname "$results_dir")/RESULTS.md" --results "$results_dir"
  log 8 "wrote $results_dir/$results_name/ and $(dirname "$results_dir")/RESULTS.md"
fi
log end "done"
