#!/usr/bin/env python3
"""Split a data dir into train/dev/test by *sentence*: test and dev sentences are never in train.

Usage: local/split_by_sentence.py [--dev F] [--test F] [--seed S]
                                  [--unseen-voices K --unseen-voice-utts N] <data> <out>

Unlike ``speechkit-split-corpus --by-speaker`` (unseen voices), every training speaker stays in every
part; what dev and test measure is recognition of sentences the model never heard. Per language, the
distinct transcripts (``text``, grouped with ``utt2lang``) are shuffled with ``--seed`` and dealt to
test and dev until each holds about ``F`` of that language's utterances; every utterance of a dealt
transcript goes to that part, the rest to train. Writes ``<out>/{train,dev,test}`` (Kaldi data dirs;
``phone_alignments`` and ``spk2gender`` carried) and prints the counts.

With ``--unseen-voices K`` the last K speakers (C-locale order of the speaker ids) are held out of
every part before the split, and ``<out>/test_unseen_voice`` gets up to N utterances per language
of theirs (``--unseen-voice-utts``, drawn with ``--seed``) whose transcripts are not in train: a
voice never heard, saying sentences never heard.

Errors (non-zero exit, no traceback): a missing ``text``/``utt2lang``, an empty part, K not below
the number of speakers.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

from speechkit.data.datadir import DataDir, subset
from speechkit.utils.cli import make_parser, run_main, setup_logging
from speechkit.utils.fileio import DataError

PROG = "split_by_sentence.py"


def assign_by_sentence(text: dict[str, str], utt2lang: dict[str, str], dev: float, test: float,
                       seed: int) -> dict[str, list[str]]:
    """``{"train"|"dev"|"test": [utt, ...]}`` with no transcript shared between train and dev/test.

    ``dev`` / ``test`` below 1 are fractions of each language's utterances, 1 or more a number of
    utterances per language (whole transcripts are dealt, so a part may get a few more).

    Raises:
        DataError: an utterance of ``text`` without a language.
    """
    by_lang: dict[str, dict[str, list[str]]] = {}
    for utt, t in text.items():
        if utt not in utt2lang:
            raise DataError(f"utt2lang: no language for utterance '{utt}'")
        by_lang.setdefault(utt2lang[utt], {}).setdefault(" ".join(t.split()), []).append(utt)
    parts: dict[str, list[str]] = {"train": [], "dev": [], "test": []}
    rng = random.Random(seed)
    for lang in sorted(by_lang):
        groups = by_lang[lang]
        n = sum(len(v) for v in groups.values())
        sentences = sorted(groups)
        rng.shuffle(sentences)
        want = {p: int(f) if f >= 1 else round(f * n) for p, f in (("test", test), ("dev", dev))}
        got = {"test": 0, "dev": 0}
        for s in sentences:
            part = next((p for p in ("test", "dev") if got[p] < want[p]), "train")
            if part != "train":
                got[part] += len(groups[s])
            parts[part].extend(groups[s])
    return {k: sorted(v) for k, v in parts.items()}


def unseen_voice_test(text: dict[str, str], utt2lang: dict[str, str], held_out: list[str], train: list[str],
                      per_language: int, seed: int) -> list[str]:
    """Up to ``per_language`` utterances per language of ``held_out`` whose transcript is not in ``train``.

    Args:
        text: utterance -> transcript (all utterances, held-out ones included).
        utt2lang: utterance -> language.
        held_out: the held-out speakers' utterance ids.
        train: the training utterances (their transcripts are excluded).
        per_language: the cap per language (all of them if there are fewer).
        seed: the draw's seed.

    Returns:
        The chosen utterance ids, C-locale sorted.
    """
    seen = {" ".join(text[u].split()) for u in train}
    by_lang: dict[str, list[str]] = {}
    for u in sorted(held_out):
        if " ".join(text[u].split()) not in seen:
            by_lang.setdefault(utt2lang[u], []).append(u)
    rng = random.Random(seed)
    out: list[str] = []
    for lang in sorted(by_lang):
        utts = by_lang[lang]
        rng.shuffle(utts)
        out.extend(utts[:per_language])
    return sorted(out)


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA")
    parser.add_argument("out_dir", metavar="OUT")
    parser.add_argument("--dev", type=float, default=0.05,
                        help="dev per language: a fraction of the utterances (< 1) or a number (>= 1) (default 0.05)")
    parser.add_argument("--test", type=float, default=0.1,
                        help="test per language: a fraction of the utterances (< 1) or a number (>= 1) (default 0.1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unseen-voices", type=int, default=0, metavar="K",
                        help="hold the last K speakers out of train/dev/test; their utterances with unseen "
                             "sentences make test_unseen_voice (default 0: none)")
    parser.add_argument("--unseen-voice-utts", type=int, default=30, metavar="N",
                        help="test_unseen_voice: at most N utterances per language (default 30)")
    args = parser.parse_args(argv)
    for opt, v in (("--dev", args.dev), ("--test", args.test)):
        if v <= 0 or (v >= 1 and v != int(v)):
            parser.error(f"{opt} must be a fraction in (0, 1) or a whole number of utterances, got {v:g}")
    if args.unseen_voices < 0:
        parser.error(f"--unseen-voices must be >= 0, got {args.unseen_voices}")
    if args.unseen_voice_utts < 1:
        parser.error(f"--unseen-voice-utts must be >= 1, got {args.unseen_voice_utts}")
    setup_logging(None)

    def body() -> int:
        d = DataDir.load(args.data_dir)
        if d.text is None or d.utt2lang is None:
            raise DataError(f"{args.data_dir}: needs text and utt2lang")
        speakers = sorted(d.spk2utt, key=lambda x: x.encode("utf-8"))
        if args.unseen_voices >= len(speakers):
            raise DataError(f"{args.data_dir}: --unseen-voices {args.unseen_voices} leaves no training speaker "
                            f"({len(speakers)} speakers)")
        held = set(speakers[len(speakers) - args.unseen_voices:]) if args.unseen_voices else set()
        held_utts = [u for u in d.utts if d.utt2spk[u] in held]
        seen_text = {u: t for u, t in d.text.items() if d.utt2spk.get(u) not in held}
        parts = assign_by_sentence(seen_text, d.utt2lang, args.dev, args.test, args.seed)
        if held:
            parts["test_unseen_voice"] = unseen_voice_test(d.text, d.utt2lang, held_utts, parts["train"],
                                                           args.unseen_voice_utts, args.seed)
        for name, utts in parts.items():
            if not utts:
                raise DataError(f"{args.data_dir}: the {name} part would be empty (fractions too small?)")
        for name, utts in parts.items():
            subset(d, utts).write(Path(args.out_dir) / name)
        train_text = {" ".join(d.text[u].split()) for u in parts["train"]}
        for name in parts:
            if name == "train":
                continue
            assert not train_text & {" ".join(d.text[u].split()) for u in parts[name]}
        print(f"{PROG}: wrote {args.out_dir}: " + ", ".join(f"{k} {len(v)} utts" for k, v in parts.items()))
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
