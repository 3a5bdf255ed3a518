"""Fine-tune the shipped model on your own recordings in one command, and see what it gained.

    python -m asr.finetune DATA --out DIR [--model M] [--minutes 20] [--device cpu|cuda] [--tune-lm]
                           [--test MANIFEST | --test-split auto|speaker|recording --test-share 0.2]
                           [--replay-data-root ../shared/data] [--check]

DATA: a folder of recordings with a transcript beside each (STEM.txt or STEM.lab; the first folder under
DATA names the speaker), a CSV/TSV table of audio paths and text, or a JSON Lines manifest (docs/corpus.md).
In order, each step kept in DIR (after a stop, Ctrl-C included, the same command goes on from there):

1. the manifest, built and checked as `python -m asr.manifest` builds one (DIR/data/), and a held-out test
   split: whole speakers where there are several, else recordings; fewer than 10 test utterances is refused;
2. the starting model (the bundled one, or --model) scored on the test split, greedy and beam;
3. fine-tuning, --minutes of training in all, with a progress bar in hours of audio; part of every epoch
   is the original training mixture, replayed from --replay-data-root where its manifests are;
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
import datetime  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

from asr import api, cli  # noqa: E402
from asr.audio import interrupt  # noqa: E402
from asr.audio.files import load_audio  # noqa: E402
from asr.corpus.build import BuildError, Report  # noqa: E402
from asr.corpus.manifest import ManifestError, read_manifest, write_manifest  # noqa: E402
from asr.decoding.beam import BeamConfig, LMError, WordLM  # noqa: E402
from asr.decoding.decoder import Decoder  # noqa: E402
from asr.model.device import torch_device, wants_gpu  # noqa: E402
from asr.model.errors import ModelError, needs_train_extra  # noqa: E402
from asr.model.folder import CARD, LM, WEIGHTS, folder_lm, model_folder  # noqa: E402
from asr.pretrained import default_lm_path, default_model_path  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402
from asr.training import finetune_lm as domain  # noqa: E402
from asr.training import finetune_report as report  # noqa: E402
from asr.training.lm_mix import ArpaError, mix_arpa  # noqa: E402
from asr.training.finetune import (LR, REPLAY_SHARE, REPLAY_SOURCES, Split, SplitError, given_split,  # noqa: E402
                                   input_rows, minutes, replay_rows, split_rows)
# The training stack (torch, Lightning) loads in the steps that need it: checking the data stays quick.

TOOL = "finetune"


def note(message: str) -> None:
    print(f"asr.{TOOL}: {message}", file=sys.stderr, flush=True)


def share(text: str) -> float:
    value = cli.finite_float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1 (got {text})")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
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
    parser.add_argument("--lm-weight", type=share, default=domain.DEFAULT_WEIGHT,
                        help=f"the new text's share of the word LM (default {domain.DEFAULT_WEIGHT:g})")
    parser.add_argument("--tune-lm", action="store_true",
                        help="choose that share on the test split instead (its beam figures are then optimistic)")
    parser.add_argument("--seed", type=int, default=0, help="the split, the replay draw and training's seed")
    parser.add_argument("--check", action="store_true", help="only build and check the data and the split (DIR/data/)")
    return parser.parse_args(argv)


def cached(path: Path, compute: Callable[[], dict]) -> dict:
    """The JSON at `path`, else `compute()` written there (so a resumed run does not do it again)."""
    if path.is_file():
        return json.loads(path.read_text())
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n")
    return value


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def keep_data(out: Path, split: Split, rows: list[dict]) -> None:
    """DIR/data/{all,train,test}.jsonl; refused when DIR already holds a run on other data."""
    data = out / "data"
    wanted = {"all.jsonl": rows, "train.jsonl": split.train, "test.jsonl": split.test}
    if (out / "run").exists() and any(rows_of(data / name) != value for name, value in wanted.items()):
        raise SplitError(f"{out} holds a fine-tune of other data (its data/ differs from what this data gives now); "
                         f"give another --out, or remove {out} to start again")
    data.mkdir(parents=True, exist_ok=True)
    for name, value in wanted.items():
        write_manifest(data / name, value)


def score_model(model: str | Path | None, utterances: list, lms: dict[str, Path | None], args) -> dict:
    """Scores of one model on `utterances`: one decoder each (name -> its word LM; None: greedy)."""
    recognizer = api.load_recognizer(model, threads=args.threads, device=args.device if wants_gpu(args.device) else None)
    scores = {}
    for name, lm in lms.items():
        decoder = Decoder(recognizer.tokenizer, WordLM(recognizer.tokenizer, lm, BeamConfig()) if lm else None)
        scores[name] = report.score(recognizer, utterances, decoder)
        note(f"{name}: WER {scores[name]['wer']:.2f} ({model or 'the bundled model'})")
    return scores


def train_stage(args, split: Split, start: Path, out: Path) -> bool:
    """Fine-tune and export the weights; False when Ctrl-C stopped it."""
    from asr.model.loader import load_config  # noqa: PLC0415 (the training stack from here on)
    from asr.training.data import DataConfig  # noqa: PLC0415
    from asr.training.finetune_recipe import Plan, Recipe, count_steps, plan, train_config  # noqa: PLC0415
    from asr.training.finetune_run import export_weights, fine_tune  # noqa: PLC0415

    run_dir, data = out / "run", out / "data"
    recipe = Recipe(lr=args.lr, train_blocks=args.train_blocks, replay_share=args.replay_share)
    start_cfg = load_config(start)
    long = [row for row in split.train if row["duration"] > DataConfig().max_duration]
    if long:
        note(f"{len(long)} training utterances over {DataConfig().max_duration:g} s are left out of training "
             "(cut them shorter to use them)")
    train_s = sum(row["duration"] for row in split.train if row not in long)
    roots = [name for name, _ in REPLAY_SOURCES if (args.replay_data_root / name).is_file()]
    chosen = cached(run_dir / "plan.json", lambda: vars(plan(recipe, train_s, bool(roots) and args.replay_share > 0,
                                                              args.minutes, args.device)))
    the_plan = Plan(**chosen)
    replay = data / "replay.jsonl"
    if the_plan.replay_seconds and not replay.is_file():
        avoid = {(data / row["audio"]).resolve() for row in split.train + split.test}
        write_manifest(replay, replay_rows(args.replay_data_root, the_plan.replay_seconds, data, avoid, args.seed))
    replayed = rows_of(replay) if the_plan.replay_seconds else []
    durations = [row["duration"] for row in split.train if row not in long] * the_plan.passes
    full = count_steps(durations + [row["duration"] for row in replayed], recipe.batch_seconds)
    steps = min(full, args.max_steps or full)
    cfg = train_config(recipe, start, start_cfg, run_dir, data / "train.jsonl", the_plan.passes,
                       replay if replayed else None, steps, args.device, args.threads, args.workers, args.seed)
    replay_note = f" and {minutes(replayed):.1f} min replayed from {args.replay_data_root}" if replayed else ", no replay"
    note(f"fine-tuning for up to {args.minutes:g} min: {the_plan.passes} passes over {train_s / 60:.1f} min of "
         f"recordings{replay_note}, {steps} steps (Ctrl-C stops it; the same command goes on from there)")
    trained = fine_tune(cfg, args.minutes, the_plan.total_seconds / 3600 * steps / full)
    if trained is None:
        return False
    note(f"trained {trained.steps} steps in {trained.minutes:.1f} min ({trained.audio_hours:.2f} h of audio)")
    export_weights(run_dir, out)
    return True


def lm_stage(args, out: Path, base_lm: Path, test_utts: list) -> dict:
    """DIR/lm.arpa: the training text's trigram mixed into the starting LM; what went into it."""
    data = out / "data"
    sentences = domain.text_lm(data / "train.jsonl", data / "text.arpa")
    recognizer = api.load_recognizer(out, threads=args.threads)
    words = domain.words_of(sentences)
    new = domain.missing_from_lexicon(recognizer.tokenizer, base_lm, words)
    weight, tuning = args.lm_weight, []
    if args.tune_lm:
        logprobs = [recognizer.offline_logprobs(load_audio(u.audio)) for u in test_utts]
        tuning = domain.tune_weight(logprobs, [normalize(u.text) for u in test_utts], recognizer.tokenizer,
                                    data / "text.arpa", base_lm, data)
        for candidate, wer in tuning:
            note(f"word LM weight {candidate:g}: test beam WER {wer:.2f}")
        weight = min(tuning, key=lambda row: (row[1], abs(row[0] - args.lm_weight)))[0]  # a tie: nearest the default
    mix_arpa(data / "text.arpa", base_lm, weight, out / LM)
    missing = domain.missing_from_lexicon(recognizer.tokenizer, out / LM, words)
    note(f"word LM: {len(sentences)} sentences, {len(words)} words ({len(new)} new to {base_lm.name}), weight "
         f"{weight:g}; " + (f"{len(missing)} still outside the lexicon: {' '.join(missing[:10])}" if missing
                            else "every word is in the beam search's lexicon"))
    return {"weight": weight, "tuned": args.tune_lm, "tuning": tuning, "sentences": len(sentences),
            "words": len(words), "new_words": new, "missing": missing, "base": str(base_lm)}


