"""Continue the long retrain by one working period, wherever it stands:

    python recipes/voices/continue.py --minutes 110

A period (1) picks up the run: this machine's unfinished period in runs/continue/ if there is one, else
the state committed in recipes/voices/state/ (else period 1: the shipped model grown to --layers blocks);
(2) builds its data: the cheaper voices' corpus and a fresh slice of Kokoro English speech (new
training-side sentences after the slices already used, new blends seeded by the period's number);
(3) trains for --minutes of wall time (augmentation variants rendered first); (4) scores the period's model
on dev (greedy and beam), FSDD test and the committed check sets (benchmarks/check_sets); (5) appends its
row to benchmarks/voices/training_progress.jsonl; (6) writes the new state (fp16 weights, step, schedule, slices)
into recipes/voices/state/, ready to commit. Each phase leaves a marker, so the same command after an
interruption resumes at the phase it stopped in. See recipes/voices/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import STDOUT

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.training import hardware  # noqa: E402
from asr.training.acoustic import carry  # noqa: E402

ENGINES_BASE = ["espeak", "flite", "festival", "hibari", "piper"]
PHASES, BLEND_SEED_BASE = carry.PHASES, carry.BLEND_SEED_BASE


def run(command: list[str], log: Path | None = None) -> None:
    """Run a command from the repo root; its output goes to `log` (appended) when given; exit on failure."""
    print(f"continue: $ {shlex.join(command)}", flush=True)
    with (log.open("a") if log else open(os.devnull, "w")) as out:
        code = subprocess.run(command, cwd=ROOT, stdout=out if log else None, stderr=STDOUT if log else None
                              ).returncode
    if code:
        where = f" (log: {log})" if log else ""
        sys.exit(f"continue: error: {shlex.join(command[:3])} ... failed with exit {code}{where}; "
                 "run the same command again to resume")


def build_data(a: argparse.Namespace, period: dict, work: Path) -> None:
    """The period's corpora under a.synthetic: the cheaper voices (train.jsonl) and its Kokoro slice
    (with --shared-base: its Kokoro slice only, beside the voices another arm rendered; with --kokoro-slice: the
    cheaper voices only; with --skip-data: the ones already there, e.g. made by a test)."""
    kokoro = period["kokoro_slice"]
    if kokoro is None:  # --no-synthetic: the experiment trains on real corpora only
        return
    if not a.skip_data:
        if a.shared_base and not (a.synthetic / "train.jsonl").exists():
            sys.exit(f"continue: error: --shared-base: no {a.synthetic / 'train.jsonl'} yet (another arm's data phase "
                     "renders it)")
        tts = ROOT / ".venv-tts" / "bin" / "python"
        if not tts.exists():
            run(["bash", "scripts/install_tts.sh"], work / "data.log")
        common = [str(tts), "recipes/synthetic/prepare.py", "--text-dir", str(a.data_root / "text"), "--out",
                  str(a.synthetic), "--jobs", str(a.jobs), "--check-utts", "0", "--rounds", "1"]
        if not a.shared_base:
            run([*common, "--engines", *ENGINES_BASE, "--hours-train", str(a.base_hours)], work / "data.log")
        if not a.kokoro_slice:
            run([*common, "--engines", "kokoro_en", "--train-manifest", Path(kokoro["manifest"]).name,
                 "--hours-train", str(a.kokoro_hours), "--start-sentence", str(kokoro["start"]),
                 "--blend-seed", str(kokoro["blend_seed"])], work / "data.log")
    made = slice_record(Path(kokoro["manifest"]))
    if made["start"] != kokoro["start"] or made["blend_seed"] != kokoro["blend_seed"]:
        sys.exit(f"continue: error: {kokoro['manifest']} holds another slice ({made}), not {kokoro}")
    kokoro.update(end=made["end"], hours=made["hours"], utterances=made["utterances"])
    if a.teacher:  # the teacher's frames of every training utterance not cached yet (new renderings)
        from asr.training.acoustic.config import compose_config  # noqa: PLC0415 (Hydra and torch: only here)

        sources = compose_config([f"experiment={a.experiment}", *data_overrides(a, period)]).data.train
        run([sys.executable, "-m", "asr.training.acoustic.whisper.teacher", "--out", str(a.teacher),
             "--teacher", a.teacher_model, "--jobs", str(a.jobs), *sorted({str(s.manifest) for s in sources})], work / "teacher.log")


def data_overrides(a: argparse.Namespace, period: dict) -> list[str]:
    """The period's corpora in the experiment's training list: the cheaper voices and its Kokoro slice."""
    if period["kokoro_slice"] is None:
        return [f"data.root={a.data_root}"]
    return [f"data.root={a.data_root}", f"data.train.2.manifest={a.synthetic / 'train.jsonl'}",
            f"data.train.3.manifest={period['kokoro_slice']['manifest']}"]


def train(a: argparse.Namespace, period: dict, run_dir: Path) -> None:
    """Fit for a.minutes from the period's starting weights (resuming the period's own checkpoint if any)."""
    start = (f"init_from={period['init_from']}" if period["init_from"]
             else f"init_from_whisper={period['state_from'].removeprefix('whisper:')}")
    teacher = [f"distill.teacher_dir={a.teacher}"] if a.teacher else []
    run([sys.executable, "-m", "asr.training", f"experiment={a.experiment}", f"run_dir={run_dir}", start,
         f"optim.step_offset={period['step_offset']}", f"optim.rewarm_steps={period['rewarm_steps']}",
         f"stop_after_minutes={a.minutes}", *data_overrides(a, period), *teacher,
         f"data.variants_dir={a.variants_dir}", f"data.variants_workers={a.jobs}", *a.overrides],
        run_dir / "train.log")


SEARCH = ("lm_weight", "word_score", "words_before", "mid_sentence")  # the scores' search settings, as asr.evaluate's


def search_settings(a: argparse.Namespace) -> dict[str, float]:
    """The search settings the scores were asked to use (--lm-weight, --word-score, --words-before, --mid-sentence),
    those given only."""
    return {name: getattr(a, name) for name in SEARCH if getattr(a, name) is not None}


def score(a: argparse.Namespace, model: Path, out: Path) -> dict[str, float]:
    """WER (%) of `model` on each progress-row set, a.jobs asr.evaluate processes at a time (each on one
    thread); their report files go to `out`, and a rerun keeps the ones already written."""
    out.mkdir(parents=True, exist_ok=True)
    sets = carry.score_sets(a.data_root, a.check_sets, a.kathleen)
    limit = ["--limit", str(a.score_limit)] if a.score_limit else []
    lm = (["--lm", str(a.lm)] if a.lm else []) + [f"--{name.replace('_', '-')}={value}"
                                                   for name, value in search_settings(a).items()]
    commands = [[sys.executable, "-m", "asr.evaluate", *args, *limit, "--model", str(model), f"--{decoding}",
                 *(lm if decoding == "beam" else []), "--report", str(out / f"{name}.json")]
                for name, (args, decoding) in sets.items() if not (out / f"{name}.json").exists()]
    def evaluate(command: list[str]) -> None:
        run(command, out / f"{Path(command[-1]).stem}.log")

    if a.jobs > 1:
        with ThreadPoolExecutor(a.jobs) as pool:
            list(pool.map(evaluate, commands))
    else:
        for command in commands:
            evaluate(command)
    return {name: round(100 * json.loads((out / f"{name}.json").read_text())["summary"]["wer"], 2) for name in sets}


def slice_record(manifest: Path) -> dict:
    """Which part of the Kokoro sentence sequence a rendered slice holds (start, end, blend_seed, hours,
    utterances), from the record recipes/synthetic/prepare.py writes beside its manifest."""
    return json.loads(manifest.with_suffix(".slice.json").read_text())["kokoro_en"]


def taken_slice(manifest: Path, seen: list[dict]) -> dict:
    """A Kokoro slice already rendered (another arm's, or one this run heard before, which it then hears
    again: said, not refused), as this period's."""
    if not manifest.with_suffix(".slice.json").exists():
        sys.exit(f"continue: error: --kokoro-slice {manifest}: no {manifest.with_suffix('.slice.json').name} beside it")
    made = slice_record(manifest)
    for heard in (s for s in seen if s["start"] < made["end"] and made["start"] < s["end"]):
        print(f"continue: note: the run heard sentences {heard['start']}-{heard['end']} of this slice in its period "
              f"{heard.get('period')}; it hears them again", flush=True)
    return {"manifest": str(manifest), "start": made["start"], "blend_seed": made["blend_seed"]}


