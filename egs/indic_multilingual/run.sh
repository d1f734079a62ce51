#!/usr/bin/env bash
# egs/indic_multilingual: streaming multilingual RNN-T with multiple softmax layers, integrated LID
# and LID-free decoding with early switch-off.
#   Joshi, Das, Sun, Mehta, Li, Gong, "Multiple Softmax Architecture for Streaming Multilingual
#   End-to-End ASR Systems", Interspeech 2021.
#
#   ./run.sh                                    # embedded default: espeak-ng 'mini' corpus (en hi ta gu)
#   ./run.sh --db_root ../../../shared/data     # real data: Hindi, Malayalam, English (see README.md)
#   ./run.sh --setup mucs --db_root /data/mucs --local_prep local/prepare_mucs.sh   # your own corpora
#   ./run.sh --corpus commonvoice --db_root /data/cv   # any registered corpus (speechkit-prepare-corpus --help):
#                                               # data/commonvoice, split by speaker per language
#   ./run.sh --stage 3 --stop_stage 3 --variants "multisoftmax multisoftmax_lid"   # the setup stage 0 prepared
#   ./run.sh --stage 3 --variants multisoftmax --restart true   # a changed config: the old run moves aside
#
# Stages (each safe to re-run: finished work is kept, training resumes from its last checkpoint):
#   0  data      Kaldi data dirs data/<setup>/{train,dev,test} with utt2lang (mini: dev and test are
#                the training voices saying unseen sentences, test_unseen_voice a voice never heard;
#                real and --corpus NAME: speaker-disjoint); the language ids checked; data/.setup records
#                the setup (the corpus, --speed_perturb, --train_config, --test_sets, ...)
#   1  features  80-dim log-mel every 10 ms (conf/logmel.yaml), global CMVN stats of train
#                (--speed_perturb true: of train_sp, train with its 0.9/1.1 speed copies)
#   2  units     per-language graphemes (+ B- word-begin prefix) and their union (speechkit-make-units)
#   3  train     the systems of --variants, --train_jobs at a time (speechkit-train rnnt)
#   4  decode    each system's blank penalty and checkpoint (chosen on dev when --blank_penalties or
#                --avg has several values); oracle-language decoding of every test set; LID-free
#                decoding for the LID systems; multisoftmax_lid's early switch-off operating point chosen
#                on dev (--switch_off_grid, --switch_off_margin) and decoded once on every test set; the
#                switch-off sweeps on the first test set as an analysis, not used to choose
#                (--switch_off_test_sweep) (speechkit-asr-decode)
#   5  score     WER and CER per language and averaged, WERR vs the monolingual models, LID accuracy
#   6  results   the run's score files copied to results/<setup>/ (tracked) and RESULTS.md rendered from
#                results/ (local/make_results.py; its section printed)
#
# Systems (--variants; 'mono' and 'finetune' expand to one system per language):
#   mono               one RNN-T per language (variant multisoftmax with one language)
#   vanilla            one softmax over the union of the languages' units, no language input
#   onehot             vanilla + language one-hot appended to every encoder input frame
#   multisoftmax       shared encoder and prediction network, a joint network/softmax per language
#   multisoftmax_lsp   multisoftmax + a prediction network per language (paper, Table 2's LSP row)
#   multisoftmax_lid   multisoftmax + an LID head on the encoder (frame-level cross-entropy)
#   multisoftmax_lsp_lid  both: a prediction network per language and the LID head (drawn in the
#                      paper's Figure 2, not evaluated there: the recipe's own extension)
#   finetune           multisoftmax fine-tuned to each language (needs multisoftmax trained first)
#   finetune_onehot    the one-hot model cut to each language and fine-tuned (ft_onehot_<lang>;
#                      needs onehot trained first; paper, Table 3)
# Every training parameter is in the YAML config (--train_config; defaults conf/train_mini.yaml or
# conf/train_real.yaml); --train_opts adds speechkit-train overrides to every system and
# --finetune_opts to the fine-tuning runs.
set -euo pipefail

# ------------------------------------------------------------------------------------- options
stage=0
stop_stage=100
datadir=data           # data/<setup>/ and data/.setup (the setup stage 0 prepared, read by stages 1-6)
nj=2                   # parallel jobs for feature extraction and decoding
num_threads=auto       # threads of each job: auto = the cores (path.sh) / the jobs a stage runs at once (docs/
                       # scale_out.md, "Threads"); N = N each (1: the setting for a machine busy with other work)
ngpu=                  # training GPUs: 0 = CPU, N = N processes on N GPUs via $cuda_cmd (DDP); empty = trainer.device
nproc=1                # training processes on the CPU (DDP with gloo; speechkit-train --nproc)
db_root=               # real corpora (hindi_noa, msc_malayalam, timit_sample, fsdd); empty = mini
corpus=                # a registered corpus (speechkit-prepare-corpus --help) in --db_root, prepared by
                       # local/prepare_corpus.sh (each language split by speaker, 10 % dev, 10 % test);
                       # mini = the embedded corpus; empty: mini, or with --db_root the real setup
corpus_opts=           # --corpus: its speechkit-prepare-corpus options, e.g. "--locales hi,ta"
setup=                 # data/<setup>, exp/<setup>: default 'mini', the --corpus name, or 'real' with --db_root
results_name=          # stage 6: results/<results_name> (default: the setup name, e.g. mini; with --unit other than
                       # char_wb: <setup>_<unit>): an analysis run (another budget, seed) beside the tracked one
