"""The steps of `python -m asr.finetune` in order, each kept in the output folder DIR, so that the same command
run again after a stop (Ctrl-C included) goes on from the first step not yet done:

1. DIR/data/: the manifests and the held-out test split (`asr.training.finetune.manifests`, `.split`);
   `--check` ends here;
2. DIR/scores/before.json: the starting model scored on the test split, greedy and beam;
3. DIR/model.safetensors: the recipe (`.recipe`) trained in DIR/run/ within --minutes (`.run`);
4. DIR/onnx/: its export;
5. DIR/lm.arpa.gz and DIR/scores/lm.json: the training text's trigram mixed into the starting LM (`.lm`), and
   DIR/rescore.safetensors, the starting model's second-pass LM where it has one;
6. DIR/scores/after.json, then the tables printed, DIR/finetune.json and DIR/MODEL_CARD.md (`.report`).

`run(args)` takes the parsed options of asr/finetune.py. The training stack (torch, Lightning) loads only in
the steps that need it: checking the data stays quick.
"""
from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
from pathlib import Path
from typing import Callable

from asr import api
from asr.audio import interrupt
from asr.audio.files import load_audio
from asr.corpus.build import Report
from asr.corpus.manifest import Utterance, read_manifest, write_manifest
from asr.decoding.beam import BeamConfig, WordLM
from asr.decoding.decoder import Decoder, searches_words
from asr.decoding.neural_lm import NeuralLM
from asr.decoding.rescore import RescoreConfig, Rescorer, paired_second_pass
from asr.model.device import torch_device, wants_gpu
from asr.model.errors import ModelError
from asr.model.folder import CARD, LM, RESCORE, WEIGHTS, folder_lm, model_folder
from asr.pretrained import default_lm_path, default_model_path
from asr.text.normalize import normalize
from asr.text.tokenizer import Tokenizer
from asr.training.finetune import lm as domain
from asr.training.finetune import report
from asr.training.finetune.manifests import REPLAY_SOURCES, input_rows, keep_data, replay_rows, rows_of
from asr.training.finetune.recipe import GUARD_NAMES, Plan, Recipe, anchor_of, guard_of, plan
from asr.training.finetune.split import Split, SplitError, given_split, minutes, repeated_sentences, split_rows
from asr.training.lm.mix import mix_arpa

TOOL = "finetune"
OUTSIDE_SECOND_LM = 0.05  # the largest share of training words outside the second-pass LM's vocabulary it is kept at


def note(message: str) -> None:
    """One line of progress on stderr, named by the tool."""
    print(f"asr.{TOOL}: {message}", file=sys.stderr, flush=True)


def cached(path: Path, compute: Callable[[], dict]) -> dict:
    """The JSON at `path`, else `compute()` written there (so a resumed run does not do it again)."""
    if path.is_file():
        return json.loads(path.read_text())
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n")
    return value


def score_model(model: str | Path | None, utterances: list[Utterance], lms: dict[str, Path | None],
                second: Path | None, args: argparse.Namespace) -> dict:
    """Scores of one model on `utterances`: one decoder each (name -> its word LM; None: greedy, which for a phone
    model is its lexicon searched without an LM, as every tool's --greedy), each search with a word LM followed by
    the second pass over `second` where given, as the tools decode."""
    recognizer = api.load_recognizer(model, threads=args.threads, device=args.device if wants_gpu(args.device) else None)
    scores = {}
    for name, lm in lms.items():
        decoder = tools_decoder(recognizer.tokenizer, lm, second)
        scores[name] = report.score(recognizer, utterances, decoder)
        how = " (phones: the lexicon without an LM)" if decoder.kind == "lexicon" else ""
        note(f"{name}{how}: WER {scores[name]['wer']:.2f} ({model or 'the bundled model'})")
    return scores


def tools_decoder(tokenizer: Tokenizer, lm: Path | None, second: Path | None) -> Decoder:
    """The decoder the tools make for word LM `lm` (None: greedy) and second-pass LM `second` (None: none), plain
    upper-case finals; its own WordLM, not WordLM.shared, so that it is freed before training."""
    search = WordLM(tokenizer, lm, BeamConfig()) if searches_words(tokenizer, lm) else None
    rescorer = Rescorer(search.words, RescoreConfig(lm=str(second))) if second and lm and search else None
    return Decoder(tokenizer, search, rescorer=rescorer)