def probe_candidate(run: Path) -> Path:
    """A probe run's candidate weights, exported again (and its old scores dropped) when the run has no
    candidate yet or has trained on since its last one."""
    candidate, last = run / "candidate.safetensors", run / "checkpoints" / "last.ckpt"
    if not candidate.exists() or (last.exists() and last.stat().st_mtime > candidate.stat().st_mtime):
        carry.export_period(run)
        shutil.rmtree(run / "scores", ignore_errors=True)
    return candidate


def machine() -> dict:
    return {"cpu": hardware.cpu_name(), "cores": os.cpu_count(), "gpu": hardware.gpu_name()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=110.0, help="wall minutes of training this period")
    p.add_argument("--kokoro-hours", type=float, default=1.0, help="hours of fresh Kokoro speech this period")
    p.add_argument("--base-hours", type=float, default=3.0, help="hours of the cheaper voices' corpus")
    p.add_argument("--layers", type=int, default=12, help="period 1 only: blocks of the grown shipped model")
    p.add_argument("--jobs", type=int, default=2, help="synthesis and rendering processes")
    p.add_argument("--start", default="grown", choices=["grown", "whisper:tiny.en", "whisper:base"],
                   help="period 1's weights: the shipped model grown to --layers blocks, or Whisper's encoder "
                        "(needs the pretrained extra; give its model and attention in the overrides)")
    p.add_argument("--fork-from", type=Path, metavar="STATE",
                   help="a new --state folder starts from this one's weights and position (an A/B arm that "
                        "branches off a run; its candidates average its own periods only)")
    p.add_argument("--new-schedule", action="store_true",
                   help="with --fork-from: the arm's learning-rate schedule starts again (warm-up, then the "
                        "experiment's decay) instead of going on from the forked run's position")
    p.add_argument("--experiment", default="voices_continue",
                   help="the training mixture (conf/experiment/; native_continue adds LibriSpeech and VCTK)")
    p.add_argument("--lm", type=Path, help="the word LM of the beam-search scores (default: the bundled one)")
    p.add_argument("--lm-weight", type=float, help="the beam-search scores' LM weight (default: the search's own)")
    p.add_argument("--word-score", type=float, help="the beam-search scores' word score (default: the search's own)")
    p.add_argument("--words-before", type=int,
                   help="the scores' words of the finals before a segment that the LMs read it after "
                        "(default: the tools')")
    p.add_argument("--mid-sentence", type=float, help="the scores' weight of a sentence end at a segment's pause "
                                                      "(default: the tools'; 0 with --words-before 0: each segment "
                                                      "a sentence of its own, as before 2026-12-07)")
    p.add_argument("--teacher", type=Path, metavar="DIR",
                   help="distil from this teacher cache (the data phase fills it for the period's corpora; the "
                        "experiment sets distill.weight)")
    p.add_argument("--teacher-model", default="base", help="with --teacher: the Whisper size it runs")
    p.add_argument("--state", type=Path, default=ROOT / "recipes" / "voices" / "state")
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "continue")
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--synthetic", type=Path, default=ROOT / "data" / "synthetic")
    p.add_argument("--variants-dir", type=Path, default=ROOT / "data" / "variants")
    p.add_argument("--check-sets", type=Path, default=ROOT / "benchmarks" / "check_sets")
    p.add_argument("--kathleen", type=Path, metavar="MANIFEST",
                   help="also score Kathleen's held-out prompts (data/kathleen/kathleen.jsonl: recipes/phones/kathleen.py)")
    p.add_argument("--progress", type=Path, default=ROOT / "benchmarks" / "voices" / "training_progress.jsonl")
    p.add_argument("--skip-data", action="store_true", help="use the corpora already on disk (tests)")
    p.add_argument("--no-synthetic", action="store_true",
                   help="the experiment has no synthetic corpora (conf/experiment/crf.yaml): nothing is rendered and "
                        "no Kokoro slice is taken")
    p.add_argument("--shared-base", action="store_true",
                   help="render this period's Kokoro slice only and train on the cheaper voices' corpus already on "
                        "disk (an arm beside another that rendered it, whose Kokoro slice differs)")
    p.add_argument("--kokoro-slice", type=Path, metavar="MANIFEST",
                   help="train on this Kokoro slice, already rendered (e.g. another arm's), instead of rendering the "
                        "period's own; the state records it, and the run's next slice starts after it")
    p.add_argument("--weights-only", action="store_true",
                   help="the state carries the weights where training stopped, not the period's candidate too (two "
                        "arms of an A/B in one period's 40 MB); the next period's candidate is its own mean")
    p.add_argument("--score-limit", type=int, default=0, help="score on each set's first N utterances only (tests)")
    p.add_argument("--dry-run", action="store_true", help="say where the run stands and what comes next")
    p.add_argument("--stop-after", choices=PHASES, help="end after this phase (e.g. data: render now, train later)")
    p.add_argument("--score-default", action="store_true",
                   help="only score the shipped model on the progress row's sets (the reference lines), then exit")
    p.add_argument("--score-run", type=Path, metavar="RUN_DIR",
                   help="only score another training run (a probe) like a period: its candidate (the mean of its kept "
                        "checkpoints and its last one) on the progress row's sets, then exit")
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for the training step (after --)")
    a = p.parse_args(argv)
    a.data_root, a.synthetic = a.data_root.resolve(), a.synthetic.resolve()
    if not (a.data_root / "speechocean762" / "dev.jsonl").exists():
        p.error(f"--data-root {a.data_root}: no speechocean762/dev.jsonl there")

    if a.score_default:
        wers = score(a, carry.DEFAULT_MODEL, a.work / "default_scores")
        carry.write_reference(a.progress, {**wers, **search_settings(a)})
        if a.progress.exists():
            carry.plot_progress(a.progress, a.progress.with_suffix(".png"))
        print(f"continue: the shipped model: {json.dumps(wers)}", flush=True)
        return 0
    if a.score_run:
        wers = score(a, probe_candidate(a.score_run), a.score_run / "scores")
        print(f"continue: {a.score_run}: {json.dumps(wers)}", flush=True)
        return 0
    if a.fork_from and carry.read_state(a.state) is None:  # its weights and position; the arm's candidates
        a.state.mkdir(parents=True, exist_ok=True)         # average its own periods only
        for name in ("state.json", "model.safetensors"):
            shutil.copyfile(a.fork_from / name, a.state / name)
        if a.new_schedule:
            forked = carry.read_state(a.state)
            forked["schedule_start"] = forked["steps"]
            (a.state / "state.json").write_text(json.dumps(forked, indent=1) + "\n")
        print(f"continue: {a.state} starts from {a.fork_from}'s weights and position", flush=True)
    period, origin = carry.current_period(a.work, a.state, a.synthetic, BLEND_SEED_BASE)
    if period["period"] == 1 and a.start != "grown" and not period["timings"]:
        period.update(init_from=None, state_from=a.start)
        origin = f"new run: {a.start}"
    if a.no_synthetic and not period["timings"]:
        period["kokoro_slice"] = None
    if a.kokoro_slice and not period["timings"]:
        period["kokoro_slice"] = taken_slice(a.kokoro_slice.resolve(), period["previous"]["kokoro_slices"])
    work = a.work / f"p{period['period']:03d}"
    print(f"continue: period {period['period']} ({origin}); phases done: "
          f"{', '.join(period['timings']) or 'none'}", flush=True)
    if a.dry_run:
        print(json.dumps(period, indent=1))
        return 0
    work.mkdir(parents=True, exist_ok=True)
    if period["period"] == 1 and period["init_from"] and not Path(period["init_from"]).exists():
        carry.grow_default(Path(period["init_from"]), a.layers)

    actions = {"data": lambda: build_data(a, period, work),
               "train": lambda: (period.update(machine=machine(), overrides=a.overrides), train(a, period, work)),
               "export": lambda: carry.export_period(work, period.get("previous_candidate")),
               "score": lambda: period.update(wers=score(a, work / "candidate.safetensors", work / "scores"))}
    for name in PHASES:
        if name in period["timings"]:
            continue
        if a.stop_after and PHASES.index(name) > PHASES.index(a.stop_after):
            print(f"continue: stopped after {a.stop_after}; the same command without --stop-after goes on",
                  flush=True)
            return 0
        start = time.monotonic()
        actions[name]()
        period["timings"][name] = round((time.monotonic() - start) / 60, 1)
        if name == "score":
            period["search"] = search_settings(a)
        carry.save_period(work, period)
    if "saved" not in period["timings"]:
        row = carry.progress_row(period, work, period.get("machine", machine()))
        carry.append_row(a.progress, row)
        carry.plot_progress(a.progress, a.progress.with_suffix(".png"))
        carry.write_state(a.state, work, period, row, a.weights_only)
        period["timings"]["saved"] = 0.0
        carry.save_period(work, period)
        print(f"continue: period {period['period']} saved in {a.state}: {json.dumps(row)}", flush=True)
    row = next(r for r in map(json.loads, a.progress.read_text().splitlines()) if r["period"] == period["period"])
    if carry.beats_default(row, a.progress):
        print(f"continue: {work / 'candidate.safetensors'} beats the shipped model on dev and both check sets "
              "with FSDD under 3%: promote it (recipes/voices/README.md, 'Promotion')", flush=True)
    print(f"continue: commit it: git add {a.state} {a.progress.with_suffix('')}* && git commit -m 'Training period "
          f"{period['period']}'", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
