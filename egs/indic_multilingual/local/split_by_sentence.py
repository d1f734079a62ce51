#!/usr/bin/env python3
"""Split a data dir into train/dev/test by *sentence*: test and dev sentences are never in train.

Usage: local/split_by_sentence.py [--dev F] [--test F] [--seed S] <data> <out>

Unlike ``speechkit-split-corpus --by-speaker`` (unseen voices), every speaker stays in every part;
what dev and test measure is recognition of sentences the model never heard (the `mini` learning
check of issue 11). Per language, the distinct transcripts (``text``, grouped with ``utt2lang``)
are shuffled with ``--seed`` and dealt to test and dev until each holds about ``F`` of that
language's utterances; every utterance of a dealt transcript goes to that part, the rest to
train. Writes ``<out>/{train,dev,test}`` (Kaldi data dirs; ``phone_alignments`` and
``spk2gender`` carried) and prints the counts.

Errors (non-zero exit, no traceback): a missing ``text``/``utt2lang``, an empty part.
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
        want = {"test": round(test * n), "dev": round(dev * n)}
        got = {"test": 0, "dev": 0}
        for s in sentences:
            part = next((p for p in ("test", "dev") if got[p] < want[p]), "train")
            if part != "train":
                got[part] += len(groups[s])
            parts[part].extend(groups[s])
    return {k: sorted(v) for k, v in parts.items()}


def main(argv=None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dir", metavar="DATA")
    parser.add_argument("out_dir", metavar="OUT")
    parser.add_argument("--dev", type=float, default=0.05, help="fraction of utterances for dev (default 0.05)")
    parser.add_argument("--test", type=float, default=0.1, help="fraction of utterances for test (default 0.1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    setup_logging(None)

    def body() -> int:
        d = DataDir.load(args.data_dir)
        if d.text is None or d.utt2lang is None:
            raise DataError(f"{args.data_dir}: needs text and utt2lang")
        parts = assign_by_sentence(d.text, d.utt2lang, args.dev, args.test, args.seed)
        for name, utts in parts.items():
            if not utts:
                raise DataError(f"{args.data_dir}: the {name} part would be empty (fractions too small?)")
        for name, utts in parts.items():
            subset(d, utts).write(Path(args.out_dir) / name)
        train_text = {" ".join(d.text[u].split()) for u in parts["train"]}
        for name in ("dev", "test"):
            assert not train_text & {" ".join(d.text[u].split()) for u in parts[name]}
        print(f"{PROG}: wrote {args.out_dir}: " + ", ".join(f"{k} {len(v)} utts" for k, v in parts.items()))
        return 0

    return run_main(PROG, body)


if __name__ == "__main__":
    sys.exit(main())
