"""Export a training checkpoint as a model file: python scripts/export_model.py RUN_DIR [CKPT] [--out PATH]

CKPT defaults to RUN_DIR/checkpoints/best.ckpt (best on `select_by`, validation CER by default), else last.ckpt.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from asr.train import export_checkpoint  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("checkpoint", type=Path, nargs="?")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ckpt = args.checkpoint or next((p for p in (args.run_dir / "checkpoints" / n for n in ("best.ckpt", "last.ckpt"))
                                    if p.is_file()), None)
    if ckpt is None or not ckpt.is_file():
        print(f"error: no checkpoint found in {args.run_dir / 'checkpoints'}", file=sys.stderr)
        return 1
    print(export_checkpoint(args.run_dir, ckpt, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
