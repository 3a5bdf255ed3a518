"""The A/Bs of carried runs: one table and one curve from the arms' progress rows.

    python scripts/bench/ab.py [--ab ab|native|phones|crf|robustness] [--benchmarks benchmarks]

`--ab ab` is the A/B of starting points and lookahead (issue #44, 2026-11-29; recipes/voices/README.md),
`--ab native` the one of native speech and a full-context teacher (recipes/native/README.md), `--ab phones` the
one of phone units spelled through a lexicon (recipes/phones/README.md; a phone arm's greedy column is its search
without an LM), `--ab crf` the one of training criteria, CTC against CTC-CRF (recipes/crf/README.md; its arms start
from the shipped model, whose scores on the same sets are the start row), `--ab robustness` the one of level
invariance and channel augmentation (recipes/robustness/README.md; its rows also carry the robustness
benchmark's figures on the period's candidate, recipes/robustness/score.py). Each arm is a
carried run of recipes/voices/continue.py whose periods append a row to its own JSON Lines file; arms that fork
a run start from that run's row of the forked period. Writes the table between the markers in
benchmarks/<ab>/README.md and the curve benchmarks/<ab>/curve.png: each arm's WER against its compute since
the A/B began. Compute is counted in steps times what a step of the arm's shapes costs on one reference
machine (Arm.step_s, from `python scripts/bench/step.py`), not in wall time: the 2-core machines that
periods run on differ in speed by up to 3.5x from one period to the next.

    python scripts/bench/ab.py --cost [--arms abcd] [--limit 100] [--allow-load]

measures what each arm's model costs to run, as the shipped one is measured: its latest candidate exported to
ONNX fp32, streamed in 500 ms chunks through the beam search with the bundled word LM at 1 thread in a process
without torch, over the first --limit dev utterances (chunk compute p95: model step and search, RTF, the
export's size, the process's peak RSS); writes benchmarks/<ab>/cost.json, whose columns the table then shows.
Run it on a quiet machine (scripts/bench/quiet.py): the shapes fix the cost, so once per arm is enough (--arms
measures only those arms and keeps the others' rows). `--shipped-onnx DIR` measures the shipped model's export
in DIR the same way, in the same run, for the shipped row: the arms' costs are judged as ratios to it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # the `bench` package
DEV = ROOT.parent / "shared" / "data" / "speechocean762" / "dev.jsonl"


class Arm(NamedTuple):
    letter: str
    what: str
    rows: str  # its progress rows, relative to --benchmarks
    from_fork: bool  # starts from the fork's weights and scores
    state: str  # its state folder, relative to the checkout
    step_s: float  # seconds a training step of its shapes takes on the reference machine (scripts/bench/step.py)
    continues: str = ""  # the letter of the arm whose state it forked: that arm's rows up to the fork come first


class AB(NamedTuple):
    """One A/B: where its table, curve and costs go (a folder under --benchmarks, its README holding the table's
    markers), the run its forked arms start from (that run's rows and the period forked), the shipped model's
    scores on the same sets, its arms, the table's columns and the curve's panels (beam, greedy, title)."""
    folder: str
    title: str
    fork_name: str
    fork_rows: str  # "" where the arms start from the shipped model: the start row is its reference scores
    fork_period: int
    reference: str
    arms: list[Arm]
    columns: list[tuple[str, str]]
    panels: list[tuple[str, str, str]]


SPEECHOCEAN_DEV = ("dev_beam", "dev_greedy", "speechocean762 dev")
ABS = {
    "ab": AB("ab", "Starting points and lookahead", "the carried run", "voices/training_progress.jsonl", 12,
             "voices/training_progress_reference.json", [
        Arm("a", "the carried run, continued", "voices/training_progress.jsonl", True, "recipes/voices/state", 0.869),
        Arm("b", "+ lookahead inside 480 ms chunks", "ab/lookahead.jsonl", True, "recipes/ab/lookahead/state", 0.902),
        Arm("c", "Whisper tiny.en's encoder", "ab/whisper_tiny.jsonl", False, "recipes/ab/whisper_tiny/state", 1.351),
        Arm("d", "Whisper base's encoder (or base teaching c)", "ab/whisper_base.jsonl", False,
            "recipes/ab/whisper_base/state", 3.080)],
        [("dev_greedy", "dev greedy"), ("dev_beam", "dev beam + LM"), ("kokoro_check_beam", "Kokoro check"),
         ("synthetic_check_beam", "synthetic check"), ("fsdd_beam", "FSDD test")], [SPEECHOCEAN_DEV]),
    "native": AB("native", "Native speech and a full-context teacher", "the lookahead arm", "ab/lookahead.jsonl", 14,
                 "native/a_reference.json", [
        Arm("a", "lookahead run on the native mixture", "native/a.jsonl", True, "recipes/native/a/state", 0.902),
        Arm("b", "(a) + distillation from Whisper base", "native/b.jsonl", True, "recipes/native/b/state", 0.902),
        Arm("c", "Whisper tiny.en's shapes and weights, distilled from Whisper base (its compute counts the steps "
                 "since Whisper's weights)", "native/c.jsonl", False, "recipes/native/c/state", 1.351),
        Arm("d", "(a) continued at lookahead chunks of 4, 6 and 12 frames, served at 4 (160 ms)", "native/d.jsonl",
            True, "recipes/native/d/state", 0.902, continues="a")],
        [("dev_greedy", "dev greedy"), ("dev_beam", "dev beam + LM"), ("libri_dev_greedy", "LS dev greedy"),
         ("libri_dev_beam", "LS dev beam + LM"), ("kokoro_check_beam", "Kokoro check"),
         ("synthetic_check_beam", "synthetic check"), ("fsdd_beam", "FSDD test")],
        [SPEECHOCEAN_DEV, ("libri_dev_beam", "libri_dev_greedy", "LibriSpeech dev-clean-2")]),
    "phones": AB("phones", "Phones and a pronunciation lexicon", "the shipped model: the native arm a", "native/a.jsonl",
                 15, "phones/a_reference.json", [
        Arm("a", "the shipped character model continued (the reference)", "phones/a.jsonl", False,
            "recipes/phones/a/state", 0.902),
        Arm("b", "the shipped encoder, a new phone layer (alone first, then everything)", "phones/b.jsonl", False,
            "recipes/phones/b/state", 0.902),
        Arm("c", "phones from scratch at the shipped shapes", "phones/c.jsonl", False, "recipes/phones/c/state", 0.902)],
        [("dev_greedy", "dev greedy"), ("dev_beam", "dev beam + LM"), ("libri_dev_greedy", "LS dev greedy"),
         ("libri_dev_beam", "LS dev beam + LM"), ("kathleen_test_beam", "Kathleen held out"),
         ("kokoro_check_beam", "Kokoro check"), ("synthetic_check_beam", "synthetic check"), ("fsdd_beam", "FSDD test")],
        [("libri_dev_beam", "libri_dev_greedy", "LibriSpeech dev-clean-2"), SPEECHOCEAN_DEV]),
    "crf": AB("crf", "The training criterion: CTC or CTC-CRF", "the shipped phone model", "", 0, "crf/a_reference.json", [
        Arm("a", "plain CTC continued (the control)", "crf/a.jsonl", False, "recipes/crf/a/state", 0.902),
        # step costs: a's, scaled by scripts/bench/step.py's ratios on one machine (CTC 0.531, bigram CRF 0.560,
        # trigram CRF 0.619 s a step with bf16, 2026-12-04; recipes/crf/README.md)
        Arm("b", "CTC-CRF, bigram phone LM denominator, lambda 0.1", "crf/b.jsonl", False, "recipes/crf/b/state",
            0.951),
        Arm("c", "CTC-CRF, trigram phone LM denominator, lambda 0.1", "crf/c.jsonl", False, "recipes/crf/c/state",
            1.051),
        Arm("d", "(c) after its first period, continued with speechocean762 train drawn twice as often",
            "crf/d.jsonl", False, "recipes/crf/d/state", 1.051, continues="c"),
        Arm("e", "(d) after its second period, cooled down: lr 1e-4 to 2e-6 over one period", "crf/e.jsonl", False,
            "recipes/crf/e/state", 1.051, continues="d"),
        Arm("f", "(d)'s mixture from (c)'s first period, more regularisation: dropout 0.2, six time masks",
            "crf/f.jsonl", False, "recipes/crf/f/state", 1.051, continues="c"),
        Arm("g", "(f) with speechocean762 train eight times an epoch", "crf/g.jsonl", False, "recipes/crf/g/state",
            1.051, continues="c")],
        [("libri_dev_beam", "LS dev beam + LM"), ("libri_dev_greedy", "LS dev no LM"), ("dev_beam", "dev beam + LM"),
         ("dev_greedy", "dev no LM"), ("kathleen_test_beam", "Kathleen held out"), ("kokoro_check_beam", "Kokoro check"),
         ("synthetic_check_beam", "synthetic check"), ("fsdd_beam", "FSDD test"), ("lm_weight", "LM weight"),
         ("word_score", "word score")],
        [("libri_dev_beam", "libri_dev_greedy", "LibriSpeech dev-clean-2"), SPEECHOCEAN_DEV]),
    "robustness": AB(
        "robustness", "Hearing the user's channel: level invariance and channel augmentation", "the shipped model", "", 0,
        "robustness/a_reference.json", [
            Arm("a", "today's augmentation continued (the control)", "robustness/a.jsonl", False,
                "recipes/robustness/a/state", 1.051),
            Arm("b", "level invariance (a running mean) and gain augmentation", "robustness/b.jsonl", False,
                "recipes/robustness/b/state", 1.051),
            Arm("c", "(b) and channel augmentation (codecs, real rooms, microphones, noise, talkers, noise alone)",
                "robustness/c.jsonl", False, "recipes/robustness/c/state", 1.051),
            Arm("d", "(c) at a third of the learning rate (1e-4), FSDD three and Kathleen four times an epoch",
                "robustness/d.jsonl", False, "recipes/robustness/d/state", 1.051)],
        [("libri_dev_beam", "LS dev"), ("dev_beam", "so762 dev"), ("robust_ratio", "robustness mean ratio"),
         ("robust_libri_clean", "LS subset clean"), ("robust_dev_clean", "so762 subset clean"),
         ("noise_wpm", "noise-alone words/min"), ("fsdd_beam", "FSDD test"), ("kathleen_test_beam", "Kathleen held out"),
         ("lm_weight", "LM weight"), ("word_score", "word score")],
        [("libri_dev_beam", "libri_dev_greedy", "LibriSpeech dev-clean-2"), SPEECHOCEAN_DEV]),
}
SEARCH_COLUMNS = ("lm_weight", "word_score")  # the search's settings a row was scored with, not WER
RATIO_COLUMNS = ("robust_ratio",)  # ratios, not WER
COST_COLUMNS = [("chunk_p95_ms", "chunk p95 ms", 1), ("rtf", "RTF", 3), ("onnx_mb", "ONNX MB", 1),
                ("peak_rss_mb", "RSS MB", 0)]
BEGIN, END = "<!-- ab table: scripts/bench/ab.py -->", "<!-- end of ab table -->"


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def arm_rows(benchmarks: Path, ab: AB) -> tuple[dict, dict[str, list[dict]]]:
    """(the fork's row, arm letter -> its rows after the fork, each with `ab_hours`: its wall hours of training so
    far, and `ab_compute_hours`: its steps so far times its step's cost on the reference machine, in hours)."""
    if ab.fork_rows:
        fork = next(r for r in read_rows(benchmarks / ab.fork_rows) if r["period"] == ab.fork_period)
    else:
        fork = {"steps": 0, **(shipped_scores(benchmarks, ab) or {})}
    arms = {}
    for arm in ab.arms:
        rows = [r for r in read_rows(benchmarks / arm.rows) if r["period"] > ab.fork_period or not arm.from_fork]
        if arm.continues and rows:
            rows = [dict(r) for r in arms[arm.continues] if r["period"] < rows[0]["period"]] + rows
        hours = 0.0
        for row in rows:
            row.update({f: value for f, value in (row.get("search") or {}).items() if value is not None})
            hours += row["phase_minutes"]["train"] / 60
            row["ab_hours"] = round(hours, 2)
            steps = row["steps"] - (fork["steps"] if arm.from_fork else 0)
            row["ab_compute_hours"] = round(steps * arm.step_s / 3600, 2)
        arms[arm.letter] = rows
    return fork, arms


def shipped_scores(benchmarks: Path, ab: AB) -> dict | None:
    """The shipped model's scores on the A/B's sets, the bar every arm is measured against."""
    path = benchmarks / ab.reference
    return json.loads(path.read_text()) if path.exists() else None


def cell(row: dict, column: str) -> str:
    if row.get(column) is None:  # a row scored before a set joined lacks it
        return ""
    if column in RATIO_COLUMNS:
        return f"{row[column]:.2f}"
    return f"{row[column]:g}" if column in SEARCH_COLUMNS else f"{row[column]:.1f}"


def spent_cells(cost: dict) -> str:
    """The cost columns of one table row (empty where cost.json has no figure)."""
    return " | ".join(f"{cost[c]:.{digits}f}" if c in cost else "" for c, _, digits in COST_COLUMNS) + " |"


def table(ab: AB, fork: dict, arms: dict[str, list[dict]], costs: dict[str, dict], shipped: dict | None = None) -> str:
    """The arms' latest scores under the shipped model's (if given), and what their models cost where `costs`
    (cost.json) has them."""
    columns = ab.columns
    lines = ["| arm | periods | training hours | steps | compute hours | " + " | ".join(label for _, label in columns) + " | "
             + " | ".join(label for _, label, _ in COST_COLUMNS) + " |",
             "|---|---:|---:|---:|---:|" + "---:|" * (len(columns) + len(COST_COLUMNS))]
    if shipped:
        cost = costs.get("shipped", {})
        lines.append(f"| the model shipped when the A/B began ({shipped['date']}) | | | | | "
                     + " | ".join(cell(shipped, c) for c, _ in columns) + " | " + spent_cells(cost))
    if ab.fork_rows:  # (arms that start from the shipped model have its row above as their start)
        lines.append(f"| start: {ab.fork_name}'s period {ab.fork_period} | | | {fork['steps']} | | "
                     + " | ".join(cell(fork, c) for c, _ in columns) + " |" + " |" * len(COST_COLUMNS))
    for arm in ab.arms:
        letter, what, rows, cost = arm.letter, arm.what, arms[arm.letter], costs.get(arm.letter, {})
        spent = spent_cells(cost)
        if not rows:
            lines.append(f"| {letter}: {what} | 0 | | | | " + " | ".join("" for _ in columns) + " | " + spent)
            continue
        last = rows[-1]
        steps = last["steps"] - (fork["steps"] if arm.from_fork else 0)
        lines.append(f"| {letter}: {what} | {len(rows)} | {last['ab_hours']:.2f} | {steps} | "
                     f"{last['ab_compute_hours']:.2f} | "
                     + " | ".join(cell(last, c) for c, _ in columns) + " | " + spent)
    return "\n".join(lines)


def cost_worker(onnx_dir: Path, manifest: Path, limit: int) -> dict:
    """Stream the first `limit` utterances of `manifest` through the export in `onnx_dir` as asr.stream does (500 ms
    chunks, beam search with the bundled word LM, 1 thread), in this process, which must not import torch."""
    sys.modules["torch"] = None  # the torch-free runtime, as users of the [onnx] extra run it
    import numpy as np  # noqa: PLC0415

    from asr.audio.files import load_audio  # noqa: PLC0415
    from asr.corpus.manifest import read_manifest  # noqa: PLC0415
    from asr.decoding.decoder import Decoder  # noqa: PLC0415
    from asr.model.recognizer import Recognizer  # noqa: PLC0415
    from bench.ours import stream_clip  # noqa: PLC0415
    from bench.server_process import proc_rss_mb  # noqa: PLC0415

    meta = json.loads((onnx_dir / "model.json").read_text())
    recognizer = Recognizer.load(onnx_dir / meta["files"]["fp32"], backend="onnx", threads=1)
    decoder = Decoder.load(recognizer.tokenizer)
    chunk_ms, audio_s = [], 0.0
    for utt in read_manifest(manifest)[:limit]:
        wave = load_audio(utt.audio)
        chunk_ms += stream_clip(recognizer, decoder, wave, 8000)[1]
        audio_s += wave.size / 16000
    return {"utterances": limit, "chunks": len(chunk_ms), "chunk_p50_ms": float(np.percentile(chunk_ms, 50)),
            "chunk_p95_ms": float(np.percentile(chunk_ms, 95)), "rtf": sum(chunk_ms) / 1000 / audio_s,
            "peak_rss_mb": proc_rss_mb(os.getpid(), "VmHWM")}


def export_cost(onnx_dir: Path, manifest: Path, limit: int) -> dict:
    """cost_worker on the export in `onnx_dir`, in a process of its own, plus the export's size."""
    with tempfile.TemporaryDirectory() as tmp:  # not in onnx_dir, which may be a folder the user keeps
        out = Path(tmp) / "cost.json"
        subprocess.run([sys.executable, __file__, "--cost-worker", str(onnx_dir), "--manifest", str(manifest),
                        "--limit", str(limit), "--json", str(out)], check=True, cwd=ROOT)
        cost = json.loads(out.read_text())
    return {**cost, "onnx_mb": (onnx_dir / "encoder.onnx").stat().st_size / 1e6}


def measure_costs(arms: list[Arm], manifest: Path, limit: int, load: float, letters: str) -> dict[str, dict]:
    """The latest candidate of each arm in `letters`, exported and streamed (export_cost) -> arm -> cost row."""
    costs = {}
    for arm in arms:
        letter, state = arm.letter, arm.state
        if letter not in letters:
            continue
        candidate = ROOT / state / "candidate.safetensors"  # a state too big to carry it: its last weights
        candidate = candidate if candidate.exists() else candidate.with_name("model.safetensors")
        if not candidate.exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "asr.export", "--onnx", tmp, "--model", str(candidate)],
                           check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
            period = json.loads((ROOT / state / "state.json").read_text())["period"]
            costs[letter] = {**export_cost(Path(tmp), manifest, limit), "period": period,
                             "date": datetime.date.today().isoformat(), "load": load}
        print(f"ab: arm {letter}: {json.dumps(costs[letter])}", flush=True)
    return costs


def plot(ab: AB, fork: dict, arms: dict[str, list[dict]], out: Path, shipped: dict | None = None) -> None:
    import matplotlib  # noqa: PLC0415 (the train extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, len(ab.panels), figsize=(7 * len(ab.panels), 5.6), squeeze=False)
    for ax, (beam, greedy, title) in zip(axes[0], ab.panels):
        for arm, color in zip(ab.arms, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
            rows = ([{**fork, "ab_compute_hours": 0.0}] if arm.from_fork and beam in fork else []) + arms[arm.letter]
            rows = [r for r in rows if beam in r]
            if len(rows) < 2 and not (rows and not arm.from_fork):
                continue
            hours = [r["ab_compute_hours"] for r in rows]
            ax.plot(hours, [r[beam] for r in rows], "o-", color=color, label=f"{arm.letter}: {arm.what} (beam + LM)")
            ax.plot(hours, [r[greedy] for r in rows], "o--", color=color, alpha=0.6, label=f"{arm.letter}: greedy")
        if shipped and beam in shipped:
            ax.axhline(shipped[beam], color="gray", linestyle=":", label="the model shipped when the A/B began (beam + LM)")
            ax.axhline(shipped[beam] - 2, color="black", linestyle=":", linewidth=0.8,
                       label="2 points better: the bar an arm must pass")
            ax.set_ylim(bottom=min(ax.get_ylim()[0], shipped[beam] - 4))
        ax.set_xlabel("compute since the A/B began (hours: steps x a step's cost on the reference machine)", fontsize=8)
        ax.set_ylabel(f"{title} WER (%)")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{ab.title}: the arms at equal compute", fontsize=11)
    fig.tight_layout()
    handles, labels = axes[0][0].get_legend_handles_labels()  # every panel draws the same lines
    if handles:  # one legend below the panels, inside the saved image (bbox_inches), so no point is hidden
        fig.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from bench import quiet  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python scripts/bench/ab.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmarks", type=Path, default=ROOT / "benchmarks")
    parser.add_argument("--ab", choices=ABS, default="ab", help="which A/B (ab: starting points and lookahead, "
                                                                 "2026-11-29; native: native speech and a teacher; "
                                                                 "phones: phone units and a lexicon)")
    parser.add_argument("--cost", action="store_true", help="measure each arm's model first (cost.json)")
    parser.add_argument("--manifest", type=Path, default=DEV, help="the utterances --cost streams")
    parser.add_argument("--limit", type=int, default=100, help="how many of them")
    parser.add_argument("--arms", help="the arms --cost measures (letters, default all; the others keep their rows "
                                       "in cost.json)")
    parser.add_argument("--shipped-onnx", type=Path, metavar="DIR",
                        help="with --cost: also measure this export as the shipped model's row (cost.json: shipped)")
    parser.add_argument("--cost-worker", type=Path, metavar="ONNX_DIR", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    quiet.add_allow_load(parser)
    args = parser.parse_args(argv)
    if args.cost_worker:
        args.json.write_text(json.dumps(cost_worker(args.cost_worker, args.manifest, args.limit)))
        return 0
    ab = ABS[args.ab]
    letters = args.arms or "".join(arm.letter for arm in ab.arms)
    folder = args.benchmarks / ab.folder
    readme, cost_file = folder / "README.md", folder / "cost.json"
    text = readme.read_text() if readme.exists() else ""
    if BEGIN not in text or END not in text:
        parser.error(f"{readme}: no '{BEGIN}' ... '{END}' markers to write the table between")
    unknown = set(letters) - {arm.letter for arm in ab.arms}
    if unknown:
        parser.error(f"--arms: no arm {', '.join(sorted(unknown))} (the arms are {''.join(a.letter for a in ab.arms)})")
    costs = json.loads(cost_file.read_text()) if cost_file.exists() else {}
    if args.cost:
        load = quiet.guard(args.allow_load, cost_file, "ab")
        measured = measure_costs(ab.arms, args.manifest, args.limit, load, letters)
        if args.shipped_onnx:
            measured["shipped"] = {**export_cost(args.shipped_onnx, args.manifest, args.limit),
                                   "date": datetime.date.today().isoformat(), "load": load}
            print(f"ab: shipped: {json.dumps(measured['shipped'])}", flush=True)
        names = [arm.letter for arm in ab.arms] + ["shipped"]
        costs = {name: measured.get(name, costs.get(name)) for name in names}  # the rest: kept
        costs = {letter: cost for letter, cost in costs.items() if cost}
        cost_file.write_text(json.dumps(costs, indent=1) + "\n")
    fork, arms = arm_rows(args.benchmarks, ab)
    shipped = shipped_scores(args.benchmarks, ab)
    head, rest = text.split(BEGIN, 1)
    readme.write_text(head + BEGIN + "\n" + table(ab, fork, arms, costs, shipped) + "\n" + END + rest.split(END, 1)[1])
    plot(ab, fork, arms, folder / "curve.png", shipped)
    print(f"ab: wrote {readme} and {folder / 'curve.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
