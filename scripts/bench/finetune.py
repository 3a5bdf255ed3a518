"""Fine-tuning measured: what `python -m asr.finetune` gains on a speaker and on a domain the shipped model has not
met, how many minutes it takes, and what it costs on general speech.

    python scripts/bench/finetune.py [--cases speaker domain] [--minutes 20] [--threads 2] [--general-limit N]
                                     [--work runs/bench_finetune] [--out benchmarks/finetune] [--model M] [--lm LM] [--smoke]
                                     [--outside DIR] [--guard auto|replay|distill|l2sp|none] [--guard-weight W]
                                     [--speaker ID --speaker-manifest M.jsonl]

(a) speaker: LibriSpeech speaker 8226 (train-clean-100-4spk, held out of the shipped training recipes for this; the
    decoding weights were tuned on all of their recordings, and the same grids over the fine-tune half alone choose
    the same weights: docs/finetune.md), or
    --speaker ID's rows of --speaker-manifest: half of their recordings to fine-tune on, half to test
    (--test-split recording --test-share 0.5).
(b) domain: about 25 minutes of sentences full of product names and jargon (words no shipped LM has), rendered by
    flite's awb voice, which no training ever uses (recipes/synthetic/engines.py: NEVER_TRAIN); a fifth held out.
For each: the command's own before / after WER on its held-out split (greedy and beam), the training minutes and
the whole command's minutes, and the general-speech cost: speechocean762 dev and LibriSpeech dev-clean-2 WER of
the starting model and of each fine-tuned one (greedy, and beam: the model's own LM, then its second pass where it
has one, as the tools decode). Writes OUT/finetune.md
and OUT/finetune.json (committed figures only on a quiet machine: scripts/bench/quiet.py). Each case's model
folder stays under --work, and a rerun reuses the finished ones (with their measured minutes).
--outside DIR: run asr.finetune from DIR (a user's folder, outside the checkout) with its default replay root,
as a user would: where no shared corpora are found there, its guard is not replay. --guard, --guard-weight:
asr.finetune's.
General-speech scores are kept under --work (general/*.json) and reused by a rerun.
--smoke: a few utterances, a step cap and a short budget, to check the script end to end (its figures mean nothing).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "recipes" / "synthetic"), str(ROOT / "scripts")]
import engines as E  # noqa: E402
from bench import quiet  # noqa: E402

from asr import api  # noqa: E402
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.decoding.rescore import paired_second_pass  # noqa: E402
from asr.model.folder import folder_lm  # noqa: E402
from asr.pretrained import default_lm_path  # noqa: E402
from asr.training.finetune.pipeline import tools_decoder  # noqa: E402
from asr.training.finetune.report import score  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
SPEAKER = "8226"
VOICE = E.Voice("flite", "flite-awb", ("awb",))  # in NEVER_TRAIN: no training set has it
PRODUCTS = ["zorblax pro", "quintaro mini", "plumbix max", "vexelcore", "tessaly hub", "marlowe edge", "kryonet",
            "fluxora", "brevant air", "orbitek one", "nimbrel", "castora"]
JARGON = ["idempotency keys", "webhook retries", "the kubelet", "sharding", "a canary rollout", "the rate limiter",
          "telemetry", "the latency budget", "failover", "backpressure", "observability", "the runbook", "a hotfix",
          "the changelog", "an escalation", "the sandbox tenant"]
TEAMS = ["billing", "platform", "support", "mobile", "data"]
TEMPLATES = ["please ship the {p} to the {t} team by friday", "the {p} needs a fix for {j}",
             "{j} broke the {p} again last night", "can you check {j} on the {p}",
             "order two more {p} units for the {t} lab", "the new {p} firmware adds {j}",
             "we moved {j} into the {p} dashboard", "tickets about the {p} all mention {j}",
             "run {j} before the {p} release", "the {p} and the {q} share {j}",
             "the {t} team wants {j} on every {p}", "is the {q} faster than the {p}"]


def speaker_manifest(source: Path, speaker: str, out: Path, limit: int | None) -> Path:
    """The speaker's rows of the manifest `source` as a manifest with absolute audio paths."""
    rows = [u for u in read_manifest(source) if u.speaker == speaker][:limit]
    if not rows:
        raise SystemExit(f"finetune: no rows of speaker {speaker} in {source}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps({"audio": str(u.audio.resolve()), "duration": u.duration, "text": u.text,
                                       "speaker": u.speaker}) + "\n" for u in rows))
    return out


def domain_sentences(rng: random.Random) -> str:
    p, q = rng.sample(PRODUCTS, 2)
    return rng.choice(TEMPLATES).format(p=p, q=q, j=rng.choice(JARGON), t=rng.choice(TEAMS))