local_prep=            # data preparation '<script> [options] <db_root> data/<setup>' (default: local/prepare_real.sh)
unit=char_wb           # output units: char_wb (graphemes with B- word-begin prefix, the paper) | char | bpe
bpe_vocab_size=150     # --unit bpe: units per language, blank and <unk> included
train_config=          # default: conf/train_mini.yaml (mini) or conf/train_real.yaml (--db_root)
variants="mono vanilla onehot multisoftmax multisoftmax_lsp multisoftmax_lid multisoftmax_lsp_lid finetune finetune_onehot"
train_opts=            # extra speechkit-train overrides for every system, e.g. "--trainer.max_epochs 5"
restart=false          # true: stage 3 moves each system's existing exp dir (a run with another config,
                       # its decodes and scores) to <system>.backup/<N>/ and trains it from scratch
                       # (speechkit-train --resume false); nothing is deleted
finetune_opts="--trainer.max_epochs 5 --trainer.lr 5e-4 --trainer.scheduler none --trainer.warmup_steps 0"
                       # fine-tuning overrides (after --train_config and --train_opts)
avg=0                  # checkpoint decoded: 0 = best.pt (lowest dev loss; the results in README.md); N >= 2 =
                       # the mean of each system's last N epoch checkpoints (speechkit-average-checkpoints ->
                       # checkpoints/avg<N>.pt; stage 3 then keeps them: trainer.keep_last = the largest N).
                       # Several values ("0 5"): each system's is the one of lowest dev CER, each decoded on
                       # dev at every --blank_penalties value (decode_dev_avg<N>_bp<P>); the choice in
                       # <system>/checkpoint_avg.json, beside blank_penalty.json (local/pick_blank_penalty.py)
search=beam            # beam (modified beam search, one symbol per frame) | greedy
beam=8                 # --search beam: beam width
length_norm=false      # --search beam: final hypothesis by log P / (1 + symbols) (icefall's default);
                       # false (log P) for the results in README.md
chunk_frames=32        # streaming chunk in feature frames (results do not depend on it; RTF does)
decode_opts=           # extra speechkit-asr-decode options for every decoding, e.g. "--device auto --batch-size 16"
switch_off_grid=both   # early switch-off sweeps of multisoftmax_lid (first test set): gap | posterior | both | none
                       # gap: the paper's rule (section 6.3, eq. 1); posterior: the recipe's own variant,
                       # not in the paper. Older spellings: recipe (= gap), paper (= posterior)
switch_off_taus="0 10 30"            # the paper's rule: tau values, encoder frames of 30 ms (the paper's unit)
switch_off_thresholds="2 5 10 20"    # the paper's rule: s_th values, nats below the best running language's
                                     # cumulative LID log-posterior s_l(t) (eq. 1). The paper's Table 7 values:
                                     # --switch_off_taus "1000 100 30 10" --switch_off_thresholds "0.2 0.5"
posterior_switch_off_taus="inf 1000 100 30 10"  # the recipe's posterior variant: tau in ms (Table 7's column
                                     # header read literally; the paper's text counts tau in frames), inf = no switch-off
posterior_switch_off_thresholds="inf 0.5 0.2"  # its s_th on the running average LID posterior (inf = no
                                     # switch-off); a pair with an inf is the plain LID-free row
switch_off_margin=1.3  # the operating point of each switch-off rule is chosen on dev: the lowest dev T_avg
                       # (eq. 2) among the settings of its grid whose dev WER is at most this many points
                       # above LID-free decoding without switch-off (1.3: what the paper's singled-out
                       # setting costs in Table 7, tau 30 / s_th 0.5: WER 21.84 -> 23.14); no setting within
                       # it: no switch-off. <system>/switch_off.json (the paper's rule) and
                       # switch_off_posterior.json (the variant) record it (local/pick_switch_off.py); the
                       # test sets are decoded once at it (decode_<set>_lidfree_switchoff[_posterior])
switch_off_test_sweep=true  # true: also decode the grids on the first test set (RESULTS.md Table 7, an
                       # analysis: sweep on test, not used to choose); false: the dev sweep only
paper_switch_off_taus=               # older name of --posterior_switch_off_taus (kept: it set the posterior variant)
paper_switch_off_thresholds=         # older name of --posterior_switch_off_thresholds
test_sets=             # data sets decoded and scored; default: mini "test test_unseen_voice", else "test"
speed_perturb=         # true: train on data/<setup>/train_sp = train + its speed 0.9 and 1.1 copies
                       # (Kaldi's 3-way speed perturbation, utils/perturb_data_dir_speed_3way.sh; stage 1);
                       # default: true with --db_root, false for mini
blank_penalties=       # blank penalty in nats (speechkit-asr-decode --blank-penalty); with several values,
                       # each system's penalty is the one of lowest CER on dev (stage 4 decodes dev with
                       # each; <system>/blank_penalty records the choice); default: mini "0",
                       # with --db_root "0 1 1.5 2"
train_jobs=2           # trainings run at once in stage 3 (each with cores / train_jobs threads; the fine-tuned
                       # systems start when their base model is trained)
