"""Export training checkpoints as a model file:

    python scripts/export_model.py RUN_DIR [CKPT ...] [--average N] [--out PATH]

With no CKPT: RUN_DIR/checkpoints/best.ckpt (best on `select_by`, validation CER by default), else last.ckpt.
Several CKPTs, or --average N (the newest N step*.ckpt the run kept), are averaged weight by weight.
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from asr.training.acoustic.train import export_checkpoint  # noqa: E402


def newest_steps(ckpt_dir: Path, n: int) -> list[Path]:
    """The `n` step<N>.ckpt files of `ckpt_dir` with the highest N."""
    steps = sorted(ckpt_dir.glob("step*.ckpt"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    return steps[-n:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("checkpoints", type=Path, nargs="*")
    parser.add_argument("--average", type=int, metavar="N", help="average the newest N step checkpoints")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.average and args.checkpoints:
        parser.error("give checkpoints or --average N, not both")
    ckpt_dir = args.run_dir / "checkpoints"
    if args.average:
        ckpts = newest_steps(ckpt_dir, args.average)
        if len(ckpts) < args.average:
            print(f"error: --average {args.average}: only {len(ckpts)} step checkpoints in {ckpt_dir}", file=sys.stderr)
            return 1
    else:
        ckpts = args.checkpoints or [p for p in (ckpt_dir / "best.ckpt", ckpt_dir / "last.ckpt") if p.is_file()][:1]
    missing = [p for p in ckpts if not p.is_file()]
    if not ckpts or missing:
        print(f"error: no checkpoint {missing[0] if missing else 'found in ' + str(ckpt_dir)}", file=sys.stderr)
        return 1
    print(export_checkpoint(args.run_dir, ckpts, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
