#!/usr/bin/env python3
"""Check the language ids of Kaldi data dirs once, at data preparation (stage 0 of run.sh).

Usage: local/check_languages.py <data-dir> [<data-dir> ...]

Every ``<data-dir>/utt2lang`` must exist and name, for each utterance, a language id that both
the units and the model accept:

* :func:`speechkit.text.units.check_language_id`: ``[A-Za-z0-9][A-Za-z0-9_-]*``, not ``union``
  (an id names a directory of ``data/<setup>/lang_*/``);
* :meth:`speechkit.models.rnnt.RNNTConfig.validate`: no ``.`` and not an attribute name of
  ``torch.nn.ModuleDict`` such as ``to`` (the per-language embeddings, joint networks and
  softmax layers are keyed by it).

Without this check a bad id passes stages 0-2 and fails only when stage 3 builds the model.
An error names the file, the line and the id, and exits 1; on success one line per data dir
(``<dir>: <n> utterances, languages: en hi``) is printed.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from speechkit.models.rnnt import RNNTConfig
from speechkit.text.units import check_language_id
from speechkit.utils.cli import ConfigError, make_parser, run_main
from speechkit.utils.fileio import DataError, read_table

PROG = "check_languages.py"


def check_data_dir(data_dir: Path) -> Counter:
    """Utterances per language of ``data_dir/utt2lang``, every id checked.

    Raises:
        DataError: no ``utt2lang``, an empty one, or a bad id (names file, line and id).
    """
    path = data_dir / "utt2lang"
    if not path.is_file():
        raise DataError(f"{path}: no such file (every utterance needs a language id)")
    table = read_table(path)
    if not table:
        raise DataError(f"{path}: empty")
    counts: Counter = Counter()
    checked: set[str] = set()
    for lineno, (utt, lang) in enumerate(table.items(), 1):
        if lang not in checked:
            where = f"{path}:{lineno} (utterance {utt})"
            if len(lang.split()) != 1:
                raise DataError(f"{where}: expected one language id, got {lang!r}")
            check_language_id(lang, where)
            try:
                RNNTConfig(vocab_sizes={lang: 2}).validate()
            except ConfigError as e:
                raise DataError(f"{where}: language id {lang!r} is refused by the model: {e}") from None
            checked.add(lang)
        counts[lang] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__, prog=PROG)
    parser.add_argument("data_dirs", nargs="+", type=Path, metavar="DATA_DIR")
    args = parser.parse_args(argv)

    def body() -> int:
        for d in args.data_dirs:
            counts = check_data_dir(d)
            print(f"{d}: {sum(counts.values())} utterances, languages: {' '.join(sorted(counts))}")
        return 0

    return run_main(PROG, body, parser=parser)


if __name__ == "__main__":
    sys.exit(main())