mini_num_speakers=6    # mini corpus: voices; the last one is never heard in training (test_unseen_voice)
mini_sentences=150     # mini corpus: sentences per voice and language
mini_languages=en,hi,ta,gu
mini_test_utts=30      # mini corpus: utterances per language in test and in test_unseen_voice
mini_dev_utts=15       # mini corpus: utterances per language in dev
help_message="Usage: $0 [--stage N] [--stop_stage N] [--db_root DIR] [--corpus NAME] [--variants \"...\"] [--unit char_wb|char|bpe] [--nj N] [--num_threads auto|N] ...
(see the header of $0 for every option)"
setup_keys="setup db_root local_prep mini_num_speakers mini_sentences mini_languages mini_test_utts mini_dev_utts corpus
  corpus_opts speed_perturb train_config test_sets"
. ./path.sh
. ./cmd.sh
. utils/parse_options.sh || exit 1
[ $# -eq 0 ] || { echo "$help_message" >&2; exit 1; }
. utils/recipe_common.sh   # die, check_stages
check_stages 6
check_num_threads   # --num_threads auto|N (the threads of each stage: below)

# ------------------------------------------------------------------ the setup stage 0 prepared
# Stage 0 writes $datadir/.setup (setup, db_root, the corpus or preparer, the mini corpus options, and
# --speed_perturb, --train_config, --test_sets as resolved); later stages read it, so `./run.sh --stage 3`
# continues what `./run.sh --db_root ... --stop_stage 2` prepared, and an option given later (whatever
# its value) that contradicts it is an error instead of a silent switch to 'mini' or to train_sp.
. utils/stage_setup.sh
setup_file=$datadir/.setup
if [ "$stage" -gt 0 ]; then
  setup_restore "$setup_file" $setup_keys
else
  if [ -n "$corpus" ]; then   # --corpus: mini (the embedded corpus) or a registered corpus
    [ -z "$local_prep" ] || die "--corpus $corpus and --local_prep $local_prep are two ways in: give one"
    if [ "$corpus" = mini ]; then
      [ -z "$setup" ] || [ "$setup" = mini ] || die "--corpus mini is the setup 'mini', not --setup $setup"
      setup=mini
    else
      check_corpus mini
      setup=${setup:-$corpus}
      [ "$setup" != mini ] || die "--setup mini is the embedded corpus, not --corpus $corpus"
    fi
  fi
  if [ -z "$setup" ]; then
    if [ -z "$db_root" ]; then setup=mini; else setup=real; fi
  fi
  [ -n "$corpus" ] || [ "$setup" != mini ] || corpus=mini   # recorded as the other recipes record it
  if [ "$setup" = mini ]; then
    [ -z "$db_root" ] || die "--setup mini is the embedded corpus: it takes no --db_root"
  else
    [ -n "$db_root" ] || die "--setup $setup needs --db_root (only the embedded 'mini' corpus needs none)"
    [ -d "$db_root" ] || die "--db_root $db_root: no such directory"
    db_root=$(cd "$db_root" && pwd)
  fi
fi
if [ -z "$train_config" ]; then
  if [ "$setup" = mini ]; then train_config=conf/train_mini.yaml; else train_config=conf/train_real.yaml; fi
fi
data=$datadir/$setup
if [ "$setup" = mini ]; then
  test_sets=${test_sets:-test test_unseen_voice}; speed_perturb=${speed_perturb:-false}; blank_penalties=${blank_penalties:-0}
else
  test_sets=${test_sets:-test}; speed_perturb=${speed_perturb:-true}; blank_penalties=${blank_penalties:-0 1 1.5 2}
fi
for p in $blank_penalties; do
  [[ "$p" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--blank_penalties: '$p' is not a number of nats >= 0"
done
[ -n "${blank_penalties// /}" ] || die "--blank_penalties: empty (give one value, or several to choose on dev)"
[[ "$train_jobs" =~ ^[1-9][0-9]*$ ]] || die "--train_jobs must be a whole number >= 1, got '$train_jobs'"
case "$speed_perturb" in
  true) train_set=train_sp ;;
  false) train_set=train ;;
  *) die "--speed_perturb must be true or false, got '$speed_perturb'" ;;
esac
read -ra avgs <<< "$avg"
[ "${#avgs[@]}" -gt 0 ] || die "--avg: empty (give 0, a number of checkpoints >= 2, or several to choose on dev)"
avg_max=0
for n in "${avgs[@]}"; do
  [[ "$n" =~ ^(0|[1-9][0-9]*)$ ]] && [ "$n" != 1 ] || die "--avg: each value must be 0 (best.pt) or a number of checkpoints >= 2, got '$n'"
  [ "$(printf '%s\n' "${avgs[@]}" | grep -cx "$n")" -eq 1 ] || die "--avg: '$n' given twice"
  [ "$n" -le "$avg_max" ] || avg_max=$n
done
[[ "$switch_off_margin" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--switch_off_margin: '$switch_off_margin' is not a number of WER points >= 0"
case "$switch_off_test_sweep" in true|false) ;; *) die "--switch_off_test_sweep must be true or false, got '$switch_off_test_sweep'" ;; esac
case "$unit" in
  bpe) lang=$data/lang_bpe${bpe_vocab_size}; unit_opts="--vocab-size $bpe_vocab_size" ;;
  char|char_wb) lang=$data/lang_$unit; unit_opts="" ;;
  *) die "--unit must be char_wb, char or bpe, got '$unit'" ;;
