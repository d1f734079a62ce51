"""Forced phone alignment: a flat-start HMM-GMM (monophones, then tied triphones) trained by
Baum-Welch and Viterbi re-estimation.

The recipe of Kaldi's ``steps/train_mono.sh`` + ``steps/train_deltas.sh`` + ``steps/align_si.sh``
(optionally ``train_lda_mllt.sh`` and ``train_sat.sh``), in numpy:

1. **Features**: 13 MFCC + delta + delta-delta (:class:`~speechkit.features.frontends.MfccFrontend`,
   25 ms Hamming window, 10 ms shift by default), mean and variance normalised per speaker
   (Kaldi's ``apply-cmvn --norm-vars``).
2. **Model**: one left-to-right HMM per phone (``num_states`` emitting states, self-loop and
   forward transitions, optionally a skip over one state), a diagonal-covariance GMM per state.
   ``sil`` is the optional-silence model that may be inserted at the start, at the end and, when
   ``phone_info`` gives word indices, between words (probability ``sil_prob``, as the lexicon FST
   of Kaldi's ``prepare_lang.sh``).
3. **Flat start**: every GMM starts as the global mean and variance (``gmm-init-mono``); the first
   statistics come from an equal alignment (each utterance's frames split evenly over the states
   of its phone sequence, ``align-equal-compiled``).
4. **Training**: ``num_iters`` passes. The first ``baum_welch_iters`` take forward-backward
   (Baum-Welch) statistics with acoustic scale ``train_acoustic_scale`` (soft posteriors, far more
   robust from a flat start than Viterbi, as HTK's ``HERest`` flat start); the rest are Viterbi
   passes that re-align the data on the passes in ``realign_iters`` (Kaldi's schedule). Each pass
   takes one EM step per GMM and re-estimates the transitions; the number of Gaussians grows
   linearly to ``total_gauss`` over the first ``max_iter_inc`` passes (split targets proportional
   to occupancy^0.2, ``gmm-est --mix-up``). Viterbi statistics leave out the frames of tokens
   whose duration is an outlier for their phone (``duration_outlier_k`` robust standard
   deviations of the log duration from the phone's median): a flat start otherwise lets a few
   models (a glottal stop, /s/) swallow stretches of other phones and learn them, and every
   later pass reinforces that.
5. **Triphones** (``tri_leaves``, Kaldi's ``train_deltas.sh``): from the monophone alignment,
   each phone state in its (left, right) phone context; a decision tree per (phone, state), with
   questions from a clustering of the monophone means (``cluster-phones``), ties them into at most
   ``tri_leaves`` pdfs, re-trained for ``tri_iters`` Viterbi passes. Optional, off by default:
   an LDA+MLLT stage (``lda_dim``) and a speaker-adaptive fMLLR stage (``sat_iters``).
6. **Optional hybrid refinement** (``refine_iters``): an MLP frame classifier trained on the
   alignment, whose scaled likelihoods replace the GMMs' (off by default: +0.7 % on TIMIT).
7. **Alignment** with the final model (Viterbi); log-likelihoods scaled by ``acoustic_scale`` and
   self-loops by ``self_loop_scale``, as ``gmm-align-compiled`` (0.1 and 0.1 in Kaldi).

Accuracy (``test/bench/bench_align_timit.py``, train-and-align on the 80-utterance TIMIT sample,
61 phones; mean over seeds 0-2): 72 % of internal boundaries within 20 ms of the hand labels
(monophones alone, without the duration outlier rule: 68.5 %), 88 % within 40 ms. LDA+MLLT,
SAT and the hybrid refinement gave no further gain there.

Frame ``t`` is centred on sample ``t * hop``; a boundary between frames ``t-1`` and ``t`` is
placed at ``(t - 0.5) * frame_shift`` seconds; the first segment starts at 0 and the last ends at
the end of the audio.

Modules, one job each: ``config`` (:class:`AlignerConfig`, file names), ``features`` (reading a data
dir: tokens, ``phone_info``, MFCC + deltas with CMVN), ``gmm`` (:class:`~speechkit.align.gmm.DiagGmmSet`),
``hmm`` (alignment graphs, Viterbi, forward-backward), ``tree`` (decision-tree state tying),
``transforms`` (splicing, LDA, MLLT, fMLLR), ``hybrid`` (the MLP frame classifier), ``aligner``
(:class:`Aligner`: graphs, alignment, save/load) and ``train`` (:func:`train_aligner`).

Python API::

    from speechkit.align import Aligner, train_aligner

    aligner, result = train_aligner("data/train_phones", "exp/align")  # trains, saves, aligns the data
    result = aligner.align("data/train_phones")                    # AlignResult
    result.alignments["utt1"]   # [(0.0, 0.1225, 'sil'), (0.1225, 0.2, 'h'), ...]
    aligner = Aligner.load("exp/align")
"""
from speechkit.align.aligner import Aligner, AlignResult, check_alignment_dir
from speechkit.align.config import (ALIGNMENTS_FILE, CONFIG_FILE, MAX_LISTED, MODEL_FILE, PHONES_FILE, SIL,
                                    UNALIGNED_FILE, AlignerConfig, load_aligner_config)
from speechkit.align.features import compute_features, read_phone_info
from speechkit.align.train import train_aligner

__all__ = ["AlignerConfig", "load_aligner_config", "Aligner", "AlignResult", "train_aligner", "read_phone_info",
           "compute_features", "SIL", "MODEL_FILE", "PHONES_FILE", "CONFIG_FILE", "UNALIGNED_FILE",
           "ALIGNMENTS_FILE", "MAX_LISTED", "check_alignment_dir"]