def run(args: argparse.Namespace) -> int:
    out, data = args.out, args.out / "data"
    built = Report()
    rows = input_rows(args.data, data, built)
    if not rows:
        raise SplitError(f"no usable utterance in {args.data}")
    split = (given_split(rows, input_rows(args.test, data, built), data) if args.test
             else split_rows(rows, args.test_split, args.test_share, args.seed))
    keep_data(out, split, rows)
    print(built.summary(data / "all.jsonl", rows), file=sys.stderr)
    note(split.describe())
    if args.check:
        return 0
    from asr.training.data import DataConfig  # noqa: PLC0415 (the training stack from here on)
    args.replay_data_root = args.replay_data_root or Path(DataConfig().root)
    if wants_gpu(args.device):
        torch_device(args.device)  # DeviceError now, not after the scoring
    start = Path(args.model) if args.model else default_model_path()
    base_lm = args.lm or folder_lm(args.model) or default_lm_path()
    if start is None or base_lm is None:
        raise ModelError("no bundled model or word LM in this installation: give --model and --lm")
    if model_folder(start) is None and not start.is_file():
        raise ModelError(f"{start}: no such model file or folder")
    test_utts = read_manifest(data / "test.jsonl")
    before = cached(out / "scores" / "before.json", lambda: score_model(args.model, test_utts,
                                                                         {"greedy": None, "beam": base_lm}, args))
    if not (out / WEIGHTS).is_file() and not train_stage(args, split, start, out):
        return interrupt.EXIT_STATUS  # Ctrl-C in training: its last step is saved in DIR/run
    if not (out / "onnx" / "model.json").is_file():
        from asr.training.finetune_run import export_onnx_folder  # noqa: PLC0415
        export_onnx_folder(out)
    lm = cached(out / "scores" / "lm.json", lambda: lm_stage(args, out, base_lm, test_utts))
    after = cached(out / "scores" / "after.json", lambda: score_model(
        out, test_utts, {"greedy": None, "beam": out / LM, "beam_base_lm": base_lm}, args))
    return finish(args, out, split, rows, built, before, after, lm)