esac
exp=exp/$setup/rnnt_$unit
if [ "$unit" = bpe ]; then exp=${exp}$bpe_vocab_size; fi
[ -f "$train_config" ] || die "--train_config $train_config: no such file"
for v in $variants; do
  case "$v" in
    mono|vanilla|onehot|multisoftmax|multisoftmax_lsp|multisoftmax_lid|multisoftmax_lsp_lid|finetune|finetune_onehot) ;;
    *) die "--variants: unknown system '$v'" ;;
  esac
done
case "$switch_off_grid" in
  gap|posterior|both|none) ;;
  recipe) echo "$0: --switch_off_grid recipe is the older spelling of gap (the paper's rule, eq. 1)" >&2; switch_off_grid=gap ;;
  paper) echo "$0: --switch_off_grid paper is the older spelling of posterior (the recipe's own variant)" >&2; switch_off_grid=posterior ;;
  *) die "--switch_off_grid must be gap, posterior, both or none, got '$switch_off_grid'" ;;
esac
if [ -n "$paper_switch_off_taus" ]; then posterior_switch_off_taus=$paper_switch_off_taus; fi
if [ -n "$paper_switch_off_thresholds" ]; then posterior_switch_off_thresholds=$paper_switch_off_thresholds; fi
case "$switch_off_grid" in both) switch_off_rules="gap posterior" ;; none) switch_off_rules= ;; *) switch_off_rules=$switch_off_grid ;; esac
has_variant() { [[ " $variants " == *" $1 "* ]]; }
log() { echo "$(date '+%F %T') ($(basename "$0"):${BASH_LINENO[0]}) $*"; }   # the line, not recipe_common's [stage N]
languages() { echo "$langs"; }   # set after stage 2 (below)

# The systems of --variants in training order (mono_<l> and ft_<l> per language).
systems() {
  local v l
  for v in mono vanilla onehot multisoftmax multisoftmax_lsp multisoftmax_lid multisoftmax_lsp_lid finetune \
           finetune_onehot; do
    has_variant "$v" || continue
    case "$v" in
      mono) for l in $(languages); do echo "mono_$l"; done ;;
      finetune) for l in $(languages); do echo "ft_$l"; done ;;
      finetune_onehot) for l in $(languages); do echo "ft_onehot_$l"; done ;;
      *) echo "$v" ;;
    esac
  done
}

# read_languages: the languages of stage 2's units into $langs, or an error naming $lang/languages.txt
read_languages() {
  [ -s "$lang/languages.txt" ] || die "$lang/languages.txt: no such file or empty: run stage 2 with --unit $unit${bpe_vocab_size:+ (--bpe_vocab_size $bpe_vocab_size for bpe)} first"
  langs=$(awk 'NF {print $1}' "$lang/languages.txt")
  [ -n "$langs" ] || die "$lang/languages.txt: no language in it"
}

log "setup $setup: data $data, units $lang, experiments $exp, config $train_config"
# a run that starts after stage 2 needs its units: refused before anything (the run record too) is written
if [ "$stage" -ge 3 ]; then read_languages; fi
# the threads of each stage's jobs (utils/recipe_common.sh's threads: --num_threads N, or auto: the cores over
# the jobs that run at once), recorded with the run below
train_procs=$nproc
[ "${ngpu:-0}" = 0 ] || train_procs=$ngpu
[[ "$train_procs" =~ ^[1-9][0-9]*$ ]] || die "--nproc $nproc, --ngpu $ngpu: training processes must be a whole number >= 1"
threads feat_threads features "$nj"                              # stage 1: --nj make_feats jobs
threads train_threads training "$((train_jobs * train_procs))"  # stage 3: --train_jobs trainings x --nproc
threads decode_threads decoding "$nj"                            # stage 4: --nj decoding jobs
record_run "exp/$setup/runs.jsonl"   # this command line, the environment and the config hashes, for RESULTS.md
show_threads

# ------------------------------------------------------------------------------------- stage 0
if [ "$stage" -le 0 ] && [ "$stop_stage" -ge 0 ]; then
  log "stage 0: data preparation"
  if [ "$setup" = mini ]; then
    params="mini $mini_num_speakers $mini_sentences $mini_languages $mini_test_utts $mini_dev_utts"
  elif [ -n "$corpus" ]; then
    params="$setup $db_root corpus=$corpus${corpus_opts:+ $corpus_opts}"
  else
    params="$setup $db_root${local_prep:+ $local_prep}"
  fi
  if [ -f "$data/.prepared" ] && [ "$(cat "$data/.prepared")" = "$params" ]; then
    log "$data already prepared ($params); remove $data/.prepared to redo"
  else
    rm -f "$data/.prepared"
    mkdir -p "$data"
    if [ "$setup" = mini ]; then
      # one corpus folder per corpus parameters (the synthesizer refuses to change a corpus in place)
      local/prepare_mini.sh --num-speakers "$mini_num_speakers" --sentences "$mini_sentences" \
        --languages "$mini_languages" --test-utts "$mini_test_utts" --dev-utts "$mini_dev_utts" \
        "db/mini_${mini_num_speakers}x${mini_sentences}_${mini_languages//,/_}" "$data"
    elif [ -n "$corpus" ]; then   # a registered corpus: each language split by speaker (sizes printed)
      local/prepare_corpus.sh --corpus "$corpus" ${corpus_opts:+--corpus_opts "$corpus_opts"} "$db_root" "$data"
    else
      # shellcheck disable=SC2086  # --local_prep may carry options: "local/prepare_mucs.sh --languages hi,mr"
      ${local_prep:-local/prepare_real.sh} "$db_root" "$data"
    fi
    echo "$params" > "$data/.prepared"
  fi
  # Language ids, once, with the rule the model applies (speechkit.text.units.check_language_id:
  # an id names a directory and a softmax layer, so [A-Za-z0-9][A-Za-z0-9_-]*, no '.', not 'union').
  # shellcheck disable=SC2046
  local/check_languages.py "$data/train" "$data/dev" $(for t in $test_sets; do echo "$data/$t"; done)
  setup_save "$setup_file" $setup_keys
  log "setup '$setup' recorded in $setup_file (read by stages 1-6)"