def train_stage(args: argparse.Namespace, split: Split, start: Path, out: Path) -> bool:
    """Fine-tune and export the weights; False when Ctrl-C stopped it."""
    from asr.model.loader import load_config  # noqa: PLC0415 (the training stack from here on)
    from asr.training.acoustic.data import DataConfig  # noqa: PLC0415
    from asr.training.finetune.run import count_steps, export_weights, fine_tune, train_config  # noqa: PLC0415

    run_dir, data = out / "run", out / "data"
    recipe = Recipe(lr=args.lr, train_blocks=args.train_blocks, replay_share=args.replay_share, guard=args.guard,
                    guard_weight=args.guard_weight, criterion=args.criterion)
    start_cfg = load_config(start)
    long = [row for row in split.train if row["duration"] > DataConfig().max_duration]
    if long:
        note(f"{len(long)} training utterances over {DataConfig().max_duration:g} s are left out of training "
             "(cut them shorter to use them)")
    train_s = sum(row["duration"] for row in split.train if row not in long)
    roots = replay_found(args.replay_data_root)
    guard = guard_of(recipe, bool(roots))
    chosen = cached(run_dir / "plan.json", lambda: {**vars(plan(recipe, train_s, guard == "replay", args.minutes,
                                                                args.device)), "guard": guard})
    guard = chosen.pop("guard", guard)  # a resumed run keeps the guard it started with
    the_plan = Plan(**chosen)
    replay = data / "replay.jsonl"
    if the_plan.replay_seconds and not replay.is_file():
        avoid = {(data / row["audio"]).resolve() for row in split.train + split.test}
        write_manifest(replay, replay_rows(args.replay_data_root, the_plan.replay_seconds, data, avoid, args.seed))
    replayed = rows_of(replay) if the_plan.replay_seconds else []
    durations = [row["duration"] for row in split.train if row not in long] * the_plan.passes
    full = count_steps(durations + [row["duration"] for row in replayed], recipe.batch_seconds)
    steps = min(full, args.max_steps or full)
    anchor = anchor_of(recipe, guard)
    cfg = train_config(recipe, start, start_cfg, run_dir, data / "train.jsonl", the_plan.passes,
                       replay if replayed else None, steps, args.device, args.threads, args.workers, args.seed, anchor)
    note(f"fine-tuning for up to {args.minutes:g} min: {the_plan.passes} passes over {train_s / 60:.1f} min of "
         f"recordings, {steps} steps (Ctrl-C stops it; the same command goes on from there)")
    note(f"guard against forgetting: {guard_line(guard, anchor, minutes(replayed), args.replay_data_root, roots)}")
    trained = fine_tune(cfg, args.minutes, the_plan.total_seconds / 3600 * steps / full)
    if trained is None:
        return False
    note(f"trained {trained.steps} steps in {trained.minutes:.1f} min ({trained.audio_hours:.2f} h of audio)")
    export_weights(run_dir, out)
    return True


def replay_found(root: Path) -> list[str]:
    """The replay manifests (REPLAY_SOURCES) found under `root`."""
    return [name for name, _ in REPLAY_SOURCES if (root / name).is_file()]


def guard_line(guard: str, anchor: dict, replay_minutes: float, replay_root: Path, roots: list[str]) -> str:
    """What keeps the run from forgetting general speech, in words (the plan line's second half)."""
    found = (f"no replay corpus under {replay_root}" if not roots else "replay not asked for")
    if guard == "replay":
        return f"{GUARD_NAMES[guard]}, {replay_minutes:.1f} min from {replay_root}"
    if guard == "none":
        return f"none ({found}; expect it to forget general speech)"
    return f"{GUARD_NAMES[guard]} (weight {anchor['weight']:g}; {found})"


def lm_stage(args: argparse.Namespace, out: Path, base_lm: Path, test_utts: list[Utterance]) -> dict:
    """DIR/lm.arpa.gz: the training text's trigram mixed into the starting LM (and DIR/lm.klm, its KenLM binary, where
    build_binary is installed); what went into it."""
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
    note(domain.binary_beside(out / LM))
    missing = domain.missing_from_lexicon(recognizer.tokenizer, out / LM, words)
    note(f"word LM: {len(sentences)} sentences, {len(words)} words ({len(new)} new to {base_lm.name}), weight "
         f"{weight:g}; " + (f"{len(missing)} still outside the lexicon: {' '.join(missing[:10])}" if missing
                            else "every word is in the beam search's lexicon"))
    return {"weight": weight, "tuned": args.tune_lm, "tuning": tuning, "sentences": len(sentences),
            "words": len(words), "new_words": new, "missing": missing, "base": str(base_lm)}


