"""Fine-tune the shipped model on your own recordings in one command, and see what it gained.

    python -m asr.finetune DATA --out DIR [--model M] [--minutes 20] [--device cpu|cuda] [--tune-lm]
                           [--test MANIFEST | --test-split auto|speaker|recording --test-share 0.2]
                           [--guard auto|replay|distill|l2sp|none] [--replay-data-root ../shared/data] [--check]
                           [--criterion crf_trigram|crf|ctc] [--skip-bad]

DATA: a folder of recordings with a transcript beside each (STEM.txt or STEM.lab; the first folder under
DATA names the speaker), a CSV/TSV table of audio paths and text, or a JSON Lines manifest (docs/corpus.md).
In order, each step kept in DIR (after a stop, Ctrl-C included, the same command goes on from there):

1. the manifest, built and checked as `python -m asr.manifest` builds one (DIR/data/), and a held-out test
   split: whole speakers where there are several, else recordings; fewer than 10 test utterances is refused;
2. the starting model (the bundled one, or --model) scored on the test split, greedy and beam;
3. fine-tuning with the bundled model's loss (CTC-CRF with a trigram phone LM; --criterion ctc: plain CTC),
   --minutes of training in all, with a progress bar in hours of audio, guarded against forgetting general
   speech (--guard): part of every epoch is the original training mixture, replayed from
   --replay-data-root where its manifests are; elsewhere the starting model's own outputs on the same
   recordings are a second target (distillation), so the shipped model's hearing is kept without its data;
4. the word LM: a trigram of the training split's text interpolated with the starting LM;
5. the ONNX export, the test split scored again, before / after and per speaker, DIR/MODEL_CARD.md.

DIR is then a model folder: `--model DIR` for asr.transcribe, asr.stream, asr.evaluate and asr.serve, and
`asr.load("DIR")` in Python. docs/finetune.md has a worked example.
"""
from __future__ import annotations

import os

# One BLAS/OpenMP thread in each loader process, as `python -m asr.training` sets it (asr/training/__main__.py);
# the training process's own threads come from --threads.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from asr import cli  # noqa: E402
from asr.cli import checks  # noqa: E402
from asr.audio import interrupt  # noqa: E402
from asr.corpus.build import BuildError  # noqa: E402
from asr.corpus.manifest import ManifestError  # noqa: E402
from asr.decoding.beam import LMError  # noqa: E402
from asr.model.errors import ModelError, needs_train_extra  # noqa: E402
from asr.training.finetune.lm import DEFAULT_WEIGHT  # noqa: E402
from asr.training.finetune.manifests import REPLAY_SOURCES  # noqa: E402
from asr.training.finetune.pipeline import TOOL, run  # noqa: E402
from asr.training.finetune.recipe import CRITERIA, GUARDS, LR, REPLAY_SHARE, Recipe  # noqa: E402
from asr.training.finetune.split import SplitError  # noqa: E402
from asr.training.lm.mix import ArpaError  # noqa: E402
# The training stack (torch, Lightning) loads in the steps that need it: checking the data stays quick.