fi

# ------------------------------------------------------------------------------------- stage 1
if [ "$stage" -le 1 ] && [ "$stop_stage" -ge 1 ]; then
  log "stage 1: log-mel features and CMVN stats"
  if [ "$speed_perturb" = true ]; then
    # ids sp0.9-* / sp1.1-* (speakers too); a sox pipe per copy in wav.scp; rewritten from data/train at
    # every run (seconds), so a re-prepared train set never keeps an old train_sp (its features are
    # recomputed only where the pipes changed)
    utils/perturb_data_dir_speed_3way.sh "$data/train" "$data/train_sp"
  fi
  for x in $train_set dev $test_sets; do
    utils/make_feats.sh --nj "$nj" --num-threads "$feat_threads" --cmd "$train_cmd" --config conf/logmel.yaml \
      "$data/$x" "exp/$setup/make_feats/$x" "$data/feats"
  done
  speechkit-compute-cmvn-stats "$data/$train_set"    # global stats of train(_sp) -> cmvn_global.ark, used everywhere
fi

# ------------------------------------------------------------------------------------- stage 2
if [ "$stage" -le 2 ] && [ "$stop_stage" -ge 2 ]; then
  log "stage 2: $unit units per language and their union -> $lang"
  checks=""
  for x in dev $test_sets; do checks="$checks --check $data/$x"; done
  # shellcheck disable=SC2086
  speechkit-make-units "$data/train" "$lang" --unit "$unit" --per-language $unit_opts $checks
fi

# The languages of stage 2's units ($lang/languages.txt), read once at the top level: a failure
# inside $(...) in a for list would escape `set -e` and silently drop every mono_*/ft_* system.
langs=
if [ "$stop_stage" -ge 3 ]; then read_languages; fi

# ------------------------------------------------------------------------------------- stage 3
# train_one SYSTEM: one speechkit-train run through $train_cmd (or $cuda_cmd with --ngpu)
train_one() {
  local sys=$1 opts extra resume=true n train_run
  opts="--data.train_dir $data/$train_set --data.valid_dir $data/dev --data.units_dir $lang"
  case "$sys" in
    mono_*) opts="$opts --model.variant multisoftmax --data.languages [${sys#mono_}]" ;;
    ft_onehot_*)   # the one-hot model cut to one language (speechkit.models.rnnt.to_monolingual)
      opts="$opts --model.variant multisoftmax --data.languages [${sys#ft_onehot_}] --init.exp_dir $exp/onehot"
      opts="$opts --init.language ${sys#ft_onehot_}" ;;
    ft_*)
      opts="$opts --model.variant multisoftmax --data.languages [${sys#ft_}] --init.exp_dir $exp/multisoftmax"
      opts="$opts --init.language ${sys#ft_}" ;;
    *) opts="$opts --model.variant $sys" ;;
  esac
  extra=$train_opts
  if [[ "$sys" == ft_* ]]; then extra="$train_opts $finetune_opts"; fi
  if [ "$avg_max" -gt 0 ]; then extra="--trainer.keep_last $avg_max $extra"; fi   # the epochs stage 4 averages
  if [ "$restart" = true ]; then
    resume=false
    if [ -d "$exp/$sys" ]; then
      n=1
      while [ -e "$exp/$sys.backup/$n" ]; do n=$((n + 1)); done
      mkdir -p "$exp/$sys.backup"
      mv "$exp/$sys" "$exp/$sys.backup/$n"
      log "--restart true: moved the previous $exp/$sys to $exp/$sys.backup/$n"
    fi
  fi
  log "training $exp/$sys (log: $exp/$sys/log/train.log)"
  train_run="$train_cmd --num-threads $((train_procs * train_threads))"
  [ "${ngpu:-0}" -gt 0 ] && train_run="$cuda_cmd --gpu $ngpu"
  # shellcheck disable=SC2086  # $train_run / $opts / $extra hold several words
  ${train_run} "$exp/$sys/log/train.log" \
    speechkit-train ${ngpu:+--ngpu "$ngpu"} --nproc "$nproc" rnnt --config "$train_config" --exp-dir "$exp/$sys" --resume "$resume" \
      --trainer.num_threads "$train_threads" $opts $extra
}