def run(args: argparse.Namespace) -> int:
    """Every step not yet done in args.out; the exit status (interrupt.EXIT_STATUS when Ctrl-C stopped training)."""
    out, data = args.out, args.out / "data"
    built = Report()
    rows = input_rows(args.data, data, built, args.skip_bad)
    if not rows:
        raise SplitError(f"no usable utterance in {args.data}")
    split = (given_split(rows, input_rows(args.test, data, built, args.skip_bad), data) if args.test
             else split_rows(rows, args.test_split, args.test_share, args.seed))
    keep_data(out, split, rows)
    print(built.summary(data / "all.jsonl", rows), file=sys.stderr)
    note(split.describe())
    if repeated := repeated_sentences(split):
        note(f"warning: {repeated} of the {len(split.test)} test utterances say a sentence the training text also "
             "holds, which the word LM learns: the after figures then measure memory, not hearing. Hold out "
             "recordings of sentences never said in training (--test MANIFEST)")
    if args.check:
        return 0
    from asr.training.acoustic.data import DataConfig  # noqa: PLC0415 (the training stack from here on)
    args.replay_data_root = args.replay_data_root or Path(DataConfig().root)
    guard_of(Recipe(replay_share=args.replay_share, guard=args.guard), bool(replay_found(args.replay_data_root)))
    if wants_gpu(args.device):
        torch_device(args.device)  # DeviceError now, not after the scoring
    start = Path(args.model) if args.model else default_model_path()
    base_lm = args.lm or folder_lm(args.model) or default_lm_path()
    if start is None or base_lm is None:
        raise ModelError("no bundled model or word LM in this installation: give --model and --lm")
    if model_folder(start) is None and not start.is_file():
        raise ModelError(f"{start}: no such model file or folder")
    second = paired_second_pass(args.lm or folder_lm(args.model) or "bundled", args.model)  # as the tools pair them
    test_utts = read_manifest(data / "test.jsonl")
    before = cached(out / "scores" / "before.json", lambda: score_model(
        args.model, test_utts, {"greedy": None, "beam": base_lm}, second, args))
    if not (out / WEIGHTS).is_file() and not train_stage(args, split, start, out):
        return interrupt.EXIT_STATUS  # Ctrl-C in training: its last step is saved in DIR/run
    if not (out / "onnx" / "model.json").is_file():
        from asr.training.finetune.run import export_onnx_folder  # noqa: PLC0415
        export_onnx_folder(out)
    lm = cached(out / "scores" / "lm.json", lambda: lm_stage(args, out, base_lm, test_utts))
    decided = (out / RESCORE).is_file() or (out / "scores" / "after.json").is_file()  # on a rerun, as it was
    if second and not decided and keeps_second_pass(second, data / "train.jsonl"):
        shutil.copyfile(second, out / RESCORE)  # the folder's LM is new, its second pass the starting one's
    after = cached(out / "scores" / "after.json", lambda: score_model(
        out, test_utts, {"greedy": None, "beam": out / LM, "beam_base_lm": base_lm}, paired_second_pass(out / LM, out),
        args))
    return finish(args, out, split, rows, built, before, after, lm)


def keeps_second_pass(second: Path, train: Path) -> bool:
    """Whether the fine-tuned folder keeps the starting model's second pass: where the training transcripts are
    ordinary English for its LM, at most OUTSIDE_SECOND_LM of their words outside its vocabulary. A word it lacks
    scores as a rare one, so a vocabulary of names and jargon that the new first-pass LM has learned would be
    ranked back down (`docs/finetune.md`: 1-3% for read English, 27% for the product-names case)."""
    vocabulary = NeuralLM.vocabulary_of(second)
    words = [word for row in rows_of(train) for word in normalize(row["text"]).split()]
    outside = sum(word not in vocabulary for word in words) / max(1, len(words))
    keep = outside <= OUTSIDE_SECOND_LM
    note(f"second pass: {100 * outside:.1f}% of the training words are outside its LM's vocabulary, so the model "
         + ("keeps it (rescore.safetensors)" if keep else
            f"leaves it out (over {100 * OUTSIDE_SECOND_LM:g}%: it would rank your words down)"))
    return keep


def training_record(out: Path, args: argparse.Namespace) -> dict:
    """What the run did, from its own files: the plan, the steps and minutes, the config it trained with."""
    from omegaconf import OmegaConf  # noqa: PLC0415 (with the training stack)

    run_dir = out / "run"
    cfg = OmegaConf.load(run_dir / "config.yaml")
    frozen_blocks = sum(prefix.startswith("blocks.") for prefix in cfg.freeze)
    blocks = cfg.model.n_layers - frozen_blocks
    anchor = cfg.get("anchor", {"kind": "none", "weight": 0.0})  # (a run from before anchors: none)
    return {**json.loads((run_dir / "trained.json").read_text()), **json.loads((run_dir / "plan.json").read_text()),
            "guard_weight": float(anchor["weight"]), "lr": cfg.optim.lr, "device": args.device,
            "criterion": cfg.get("criterion", {}).get("kind", "ctc"),  # (a run from before criteria: CTC)
            "criterion_order": cfg.get("criterion", {}).get("order"),
            "replay_root": str(args.replay_data_root),
            "replay_minutes": minutes(rows_of(out / "data" / "replay.jsonl")),
            "trained_blocks": f"{blocks} of {cfg.model.n_layers} blocks" if frozen_blocks else f"all {blocks} blocks"}


def finish(args: argparse.Namespace, out: Path, split: Split, rows: list[dict], built: Report, before: dict,
           after: dict, lm: dict) -> int:
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
        "second_pass": (None if not (out / RESCORE).is_file() else "the bundled neural word LM" if args.model is None
                        else f"{args.model}'s second-pass LM"),
    }
    print(f"WER (%) on the held-out test split ({split.by}): {len(split.test)} utterances, "
          f"{after['beam']['words']} words; {report.beam_words(info)}")
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
