#!/usr/bin/env python3
"""Print Table 6 of Joshi et al. (2021) rebuilt: parameters of every system with speechkit's
``paper`` preset, beside the paper's counts (no training; the models are built on the meta device).

Usage: local/param_table.py [--units-dir DIR [--config conf/train_real.yaml]]

Without options: the ``paper`` preset with the paper's Table 1 inventories (En-IN 133, Hi-IN 59,
Ta-IN 97, Gu-IN 123 units) and a vanilla/one-hot output layer of 610 units (fitted to Table 6: the
union of Table 1's is 409; speechkit.models.rnnt_parameters.PAPER_*). With --units-dir (the
output of stage 2) the recipe's own inventories (disjoint union for vanilla) and, with --config,
the model section of that training config (over the 'small' preset, as speechkit-train rnnt does).
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--units-dir", default=None, help="speechkit-make-units --per-language output")
    p.add_argument("--config", default=None, help="a speechkit-train rnnt YAML config (its model section)")
    args = p.parse_args(argv)
    from speechkit.models.rnnt_parameters import PAPER_TABLE6, paper_parameter_table, parameter_table

    systems = list(PAPER_TABLE6) + ["multisoftmax_lsp_lid"]
    if args.units_dir is None:
        if args.config:
            p.error("--config needs --units-dir (the inventories)")
        table, what = paper_parameter_table(), "`paper` preset, Table 1's inventories (union fitted)"
    else:
        from speechkit.text.units import MultilingualUnits

        units = MultilingualUnits.load(args.units_dir)
        sizes = {k: units.vocab_sizes[k] for k in units.languages}
        if args.config:
            import yaml

            with open(args.config, encoding="utf-8") as f:
                model = dict((yaml.safe_load(f) or {}).get("model") or {})
            for k in ("vocab_sizes", "variant", "union_maps"):
                model.pop(k, None)
            # as the rnnt task builds it: the 'small' preset under the config's model section
            table, what = parameter_table(sizes, "small", systems, **model), f"{args.config}, {args.units_dir}"
        else:
            table, what = parameter_table(sizes, "paper", systems), f"`paper` preset, {args.units_dir}"
    print(f"Table 6: parameters (M) -- {what}; mono = the first language alone\n")
    print("| system | paper | here | encoder | prediction | joint | LID head |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in systems:
        c = table[s]
        ref = PAPER_TABLE6.get(s)
        print(f"| {s} | {'-' if ref is None else f'{ref:.2f}'} | {c['total'] / 1e6:.2f} | {c['encoder'] / 1e6:.2f} | "
              f"{c['prediction'] / 1e6:.2f} | {c['joint'] / 1e6:.2f} | {c['lid'] / 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
