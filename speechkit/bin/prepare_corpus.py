"""Prepare a corpus as a Kaldi data directory (wav.scp, text, utt2spk, spk2utt, utt2lang, utt2dur, and
spk2gender / phone_alignments where the corpus has them).

Usage:
  speechkit-prepare-corpus NAME CORPUS_DIR OUT_DIR [--sample-rate HZ] [--keep-punctuation] [options]
  speechkit-prepare-corpus NAME --help        (the options of one corpus)

Every corpus: utterance ids are <speaker>_<rest> (speaker ids are prefixes), sorted in C order;
utt2lang holds ISO 639-1 codes; utt2dur comes from the audio headers. Missing, empty or
undecodable audio and malformed metadata rows are reported (a warning for each of the first 10,
then a summary line 'skipped K of N recordings: ...') and skipped. Text is Unicode NFC with
punctuation removed (an apostrophe between letters is deleted: don't -> dont), whitespace collapsed
and Latin letters lowercased (--keep-punctuation: as written). --sample-rate HZ turns wav.scp entries of another native rate into
'sox -R FILE -t wav -r HZ -b 16 -c 1 - |' pipes (repeatable: -R), and MP3 and Opus files, which sox
cannot read, into 'speechkit-resample --rate HZ FILE |'. Phone alignments, where present, are in
OUT_DIR/phone_alignments: '<utt> <start-s> <end-s> <phone>'. OUT_DIR may not be, contain or lie
inside CORPUS_DIR (checked before any work). Every recipe takes each of these corpora as
./run.sh --corpus NAME --db_root CORPUS_DIR (docs/adding_a_corpus.md adds one).

Examples:
  speechkit-prepare-corpus timit ../shared/data/timit_sample data/timit
  speechkit-prepare-corpus msc_malayalam ../shared/data/msc_malayalam data/ml_crowd --min-vote 0
  speechkit-prepare-corpus fsdd ../shared/data/fsdd data/fsdd --sample-rate 16000
  speechkit-prepare-corpus mini db/mini data/mini --seed 1 --num-speakers 4 --languages en,hi
"""
from __future__ import annotations

import argparse
import sys

from speechkit.data.corpora import CORPORA, Corpus, Option
from speechkit.utils.cli import finite_float, make_parser, positive_int, run_main, setup_logging
from speechkit.utils.outputs import check_output_dir

PROG = "speechkit-prepare-corpus"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _converter(opt: Option):
    def conv(value: str):
        if opt.nullable and value.lower() == "none":
            return None
        if opt.type is list:
            items = [v.strip() for v in value.split(",") if v.strip()]
            if not items:
                raise argparse.ArgumentTypeError("expected a comma-separated list")
            return items
        return finite_float(value) if opt.type is float else opt.type(value)

    conv.__name__ = opt.type.__name__  # argparse names the type in its error messages
    return conv


def _describe(opt: Option) -> str:
    default = ",".join(opt.default) if isinstance(opt.default, list) else opt.default
    return f"{opt.help} (default: {default})"


def _add_corpus_parser(sub, corpus: Corpus) -> None:
    p = sub.add_parser(corpus.name, help=corpus.description, description=corpus.description)
    p.add_argument("corpus_dir", metavar="CORPUS_DIR", help="the corpus root" +
                   (" (synthesized there first unless complete)" if corpus.name == "mini" else ""))
    p.add_argument("out_dir", metavar="OUT_DIR", help="the data directory to write")
    p.add_argument("--sample-rate", type=positive_int, default=None, metavar="HZ",
                   help="resample through a sox pipe in wav.scp when the native rate differs (default: native)")
    p.add_argument("--keep-punctuation", action="store_true", help="keep the transcripts' punctuation and case")
    p.add_argument("--log-file", default=None, help="also append the log to this file")
    for opt in corpus.options:
        if opt.type is bool:
            p.add_argument(_flag(opt.name), dest=opt.name, action=argparse.BooleanOptionalAction, default=opt.default,
                           help=_describe(opt))
        else:
            p.add_argument(_flag(opt.name), dest=opt.name, type=_converter(opt), default=opt.default,
                           choices=opt.choices, help=_describe(opt), metavar=None if opt.choices else opt.name.upper())


def _epilog() -> str:
    lines = ["corpora and their options:"]
    for c in CORPORA.values():
        lines.append(f"  {c.name}: {c.description}")
        for opt in c.options:
            shown = f"{_flag(opt.name)}/--no-{opt.name.replace('_', '-')}" if opt.type is bool else (
                f"{_flag(opt.name)} {{{','.join(opt.choices)}}}" if opt.choices else f"{_flag(opt.name)} {opt.name.upper()}")
            lines.append(f"      {shown}: {_describe(opt)}")
    lines.append("  every corpus: --sample-rate HZ, --keep-punctuation, --log-file FILE")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one sub-command per registered corpus."""
    parser = make_parser(__doc__, prog=PROG)
    parser.epilog = _epilog()
    sub = parser.add_subparsers(dest="corpus", metavar="NAME", required=True)
    for corpus in CORPORA.values():
        _add_corpus_parser(sub, corpus)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    corpus = CORPORA[args.corpus]
    options = {opt.name: getattr(args, opt.name) for opt in corpus.options}

    def body() -> int:
        setup_logging(args.log_file, output_data_dirs={"OUT_DIR": args.out_dir})
        check_output_dir(args.out_dir, inputs={"CORPUS_DIR": args.corpus_dir}, option="OUT_DIR")
        d = corpus.prepare(args.corpus_dir, args.out_dir, sample_rate=args.sample_rate,
                           keep_punctuation=args.keep_punctuation, **options)
        print(f"{PROG}: {args.corpus}: wrote {args.out_dir} ({len(d)} utterances, "
              f"{len(set(d.utt2spk.values()))} speakers)")
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
