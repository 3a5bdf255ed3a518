"""Reproduce the bundled default model from scratch with one resumable command.

    python recipes/mixture/reproduce.py [--work runs] [--data-root ../shared/data] [--dry-run]

It runs the recipe of asr/pretrained/MODEL_CARD.md step by step: the synthetic corpus; stage 1
(experiment=mixture) in two halves, SpecAugment from step 6700; stage 2 (mixture_finetune); stage 3
(mixture_refine); stage 4 (mixture_regularised_probe, then mixture_regularised); soup34, the mean of
stages 3 and 4; stage 5 (mixture_warp_silence) from soup34; the mean of soup34 and stage 5 (the default
model); the word LM. A finished step leaves <work>/reproduce/<step>.done and is skipped from then on. A
training step that was cut off resumes from its last checkpoint (`asr.training.acoustic.train` does that by
itself), so after an interruption run the same command again.

The results are <work>/default.safetensors and <work>/default.arpa; copy them over asr/pretrained/ to
ship them. It takes about 8.5 h on 2 CPU cores, nearly all of it training. The files will not be
bit-identical to the shipped ones: synthetic audio differs slightly from one machine to another, and
multi-threaded training is not deterministic.

--extra KEY=VALUE (repeatable) is appended to every training command, after the step's own overrides:
the test suite runs the whole chain with a tiny model and a step or two per stage that way.
--skip STEP skips steps, e.g. `synthetic` when data/synthetic/train.jsonl was made another way.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # commands run here: the experiment configs name data/synthetic
sys.path.insert(0, str(ROOT))
from asr.training.recipe import Step, list_steps, pending_steps, run_steps  # noqa: E402

SYNTHETIC_ENGINES = ["espeak", "flite", "festival", "hibari", "piper"]  # Kokoro only speaks in the check set


def plan(work: Path, data: Path, python: str, tts_python: str, extra: list[str]) -> list[Step]:
    """Every step of the default model's recipe, in order."""

    def model(run: str) -> Path:
        return work / run / "model.safetensors"  # asr.training.acoustic.train's export: the run's best dev CER

    def train(name: str, experiment: str, init_from: Path | None, *overrides: str) -> Step:
        command = [python, "-m", "asr.training", f"experiment={experiment}", f"run_dir={work / experiment}",
                   f"data.root={data}"] + ([f"init_from={init_from}"] if init_from else [])
        return Step(name, command + list(overrides) + extra)

    def export_last(name: str, run: str) -> Step:  # stages 1 and 2 continue from their last step, not their best
        return Step(name, [python, "scripts/export_model.py", str(work / run), str(work / run / "checkpoints" / "last.ckpt")])

    def average(name: str, *models: Path) -> Step:
        return Step(name, [python, "scripts/average_models.py", *map(str, models), "--out", str(work / f"{name}.safetensors")])

    return [
        Step("synthetic", [tts_python, "recipes/synthetic/prepare.py", "--text-dir", str(data / "text"),
                           "--out", "data/synthetic", "--hours-train", "5", "--train-engines", *SYNTHETIC_ENGINES,
                           "--jobs", "2"]),
        train("stage1a", "mixture", None, "trainer.max_steps=6700"),
        train("stage1b", "mixture", None, "trainer.max_steps=12500", "data.augment.time_masks=2",
              "data.augment.freq_masks=2"),
        export_last("stage1-export", "mixture"),
        train("stage2", "mixture_finetune", model("mixture")),
        export_last("stage2-export", "mixture_finetune"),
        train("stage3", "mixture_refine", model("mixture_finetune")),
        train("stage4a", "mixture_regularised_probe", model("mixture_finetune")),
        train("stage4b", "mixture_regularised", model("mixture_regularised_probe")),
        average("soup34", model("mixture_refine"), model("mixture_regularised")),
        train("stage5", "mixture_warp_silence", work / "soup34.safetensors"),
        average("default", work / "soup34.safetensors", model("mixture_warp_silence")),
        Step("lm-text", [python, "recipes/synthetic/prepare.py", "--text-only", "--text-dir", str(data / "text"),
                         "--out", str(work / "lm")]),
        Step("lm", [python, "-m", "asr.training.lm", "--out", str(work / "default.arpa"), "--min-count", "2", "--split",
                    "train", str(work / "lm" / "train_text.txt"), str(data / "speechocean762" / "train.jsonl"),
                    str(data / "fsdd" / "fsdd.jsonl")]),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python recipes/mixture/reproduce.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=ROOT / "runs", help="run folders, markers and results")
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--tts-python", default=str(ROOT / ".venv-tts" / "bin" / "python"),
                   help="the interpreter with the TTS engines (bash scripts/install_tts.sh)")
    p.add_argument("--extra", action="append", default=[], metavar="KEY=VALUE", help="override for every training step")
    p.add_argument("--skip", nargs="+", default=[], metavar="STEP", help="steps not to run")
    p.add_argument("--dry-run", action="store_true", help="list the steps, which are done, and their commands")
    a = p.parse_args(argv)
    work, data = a.work.resolve(), a.data_root.resolve()
    steps = plan(work, data, sys.executable, a.tts_python, a.extra)
    unknown = set(a.skip) - {s.name for s in steps}
    if unknown:
        p.error(f"unknown steps {sorted(unknown)} (steps: {', '.join(s.name for s in steps)})")
    markers = work / "reproduce"
    pending = pending_steps(steps, markers, a.skip)
    list_steps(steps, markers, "reproduce", a.skip)
    if a.dry_run or not pending:
        return 0
    if not (data / "speechocean762" / "train.jsonl").is_file():
        print(f"reproduce: error: no speechocean762/train.jsonl under --data-root {data}", file=sys.stderr)
        return 2
    if any(s.name == "synthetic" for s in pending) and not Path(a.tts_python).is_file():
        print(f"reproduce: error: {a.tts_python} not found: run bash scripts/install_tts.sh "
              "(or --skip synthetic if data/synthetic/train.jsonl is already built)", file=sys.stderr)
        return 2
    code = run_steps(steps, markers, ROOT, "reproduce", a.skip)
    if code:
        return code
    print(f"reproduce: finished: {work / 'default.safetensors'} and {work / 'default.arpa'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