def domain_corpus(folder: Path, minutes: float, sentences: int | None, seed: int = 0) -> Path:
    """A folder awb/NNNN.wav + .txt of distinct domain sentences in the held-out voice, up to `minutes` of audio
    (or `sentences` of them); kept as it is when it exists."""
    voice_dir = folder / "awb"
    if voice_dir.is_dir() and any(voice_dir.glob("*.txt")):
        return folder
    voice_dir.mkdir(parents=True, exist_ok=True)
    rng, audio_rng, seen, seconds = random.Random(seed), np.random.default_rng(seed), set(), 0.0
    while seconds < minutes * 60 and (sentences is None or len(seen) < sentences):
        text = domain_sentences(rng)
        if text in seen:
            continue
        seen.add(text)
        wave = E.flite(text, VOICE, audio_rng)
        path = voice_dir / f"{len(seen):04d}.wav"
        sf.write(path, wave, E.SR)
        path.with_suffix(".txt").write_text(text + "\n")
        seconds += len(wave) / E.SR
    return folder


def general_scores(model: str | Path | None, sets: dict[str, list], lm: Path | str, threads: int, keep: Path) -> dict:
    """WER on each general set: greedy, and beam with `lm` ("bundled": the bundled LM) then the second pass that goes
    with it, as the tools decode (kept in `keep`, reused while the sets are the same)."""
    sizes = {name: len(utts) for name, utts in sets.items()}
    if keep.is_file() and (kept := json.loads(keep.read_text()))["sizes"] == sizes:
        return kept["scores"]
    recognizer = api.load_recognizer(model, threads=threads)
    second = paired_second_pass(lm, model)  # the tools' second pass, if any
    greedy = tools_decoder(recognizer.tokenizer, None, None)
    beam = tools_decoder(recognizer.tokenizer, default_lm_path() if lm == "bundled" else Path(lm), second)
    scores = {name: {"greedy": score(recognizer, utts, greedy)["wer"], "beam": score(recognizer, utts, beam)["wer"]}
              for name, utts in sets.items()}
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text(json.dumps({"model": str(model), "lm": str(lm), "sizes": sizes, "scores": scores}) + "\n")
    return scores


def run_case(name: str, data: Path, options: list[str], work: Path, args: argparse.Namespace) -> dict:
    """Fine-tune on `data` (or reuse the finished model folder) and return its record with the minutes it took."""
    out, timing = work / name / "model", work / name / "timing.json"
    command = [str(data.resolve()), "--out", str(out.resolve()), "--minutes", f"{args.minutes:g}",
               "--threads", str(args.threads), *([] if args.outside else ["--replay-data-root", str(args.data_root)]),
               *options, *(["--guard", args.guard] if args.guard else []),
               *(["--guard-weight", f"{args.guard_weight:g}"] if args.guard_weight else []), *(["--model", args.model] if args.model else []),
               *(["--lm", str(args.lm.resolve())] if args.lm else []),
               *(["--max-steps", "2", "--workers", "0"] if args.smoke else [])]
    cwd = args.outside or ROOT
    cwd.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if not timing.is_file():  # the whole command as a user runs it, start-up included; its output shown as it goes
        measured_on = {"date": datetime.date.today().isoformat(), "machine": quiet.machine(), "load": quiet.load_now()}
        began = time.perf_counter()
        code = subprocess.run([sys.executable, "-m", "asr.finetune", *command], cwd=cwd, env=env).returncode
        if code != 0:
            raise SystemExit(f"finetune: {name}: asr.finetune exited {code}")
        timing.write_text(json.dumps({"wall_minutes": round((time.perf_counter() - began) / 60, 2),
                                      "command": command, "cwd": str(cwd), "measured_on": measured_on}) + "\n")
    return {**json.loads((out / "finetune.json").read_text()), **json.loads(timing.read_text()), "model": str(out)}


def arrow(before: float, after: float) -> str:
    return f"{before:.2f} → {after:.2f}"