if [ "$stage" -le 3 ] && [ "$stop_stage" -ge 3 ]; then
  log "stage 3: training, $train_jobs at a time, $train_threads thread(s) each: $(systems | tr '\n' ' ')"
  # the fine-tuned systems start from multisoftmax / onehot: they wait for those (here or trained before)
  if has_variant finetune && ! has_variant multisoftmax && [ ! -f "$exp/multisoftmax/checkpoints/best.pt" ]; then
    die "finetune: fine-tuning starts from $exp/multisoftmax, which is not trained (add multisoftmax to --variants)"
  fi
  if has_variant finetune_onehot && ! has_variant onehot && [ ! -f "$exp/onehot/checkpoints/best.pt" ]; then
    die "finetune_onehot: fine-tuning starts from $exp/onehot, which is not trained (add onehot to --variants)"
  fi
  failed=0
  for wave in base finetuned; do
    running=0
    for sys in $(systems); do
      case "$sys" in ft_*) [ "$wave" = finetuned ] || continue ;; *) [ "$wave" = base ] || continue ;; esac
      if [ "$running" -ge "$train_jobs" ]; then wait -n || failed=$((failed + 1)); running=$((running - 1)); fi
      train_one "$sys" &
      running=$((running + 1))
    done
    while [ "$running" -gt 0 ]; do wait -n || failed=$((failed + 1)); running=$((running - 1)); done
    [ "$failed" -eq 0 ] || die "$failed training run(s) failed: see $exp/<system>/log/train.log"
  done
fi

# Decode data set $2 with model $1 into $3 (extra speechkit-asr-decode options after).
decode() {
  local model=$1 set=$2 dir=$3
  shift 3
  if [ "$search" = beam ] && [ "$length_norm" = true ]; then set -- --length-norm "$@"; fi
  # shellcheck disable=SC2086
  ${decode_cmd} --num-threads "$decode_threads" JOB=1:"$nj" "$dir/log/decode.JOB.log" \
    speechkit-asr-decode --model-dir "$model" --nj "$nj" --job JOB --search "$search" --beam "$beam" \
      --chunk-frames "$chunk_frames" --num-threads "$decode_threads" $decode_ckpt $bp_opt $decode_opts "$@" "$data/$set" "$dir"
  # shellcheck disable=SC2086
  speechkit-asr-decode --model-dir "$model" --nj "$nj" --merge-only --search "$search" --beam "$beam" \
    --chunk-frames "$chunk_frames" --num-threads "$decode_threads" $decode_ckpt $bp_opt $decode_opts "$@" "$data/$set" "$dir" | tee "$dir/log/merge.log"
}

# The checkpoint option of --avg value $1: none for 0 (best.pt), else the mean of the last $1 epochs.
ckpt_opt() { [ "$1" -eq 0 ] || echo "--checkpoint avg$1.pt"; }

# The checkpoint and blank penalty of system $1: the one value of --avg and of --blank_penalties, or
# the pair of lowest CER on dev among them (each decoded into $exp/$1/decode_dev_bp<P>, with several
# --avg values decode_dev_avg<N>_bp<P>); local/pick_blank_penalty.py records the choice in
# $exp/$1/blank_penalty(.json) and checkpoint_avg(.json). Sets $decode_ckpt and $bp_opt for the
# decodes that follow.
choose_decode_setting() {
  local sys=$1 p n mode=--oracle-lid dirs=() bps
  [ "$sys" = vanilla ] && mode=
  bp_opt=
  read -ra bps <<< "$blank_penalties"
  for n in "${avgs[@]}"; do   # an error naming the directory when fewer than N epochs were kept
    [ "$n" -eq 0 ] || speechkit-average-checkpoints --last "$n" "$exp/$sys"
  done
  if [ "${#avgs[@]}" -eq 1 ] && [ "${#bps[@]}" -eq 1 ]; then
    local/pick_blank_penalty.py --given "${bps[0]}" --given-avg "${avgs[0]}" "$exp/$sys"
  elif [ "${#avgs[@]}" -eq 1 ]; then
    decode_ckpt=$(ckpt_opt "${avgs[0]}")
    for p in "${bps[@]}"; do
      # shellcheck disable=SC2086
      decode "$exp/$sys" dev "$exp/$sys/decode_dev_bp$p" $mode --blank-penalty "$p"
      dirs+=("$p=$exp/$sys/decode_dev_bp$p")
    done
    local/pick_blank_penalty.py --ref "$data/dev/text" --given-avg "${avgs[0]}" "$exp/$sys" "${dirs[@]}"
  else
    for n in "${avgs[@]}"; do
      decode_ckpt=$(ckpt_opt "$n")
      for p in "${bps[@]}"; do
        # shellcheck disable=SC2086
        decode "$exp/$sys" dev "$exp/$sys/decode_dev_avg${n}_bp$p" $mode --blank-penalty "$p"
        dirs+=("$n:$p=$exp/$sys/decode_dev_avg${n}_bp$p")
      done
    done
    local/pick_blank_penalty.py --ref "$data/dev/text" "$exp/$sys" "${dirs[@]}"
  fi
  decode_ckpt=$(ckpt_opt "$(cat "$exp/$sys/checkpoint_avg")")
  bp_opt="--blank-penalty $(cat "$exp/$sys/blank_penalty")"
}

