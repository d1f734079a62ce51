#!/usr/bin/env python3
"""Write a data dir's features with per-speaker CMVN applied (Kaldi apply-cmvn --norm-vars) as a
feature directory for scoring: OUT/feats.scp (+ ark) and OUT/frame_shift.

  local/apply_cmvn.py DATA_DIR OUT_DIR

The baseline "MFCC + per-speaker CMVN" of the results table is exactly what the VQ-VAE reads.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from speechkit.utils.cli import make_parser, run_main, setup_logging


def main(argv=None) -> int:
    p = make_parser(__doc__, prog="apply_cmvn.py")
    p.add_argument("data_dir", metavar="DATA_DIR", help="data dir with feats.scp, cmvn.scp (per speaker), utt2spk")
    p.add_argument("out_dir", metavar="OUT_DIR")
    args = p.parse_args(argv)

    def body() -> int:
        from speechkit.features.io import FeatureReader, ark_scp_writer

        setup_logging()
        data, out = Path(args.data_dir), Path(args.out_dir)
        reader = FeatureReader(data, cmvn="speaker")
        out.mkdir(parents=True, exist_ok=True)
        with ark_scp_writer(os.path.abspath(out / "feats.ark"), out / "feats.scp") as w:
            for utt in reader.keys():
                w(utt, reader[utt])
        if (data / "frame_shift").is_file():
            shutil.copyfile(data / "frame_shift", out / "frame_shift")
        print(f"apply_cmvn.py: wrote {len(reader)} utterances to {out}/feats.scp")
        return 0

    return run_main("apply_cmvn.py", body, parser=p)


if __name__ == "__main__":
    sys.exit(main())