def training_record(out: Path, args) -> dict:
    """What the run did, from its own files: the plan, the steps and minutes, the config it trained with."""
    from omegaconf import OmegaConf  # noqa: PLC0415 (with the training stack)

    run_dir = out / "run"
    cfg = OmegaConf.load(run_dir / "config.yaml")
    frozen_blocks = sum(prefix.startswith("blocks.") for prefix in cfg.freeze)
    blocks = cfg.model.n_layers - frozen_blocks
    return {**json.loads((run_dir / "trained.json").read_text()), **json.loads((run_dir / "plan.json").read_text()),
            "lr": cfg.optim.lr, "device": args.device, "replay_root": str(args.replay_data_root),
            "replay_minutes": minutes(rows_of(out / "data" / "replay.jsonl")),
            "trained_blocks": f"{blocks} of {cfg.model.n_layers} blocks" if frozen_blocks else f"all {blocks} blocks"}


def finish(args, out: Path, split: Split, rows: list[dict], built: Report, before: dict, after: dict, lm: dict) -> int:
    """Print before / after, write finetune.json, MODEL_CARD.md and config.yaml; drop the checkpoints."""
    info = {
        "name": out.name, "date": datetime.date.today().isoformat(),
        "start": f"`{args.model}`" if args.model else "the bundled model",
        "data": {"source": f"`{args.data}`", "utterances": len(rows), "minutes": minutes(rows),
                 "speakers": len({row.get("speaker", "") for row in rows}), "skipped": sum(built.skipped.values())},
        "split": {"by": split.by, "train_utterances": len(split.train), "train_minutes": minutes(split.train),
                  "test_utterances": len(split.test), "test_minutes": minutes(split.test)},
        "training": training_record(out, args),
        "lm": {**lm, "base": "the bundled word LM" if Path(lm["base"]) == default_lm_path() else f"`{lm['base']}`"},
        "before": before, "after": after, "after_base_lm": after["beam_base_lm"],
    }
    print(f"WER (%) on the held-out test split ({split.by}): {len(split.test)} utterances, "
          f"{after['beam']['words']} words")
    print("\n".join(report.results_table([("before", before), ("after", after),
                                           ("after, with the starting LM", {"beam": after["beam_base_lm"]})])))
    print()
    print("\n".join(report.speaker_table(before, after)))
    (out / "finetune.json").write_text(json.dumps(info, indent=1) + "\n")
    (out / CARD).write_text(report.model_card(info))
    shutil.copyfile(out / "run" / "config.yaml", out / "config.yaml")
    shutil.rmtree(out / "run" / "checkpoints", ignore_errors=True)  # the run is done: nothing resumes from them
    for name in ("model.safetensors", "initial.safetensors"):  # copies of weights DIR has (or had) already
        (out / "run" / name).unlink(missing_ok=True)
    note(f"wrote {out}: use it with --model {out} (asr.transcribe, asr.stream, asr.evaluate, asr.serve) "
         f"or asr.load({str(out)!r})")
    return 0


@interrupt.handled(TOOL)  # Ctrl-C: one line, exit status 130; every step done so far is kept in DIR
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