# sweep SYSTEM SET RULE: SET decoded LID-free at every setting of RULE's grid (section 6.3, eq. 1;
# Table 7), the TAU,S=DIR list in $sweep_dirs. gap (the paper's rule): --switch_off_taus (encoder
# frames) x --switch_off_thresholds (nats below the best running language's cumulative LID
# log-posterior s_l(t)), dirs decode_<set>_lidfree_tau<frames>_s<nats>. posterior (the recipe's own
# variant, not in the paper): --posterior_switch_off_taus (ms -> encoder frames, t > tau_ms / (stride x
# 10 ms)) x --posterior_switch_off_thresholds (on the running average LID posterior), pairs with an inf
# skipped (the plain LID-free decode), dirs decode_<set>_lidfree_paper_tau<ms>ms_p<posterior> (the
# older name the tracked results use).
sweep() {
  local sys=$1 set=$2 rule=$3 tau tau_ms s d
  sweep_dirs=()
  if [ "$rule" = gap ]; then
    for tau in $switch_off_taus; do
      for s in $switch_off_thresholds; do
        d=$exp/$sys/decode_${set}_lidfree_tau${tau}_s${s}
        decode "$exp/$sys" "$set" "$d" --lid-free --switch-off-tau "$tau" --switch-off-threshold "$s"
        sweep_dirs+=("$tau,$s=$d")
      done
    done
  else
    for tau_ms in $posterior_switch_off_taus; do
      for s in $posterior_switch_off_thresholds; do
        if [ "$tau_ms" = inf ] || [ "$s" = inf ]; then continue; fi
        d=$exp/$sys/decode_${set}_lidfree_paper_tau${tau_ms}ms_p${s}
        decode "$exp/$sys" "$set" "$d" --lid-free --switch-off-rule posterior \
          --switch-off-tau "$(posterior_frames "$sys" "$tau_ms")" --switch-off-threshold "$s"
        sweep_dirs+=("$tau_ms,$s=$d")
      done
    done
  fi
}

# posterior_frames SYSTEM TAU_MS: the posterior variant's tau in encoder frames (10 ms feature frames,
# conf/logmel.yaml, stacked by the system's data.stack_stride)
posterior_frames() {
  local stride
  stride=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["data"]["stack_stride"])' \
    "$exp/$1/config.yaml")
  echo $(($2 / (stride * 10)))
}

# The early switch-off operating point of system $1 for each rule of --switch_off_grid, chosen on dev:
# the dev set decoded LID-free without switch-off (decode_dev_lidfree) and at every setting of the
# rule's grid (sweep), local/pick_switch_off.py picks the setting of lowest dev T_avg whose dev WER is
# at most --switch_off_margin points above no switch-off -> $exp/$1/switch_off(.json) (the paper's
# rule), switch_off_posterior(.json) (the variant).
choose_switch_off() {
  local sys=$1 rule
  decode "$exp/$sys" dev "$exp/$sys/decode_dev_lidfree" --lid-free
  for rule in $switch_off_rules; do
    sweep "$sys" dev "$rule"
    local/pick_switch_off.py --ref "$data/dev/text" --rule "$rule" --margin "$switch_off_margin" \
      "$exp/$sys" "$exp/$sys/decode_dev_lidfree" "${sweep_dirs[@]}"
  done
}

# decode_chosen_switch_off SYSTEM SET: SET decoded once at each rule's operating point chosen on dev
# (choose_switch_off) into decode_<set>_lidfree_switchoff (the paper's rule) and
# decode_<set>_lidfree_switchoff_posterior; where no setting was within the margin ("none"), LID-free
# decoding that never switches off (--switch-off-threshold inf, the paper's rule).
decode_chosen_switch_off() {
  local sys=$1 set=$2 rule rec tau s dir
  for rule in $switch_off_rules; do
    rec=$exp/$sys/switch_off dir=$exp/$sys/decode_${set}_lidfree_switchoff
    if [ "$rule" = posterior ]; then rec=${rec}_posterior dir=${dir}_posterior; fi
    read -r tau s < "$rec" || die "$rec: empty (local/pick_switch_off.py writes it)"
    if [ "$tau" = none ]; then
      decode "$exp/$sys" "$set" "$dir" --lid-free --switch-off-tau 0 --switch-off-threshold inf
    elif [ "$rule" = gap ]; then
      decode "$exp/$sys" "$set" "$dir" --lid-free --switch-off-tau "$tau" --switch-off-threshold "$s"
    else
      decode "$exp/$sys" "$set" "$dir" --lid-free --switch-off-rule posterior \
        --switch-off-tau "$(posterior_frames "$sys" "$tau")" --switch-off-threshold "$s"
    fi
  done
}

# ------------------------------------------------------------------------------------- stage 4
bp_opt=
decode_ckpt=
if [ "$stage" -le 4 ] && [ "$stop_stage" -ge 4 ]; then
  log "stage 4: decoding ($search search, chunks of $chunk_frames frames; blank penalty: $blank_penalties, checkpoint: --avg $avg, chosen on dev if several)"
  for sys in $(systems); do
    [ -f "$exp/$sys/checkpoints/best.pt" ] || die "$exp/$sys is not trained (stage 3)"
    decode_ckpt=
    choose_decode_setting "$sys"
    log "$sys: ${decode_ckpt:-best.pt} $bp_opt"
    # multisoftmax_lid: the switch-off operating points chosen on dev (Table 7), before any test decode
    if [ "$sys" = multisoftmax_lid ] && [ -n "$switch_off_rules" ]; then choose_switch_off "$sys"; fi
    for t in $test_sets; do
      case "$sys" in
        vanilla) decode "$exp/$sys" "$t" "$exp/$sys/decode_$t" ;;
        multisoftmax_lid|multisoftmax_lsp_lid)
          decode "$exp/$sys" "$t" "$exp/$sys/decode_${t}_oracle" --oracle-lid
          decode "$exp/$sys" "$t" "$exp/$sys/decode_${t}_lidfree" --lid-free
          [ "$sys" = multisoftmax_lid ] || continue
          decode_chosen_switch_off "$sys" "$t"   # every test set, once, at the dev-chosen points
          # the analysis sweeps (not used to choose): the first test set only
          if [ "$switch_off_test_sweep" = true ] && [ "$t" = "${test_sets%% *}" ]; then
            for rule in $switch_off_rules; do sweep "$sys" "$t" "$rule"; done
          fi ;;
        *) decode "$exp/$sys" "$t" "$exp/$sys/decode_${t}_oracle" --oracle-lid ;;
      esac
    done
  done