def share(text: str) -> float:
    """An argparse type: a share of at least 0 and below 1."""
    value = cli.finite_float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1 (got {text})")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options of `python -m asr.finetune` (the module's docstring is its --help)."""
    parser = cli.new_parser("asr.finetune", __doc__)
    parser.add_argument("data", type=Path, help="a folder of recordings with transcripts, a CSV/TSV table or a manifest")
    parser.add_argument("--out", type=Path, required=True, help="the model folder to write (it also keeps the run)")
    parser.add_argument("--model", help="the model to start from (.safetensors or a model folder); default: the bundled one")
    parser.add_argument("--lm", type=Path, help="the word LM (ARPA) to add the new text to; default: the starting model's")
    parser.add_argument("--test", type=Path, metavar="MANIFEST",
                        help="test on these recordings (a folder, table or manifest) instead of holding some out")
    parser.add_argument("--test-split", choices=("auto", "speaker", "recording"), default="auto",
                        help="hold out whole speakers or single recordings (auto: speakers where there are two or more)")
    parser.add_argument("--test-share", type=share, default=0.2, help="the share of the utterances held out (default 0.2)")
    parser.add_argument("--minutes", type=cli.positive_float, default=20.0,
                        help="minutes of training in all, over every resumed run (default 20; scoring before and "
                             "after and the export come on top)")
    parser.add_argument("--max-steps", type=cli.positive_int, help="stop after this many steps at the most (a quick trial)")
    parser.add_argument("--device", default="cpu", metavar="cpu|cuda|cuda:N", help="where to train (default cpu)")
    parser.add_argument("--threads", type=cli.positive_int, default=min(os.cpu_count() or 1, 8),
                        help="CPU threads for training and scoring (default: the cores, up to 8)")
    parser.add_argument("--workers", type=int, default=1, help="loader processes (0: load in the training process)")
    parser.add_argument("--lr", type=cli.positive_float, default=LR, help=f"peak learning rate (default {LR:g})")
    parser.add_argument("--train-blocks", type=int, metavar="N",
                        help="train only the top N blocks and the output layer (default: every block; the front end never trains)")
    parser.add_argument("--replay-data-root", type=Path,
                        help="where the original training mixture's manifests are (default: training's data.root, "
                             "../shared/data): " + ", ".join(name for name, _ in REPLAY_SOURCES))
    parser.add_argument("--replay-share", type=share, default=REPLAY_SHARE,
                        help=f"share of the training audio replayed from that mixture (default {REPLAY_SHARE:g}; 0: none)")
    parser.add_argument("--guard", choices=GUARDS, default="auto",
                        help="what keeps general speech from being forgotten: replay of the original mixture, "
                             "distillation toward the starting model's own outputs, L2-SP (a pull toward its "
                             "weights), or none (default auto: replay where its manifests are found, else distill)")
    parser.add_argument("--criterion", choices=sorted(CRITERIA), default=Recipe.criterion,
                        help="the training loss: ctc, crf (CTC-CRF with a bigram phone LM denominator) or crf_trigram "
                             "(with a trigram, as the bundled model was trained; the default)")
    parser.add_argument("--guard-weight", type=cli.positive_float, metavar="W",
                        help="the distill or l2sp loss's weight beside CTC (default: the recipe's)")
    parser.add_argument("--lm-weight", type=share, default=DEFAULT_WEIGHT,
                        help=f"the new text's share of the word LM (default {DEFAULT_WEIGHT:g})")
    parser.add_argument("--tune-lm", action="store_true",
                        help="choose that share on the test split instead (its beam figures are then optimistic)")
    parser.add_argument("--seed", type=int, default=0, help="the split, the replay draw and training's seed")
    parser.add_argument("--check", action="store_true", help="only build and check the data and the split (DIR/data/)")
    cli.add_skip_bad(parser, "train and test on")
    return parser.parse_args(argv)


@interrupt.handled(TOOL)  # Ctrl-C: one line, exit status 130; every step done so far is kept in DIR
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:  # what the options name, before the data is built or anything loads
        checks.options(args)  # --model, --lm, --device
        checks.folder_or_file(args.data)
        if args.test is not None:
            checks.folder_or_file(args.test)
        checks.folder_to_write(args.out, "--out")
    except ValueError as err:
        cli.error(TOOL, err)
        return 1
    try:
        return run(args)
    except ModuleNotFoundError as err:  # the runtime-only install: checking the data works, training needs torch
        cli.error(TOOL, needs_train_extra("asr.finetune's training", err))
        return 1
    except (BuildError, ManifestError, SplitError, ModelError, LMError, ArpaError, ValueError, OSError) as err:
        cli.error(TOOL, err)
        return 1


if __name__ == "__main__":
    sys.exit(main())