def report(cases: dict, general: dict, meta: dict) -> str:
    lines = ["# Fine-tuning on your own recordings (`python -m asr.finetune`)", "",
             f"Measured {meta['date']} on {meta['machine']} (1-minute load {meta['load']} at the start) by "
             f"`python scripts/bench/finetune.py {meta['argv']}`: {meta['minutes']:g} minutes of training a case, "
             f"--threads {meta['threads']}, the recipe's defaults otherwise (docs/finetune.md)"
             + (f"; asr.finetune run from {meta['outside']}, outside the checkout, with its default replay root."
                if meta.get("outside") else "."), "",
             "## On the held-out split", "",
             "| case | fine-tuned on | tested on | training min | whole command min | steps | audio seen (h) | "
             "greedy WER before → after | beam WER before → after | guard |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, case in cases.items():
        split, run = case["split"], case["training"]
        lines.append(f"| {name} | {split['train_utterances']} utts, {split['train_minutes']:.1f} min | "
                     f"{split['test_utterances']} utts, {split['test_minutes']:.1f} min | {run['minutes']:.1f} | "
                     f"{case['wall_minutes']:.1f} | {run['steps']} | {run['audio_hours']:.2f} | "
                     f"{arrow(case['before']['greedy']['wer'], case['after']['greedy']['wer'])} | "
                     f"{arrow(case['before']['beam']['wer'], case['after']['beam']['wer'])} | "
                     f"{case['training'].get('guard', 'replay')} |")
    timed = {name: case["measured_on"] for name, case in cases.items() if "measured_on" in case}
    if timed:  # a case reused from an earlier run keeps the minutes (and the machine) of the run that trained it
        lines += ["", "Minutes measured as each case trained: " + "; ".join(
            f"{name} on {m['date']}, {m['machine']}" + (f", 1-minute load {m['load']} at its start" if "load" in m else "")
            for name, m in timed.items())
            + "."]
    lines += ["", "Beam after, with the starting model's LM instead of the interpolated one (the acoustic gain alone): "
              + ", ".join(f"{name} {case['after_base_lm']['wer']:.2f}" for name, case in cases.items()) + ".", "",
              "## General speech (the cost)", "",
              f"WER of each model on sets none of them trained on ({meta['general']}); beam with the model's own LM, "
              "then its second pass where it has one, as the tools decode.", "",
              "| model | " + " | ".join(f"{s} greedy | {s} beam" for s in next(iter(general.values()))) + " |",
              "|---|" + "---:|" * (2 * len(next(iter(general.values()))))]
    for model, sets in general.items():
        lines.append(f"| {model} | " + " | ".join(f"{v['greedy']:.2f} | {v['beam']:.2f}" for v in sets.values()) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", choices=("speaker", "domain"), default=["speaker", "domain"])
    p.add_argument("--minutes", type=float, default=20.0, help="training minutes a case (asr.finetune --minutes)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--domain-minutes", type=float, default=25.0, help="minutes of domain audio to render")
    p.add_argument("--general-limit", type=int, help="only the first N utterances of each general set")
    p.add_argument("--model", help="the starting model (default: the bundled one)")
    p.add_argument("--lm", type=Path, help="the word LM the cases mix their text into (asr.finetune --lm) and the "
                                           "starting model is scored with (default: the model folder's, else the bundled one)")
    p.add_argument("--speaker", default=SPEAKER, help=f"the speaker case's speaker (default {SPEAKER})")
    p.add_argument("--speaker-manifest", type=Path,
                   help="the manifest holding --speaker's rows (default: DATA_ROOT/librispeech/train-clean-100-4spk.jsonl)")
    p.add_argument("--data-root", type=Path, default=DATA)
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "bench_finetune")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "finetune")
    p.add_argument("--outside", type=Path, help="run asr.finetune from this folder with its default replay root")
    p.add_argument("--guard", choices=("auto", "replay", "distill", "l2sp", "none"), help="asr.finetune's --guard")
    p.add_argument("--guard-weight", type=float, help="asr.finetune's --guard-weight")
    p.add_argument("--smoke", action="store_true", help="a few utterances and a step cap: the script end to end")
    quiet.add_allow_load(p)
    args = p.parse_args(argv)
    # a smoke run's figures stay out of benchmarks/
    out = args.work if args.smoke and args.out == ROOT / "benchmarks" / "finetune" else args.out
    load = quiet.guard(args.allow_load, out, "finetune")
    machine = quiet.machine()  # at the start, as quiet as the guard found it
    limit = 24 if args.smoke else None
    general_limit = 6 if args.smoke else args.general_limit
    cases = {}
    if "speaker" in args.cases:
        source = args.speaker_manifest or args.data_root / "librispeech" / "train-clean-100-4spk.jsonl"
        data = speaker_manifest(source, args.speaker, args.work / "speaker" / f"{args.speaker}.jsonl", limit)
        cases[f"speaker {args.speaker}"] = run_case("speaker", data, ["--test-split", "recording", "--test-share", "0.5"],
                                               args.work, args)
    if "domain" in args.cases:
        data = domain_corpus(args.work / "domain" / "corpus", args.domain_minutes, limit)
        cases["domain (flite awb)"] = run_case("domain", data, ["--test-share", "0.5" if args.smoke else "0.2"],
                                               args.work, args)
    sets = {"speechocean762 dev": read_manifest(args.data_root / "speechocean762" / "dev.jsonl")[:general_limit],
            "dev-clean-2": read_manifest(args.data_root / "librispeech" / "dev-clean-2.jsonl")[:general_limit]}
    start_lm = args.lm or folder_lm(args.model) or "bundled"
    keep = args.work / "general"
    general = {"starting model" if args.model else "shipped": general_scores(args.model, sets, start_lm, args.threads,
                                                                              keep / "start.json")}
    for name, case in cases.items():
        general[f"after {name}"] = general_scores(case["model"], sets, folder_lm(case["model"]), args.threads,
                                                  keep / f"{name.split()[0]}.json")
    meta = {"date": datetime.date.today().isoformat(), "machine": machine, "load": load,
            "argv": " ".join(argv if argv is not None else sys.argv[1:]), "minutes": args.minutes,
            "threads": args.threads, "outside": str(args.outside) if args.outside else None, "general": ", ".join(f"{name} {len(utts)} utterances" for name, utts in sets.items())}
    out.mkdir(parents=True, exist_ok=True)
    (out / "finetune.json").write_text(json.dumps({"meta": meta, "cases": cases, "general": general}, indent=1) + "\n")
    (out / "finetune.md").write_text(report(cases, general, meta))
    print((out / "finetune.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