fi

# Score decode dir $1 against data set $2 (WER, CER, LID accuracy when the system chose languages).
score() {
  local dir=$1 set=$2 base=
  mkdir -p "$dir/scoring"
  # WERR against the monolingual models, as the paper's Table 2
  if [ -f "$exp/mono/decode_${set}_oracle/scoring/wer.json" ] && [ "$dir" != "$exp/mono/decode_${set}_oracle" ]; then
    base="$exp/mono/decode_${set}_oracle/scoring"
  fi
  # the two or three commands in one process (utils/run_clis.py: each one's main with these arguments, its
  # stdout into the file after '>')
  {
    printf '%q ' speechkit-score-wer "$data/$set/text" "$dir/text" --mode all --utt2lang "$data/$set/utt2lang" \
      --json "$dir/scoring/wer.json" ${base:+--baseline-json "$base/wer.json"}
    printf '> %q\n' "$dir/scoring/wer.txt"
    printf '%q ' speechkit-score-wer "$data/$set/text" "$dir/text" --mode all --utt2lang "$data/$set/utt2lang" --cer \
      --json "$dir/scoring/cer.json" ${base:+--baseline-json "$base/cer.json"}
    printf '> %q\n' "$dir/scoring/cer.txt"
    if [[ "$dir" == */vanilla/* || "$dir" == *lidfree* ]]; then
      printf '%q ' speechkit-score-lid "$data/$set/utt2lang" "$dir/utt2lang" --json "$dir/scoring/lid.json"
      printf '> %q\n' "$dir/scoring/lid.txt"
    fi
  } | python utils/run_clis.py
  echo "$dir: $(head -1 "$dir/scoring/wer.txt"); CER $(head -1 "$dir/scoring/cer.txt" | cut -d' ' -f2)$(
    [ -f "$dir/scoring/lid.txt" ] && echo "; $(tail -1 "$dir/scoring/lid.txt")")"
}

# Concatenate the per-language systems' decodes ($1 = mono | ft) into one decode dir.
gather() {
  local kind=$1 set=$2 out=$exp/$1/decode_${2}_oracle l
  mkdir -p "$out"
  : > "$out/text.tmp"
  for l in $(languages); do
    [ -f "$exp/${kind}_$l/decode_${set}_oracle/text" ] || { echo "$0: missing $exp/${kind}_$l/decode_${set}_oracle" >&2; return 1; }
    cat "$exp/${kind}_$l/decode_${set}_oracle/text" >> "$out/text.tmp"
  done
  sort "$out/text.tmp" > "$out/text" && rm "$out/text.tmp"
}

# ------------------------------------------------------------------------------------- stage 5
if [ "$stage" -le 5 ] && [ "$stop_stage" -ge 5 ]; then
  log "stage 5: scoring"
  for t in $test_sets; do
    # the monolingual models first: they are the WERR baseline of the others
    if has_variant mono; then gather mono "$t"; score "$exp/mono/decode_${t}_oracle" "$t"; fi
    if has_variant vanilla; then score "$exp/vanilla/decode_$t" "$t"; fi
    if has_variant finetune; then gather ft "$t"; score "$exp/ft/decode_${t}_oracle" "$t"; fi
    if has_variant finetune_onehot; then gather ft_onehot "$t"; score "$exp/ft_onehot/decode_${t}_oracle" "$t"; fi
    for sys in onehot multisoftmax multisoftmax_lsp multisoftmax_lid multisoftmax_lsp_lid; do
      has_variant "$sys" || continue
      # decode_<set>_oracle and decode_<set>_lidfree*, not the decodes of another set whose name
      # starts with this one's (decode_test_unseen_voice_* for test)
      for dir in "$exp/$sys/decode_${t}_oracle" "$exp/$sys/decode_${t}_lidfree"*; do
        if [ -f "$dir/text" ]; then score "$dir" "$t"; fi
      done
    done
  done
fi

# ------------------------------------------------------------------------------------- stage 6
if [ "$stage" -le 6 ] && [ "$stop_stage" -ge 6 ]; then
  run_name=$setup
  [ "$unit" = char_wb ] || run_name=${setup}_$(basename "$exp" | sed 's/^rnnt_//')   # mini_char, real_bpe150, ...
  run_name=${results_name:-$run_name}
  log "stage 6: results: score files -> results/$run_name (tracked), RESULTS.md"
  local/make_results.py --collect --exp "$exp" --data "$data" --lang "$lang" --test-sets "$test_sets" \
    --run "$run_name" --runs-file "exp/$setup/runs.jsonl"
  awk -v run="## Run \`$run_name\`" '$0 == run {p = 1; print; next} p && /^## Run / {exit} p' RESULTS.md
fi
log "done"
