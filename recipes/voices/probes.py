"""Measurements for the many-voices retrain, as one resumable command:

    python recipes/voices/probes.py [--only curve|sizing] [--work runs/probes] [--dry-run]

The data curve: does more distinct Kokoro English speech help? The shipped model is fine-tuned for
--curve-steps steps (experiment=voices_finetune) with the first 0, 1, 2 and 4 hours of
data/synthetic/train_kokoro_en.jsonl, each repeated (4, 2, 1 times) so that Kokoro's share of an epoch
stays the same and only the number of distinct utterances, sentences and voices changes. The 0 h run
is the control: the same fine-tune without Kokoro.

The sizing probe: the same short run from scratch (experiment=voices, --sizing-steps steps) at
model=small, medium and large (about 1x, 2x and 3.6x the training compute).

Every model is scored on speechocean762 dev, the FSDD test split, the synthetic check set and the
Kokoro English check set (held-out voices): the shipped model and the curve's greedy and with the bundled
word LM, the sizing runs greedy. Each run, each score and
the report are steps (asr.training.recipe): a finished one is skipped, a cut-off training run resumes
from its last checkpoint. The results are merged into <report-dir>/probes.json (default benchmarks/voices/),
keyed run@rendering, so figures measured on other machines stay beside this one's; probes.md and
data_curve.png are written from all of them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.training.recipe import Step, list_steps, pending_steps, run_steps  # noqa: E402

SETS = ["dev", "fsdd", "synthetic-check", "kokoro-check"]
DECODINGS = ["greedy", "beam"]


def eval_sets(data: Path, synthetic: Path) -> dict[str, list[str]]:
    """Set name -> asr.evaluate arguments that select it."""
    return {"dev": ["--manifest", str(data / "speechocean762" / "dev.jsonl")],
            "fsdd": ["--manifest", str(data / "fsdd" / "fsdd.jsonl"), "--split", "test"],
            "synthetic-check": ["--manifest", str(synthetic / "check.jsonl")],
            "kokoro-check": ["--manifest", str(synthetic / "check_kokoro_en.jsonl")]}


def first_hours(source: Path, hours: float, out: Path) -> tuple[int, int]:
    """Write the first rows of `source` that add up to `hours` of audio; returns (rows, speakers)."""
    rows, total = [], 0.0
    for line in source.read_text().splitlines():
        if total >= hours * 3600:
            break
        rows.append(json.loads(line))
        total += rows[-1]["duration"]
    if total < hours * 3600 * 0.99:
        raise SystemExit(f"probes: error: {source} holds {total / 3600:.2f} h, fewer than {hours} h")
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows), len({r["speaker"] for r in rows})


def curve_manifest(kokoro: Path, hours: float) -> Path:
    return kokoro.with_name(f"{kokoro.stem}_first{hours:g}h.jsonl")


def plan(a: argparse.Namespace, python: str) -> tuple[list[Step], dict[str, dict]]:
    """The steps, and each run's description (for the report). Each training run is followed by its
    scores; the shipped model is scored first, as the reference."""
    work, data = a.work.resolve(), a.data_root.resolve()
    sets = eval_sets(data, a.synthetic_dir.resolve())

    def scores(name: str, model: Path, decodings: list[str]) -> list[Step]:
        """Score one model on every set in each decoding (asr.evaluate --report)."""
        limit = ["--limit", str(a.limit)] if a.limit else []
        return [Step(f"{name}.{set_name}.{decoding}",
                     [python, "-m", "asr.evaluate", *args, *limit, "--model", str(model), f"--{decoding}",
                      "--report", str(work / "scores" / f"{name}.{set_name}.{decoding}.json")])
                for set_name, args in sets.items() for decoding in decodings]

    shipped = ROOT / "asr" / "pretrained" / "default.safetensors"
    steps, runs = scores("default", shipped, a.decodings), {"default": {"kind": "shipped"}}
    kokoro = a.synthetic_dir.resolve() / "train_kokoro_en.jsonl"
    if a.only in (None, "curve"):
        most = max(a.curve_hours)
        for hours in a.curve_hours:
            name = f"curve_{hours:g}h"
            manifest = curve_manifest(kokoro, hours) if hours else kokoro  # 0 h: the source, repeated 0 times
            repeat = round(most / hours) if hours else 0  # the same share of an epoch at every point
            runs[name] = {"kind": "curve", "kokoro_hours": hours, "manifest": str(manifest)}
            steps.append(Step(name, [python, "-m", "asr.training", "experiment=voices_finetune",
                                     f"run_dir={work / name}", f"data.root={data}", f"init_from={shipped}", *a.extra,
                                     f"data.train.3.manifest={manifest}", f"data.train.3.repeat={repeat}",
                                     f"trainer.max_steps={a.curve_steps}", f"optim.decay_steps={a.curve_steps}",
                                     f"trainer.val_check_interval={max(a.curve_steps // 2, 1)}"]))
            steps += scores(name, work / name / "model.safetensors", a.decodings)
    if a.only in (None, "sizing"):
        for size in a.sizes:
            name = f"size_{size}"
            runs[name] = {"kind": "sizing", "model": size}
            steps.append(Step(name, [python, "-m", "asr.training", "experiment=voices", f"model={size}",
                                     f"run_dir={work / name}", f"data.root={data}", *a.extra,
                                     f"trainer.max_steps={a.sizing_steps}",
                                     f"trainer.val_check_interval={max(a.sizing_steps // 4, 1)}"]))
            steps += scores(name, work / name / "model.safetensors", a.sizing_decodings)
            runs[name]["files"] = {"run_dir": work / name, "weights": work / name / "model.safetensors"}
            for at in a.sizing_score_steps:  # the same run at an earlier step: equal steps across sizes
                checkpoint, model = work / name / "checkpoints" / f"step{at}.ckpt", work / name / f"step{at}.safetensors"
                runs[f"{name}_step{at}"] = {"kind": "sizing", "model": size,
                                            "files": {"run_dir": work / name, "weights": model, "end": checkpoint}}
                steps.append(Step(f"{name}_step{at}", [python, "scripts/export_model.py", str(work / name),
                                                       str(checkpoint), "--out", str(model)]))
                steps += scores(f"{name}_step{at}", model, a.sizing_decodings)
    return steps, runs


def model_facts(path: Path) -> dict:
    """Training steps and parameter count of a model file, from its header."""
    from safetensors import safe_open
    with safe_open(str(path), framework="np") as f:
        info = json.loads((f.metadata() or {}).get("info", "{}"))
        parameters = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys()
                         if not k.startswith("cmvn"))
    return {"steps": info.get("steps"), "parameters_m": round(parameters / 1e6, 2)}


def rendering(synthetic: Path) -> str:
    """A short fingerprint of the synthetic check sets' manifests. The check sets are rendered on each
    machine and renders differ slightly, so only scores of one rendering compare on those sets."""
    digest = hashlib.sha1()
    for name in ("check.jsonl", "check_kokoro_en.jsonl"):
        path = synthetic / name
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()[:8]


def collect(work: Path, runs: dict[str, dict], render: str) -> dict[str, dict]:
    """Each run scored in `work`: its description, its scores (set -> decoding -> WER, CER in %), the
    check sets' rendering, the day it was scored and its training figures."""
    out = {}
    for name, run in runs.items():
        scores, newest = {}, 0.0
        for path in sorted((work / "scores").glob(f"{name}.*.json")):
            _, set_name, decoding = path.stem.rsplit(".", 2)
            summary = json.loads(path.read_text())["summary"]
            scores.setdefault(set_name, {})[decoding] = {"wer": round(summary["wer"] * 100, 2),
                                                         "cer": round(summary["cer"] * 100, 2)}
            newest = max(newest, path.stat().st_mtime)
        if not scores:
            continue
        run = {k: v for k, v in run.items() if k != "files"}  # this machine's paths stay out of the report
        run.update(rendering=render, measured=time.strftime("%Y-%m-%d", time.gmtime(newest)))
        # wall time from the run's first file to its export (or the checkpoint it scores), validation included
        files = runs[name].get("files") or {"run_dir": work / name, "weights": work / name / "model.safetensors"}
        end, initial = files.get("end", files["weights"]), files["run_dir"] / "initial.safetensors"
        if end.exists() and initial.exists():
            run["train_minutes"] = round((end.stat().st_mtime - initial.stat().st_mtime) / 60, 1)
        if run["kind"] == "sizing":
            run.update(model_facts(files["weights"]))
        if run["kind"] == "curve" and run["kokoro_hours"]:
            run["kokoro"] = manifest_stats(run["manifest"])
        out[f"{name}@{render}"] = {**run, "scores": scores}
    return out


def manifest_stats(path: str) -> dict:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()] if Path(path).exists() else []
    return {"utterances": len(rows), "speakers": len({r["speaker"] for r in rows}),
            "hours": round(sum(r["duration"] for r in rows) / 3600, 2)}


KIND_ORDER = {"shipped": 0, "curve": 1, "sizing": 2}


def report(work: Path, runs: dict[str, dict], render: str, out_dir: Path) -> str:
    """Merge this work folder's results into <out_dir>/probes.json (results from other machines and
    renderings stay, keyed run@rendering), then write <out_dir>/probes.md and data_curve.png from all
    of it; returns the markdown."""
    out_dir.mkdir(parents=True, exist_ok=True)
    recorded = out_dir / "probes.json"
    results = {**(json.loads(recorded.read_text()) if recorded.exists() else {}), **collect(work, runs, render)}
    renders = list(dict.fromkeys(r["rendering"] for r in results.values()))
    results = dict(sorted(results.items(), key=lambda kv: (renders.index(kv[1]["rendering"]),
                                                           KIND_ORDER[kv[1]["kind"]], kv[1].get("kokoro_hours", 0),
                                                           kv[1].get("parameters_m", 0), kv[1].get("steps") or 0)))
    recorded.write_text(json.dumps(results, indent=1) + "\n")
    head = "| run | " + " | ".join(SETS) + " | rendering | scored | training (min) |"
    lines = [head, "|" + "---|" * (len(SETS) + 4)]
    for key, run in results.items():
        cells = []
        for s in SETS:
            got = run["scores"].get(s, {})
            cells.append(" / ".join("-" if d not in got else f"{got[d]['wer']:.2f}" +
                                    (f" ({got[d]['cer']:.1f})" if "cer" in got[d] else "") for d in DECODINGS))
        label = key.split("@")[0]
        if run["kind"] == "sizing" and run.get("steps"):
            label += f" ({run['parameters_m']} M, step {run['steps']})"
        if run.get("kokoro"):
            label += f" ({run['kokoro']['utterances']} utts, {run['kokoro']['speakers']} voices)"
        lines.append(f"| {label} | " + " | ".join(cells) +
                     f" | {run['rendering']} | {run['measured']} | {run.get('train_minutes', '-')} |")
    title = ["# Probes for the many-voices retrain", "",
             "Written by `python recipes/voices/probes.py` (recipes/voices/README.md). Each cell is WER (CER) in %, "
             "greedy / beam with the bundled word LM (- where not scored). The synthetic check sets are rendered on "
             "each machine: compare their columns only between rows of one rendering (dev and FSDD are the same "
             "audio everywhere). Training minutes are wall time on 2 CPU cores, validation included.", ""]
    markdown = "\n".join(title + lines) + "\n"
    (out_dir / "probes.md").write_text(markdown)
    plot_curve(results, out_dir / "data_curve.png")
    return markdown


def plot_curve(results: dict[str, dict], out: Path) -> None:
    """WER against distinct hours of Kokoro speech in the fine-tune, per evaluation set and decoding
    (the newest rendering that has a curve), with the shipped model of that rendering as reference lines."""
    curves = [r for r in results.values() if r["kind"] == "curve"]
    if not curves:
        return
    render = curves[-1]["rendering"]
    curve = sorted((r for r in curves if r["rendering"] == render), key=lambda r: r["kokoro_hours"])
    if len(curve) < 2:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    hours = [r["kokoro_hours"] for r in curve]
    shipped = next((r for r in results.values() if r["kind"] == "shipped" and r["rendering"] == render), {})
    for set_name, colour in zip(SETS, ["C0", "C1", "C2", "C3"]):
        for decoding, style in zip(DECODINGS, ["--", "-"]):
            wers = [r["scores"].get(set_name, {}).get(decoding, {}).get("wer") for r in curve]
            if all(w is not None for w in wers):
                ax.plot(hours, wers, style, marker="o", color=colour, label=f"{set_name} ({decoding})")
        reference = shipped.get("scores", {}).get(set_name, {}).get("beam")
        if reference:  # the model every curve run starts from
            ax.axhline(reference["wer"], color=colour, linestyle=":", linewidth=1)
    ax.plot([], [], ":", color="grey", label="shipped model (beam)")
    ax.set_xlabel("distinct hours of Kokoro English speech in the fine-tune (same share of each epoch)")
    ax.set_ylabel("WER (%)")
    ax.set_title(f"data curve (scored {curve[-1]['measured']})", fontsize=9)
    ax.set_xticks(hours)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python recipes/voices/probes.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "probes")
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--synthetic-dir", type=Path, default=ROOT / "data" / "synthetic",
                   help="holds train_kokoro_en.jsonl, check.jsonl and check_kokoro_en.jsonl (recipes/synthetic)")
    p.add_argument("--only", choices=["curve", "sizing"], help="only the data curve or only the sizing probe")
    p.add_argument("--curve-hours", type=float, nargs="+", default=[0, 1, 2, 4],
                   help="distinct hours of Kokoro speech at the curve's points")
    p.add_argument("--curve-steps", type=int, default=800)
    p.add_argument("--sizes", nargs="+", default=["small", "medium", "large"], help="conf/model choices to probe")
    p.add_argument("--sizing-steps", type=int, default=1500)
    p.add_argument("--decodings", nargs="+", choices=DECODINGS, default=DECODINGS, help="how the shipped and curve models are scored")
    p.add_argument("--sizing-score-steps", type=int, nargs="*", default=[], metavar="STEP",
                   help="also score each sizing run at these steps (its kept step<N>.ckpt: multiples of "
                        "keep_every_steps), to compare sizes at equal steps and at equal wall time")
    p.add_argument("--sizing-decodings", nargs="+", choices=DECODINGS, default=["greedy"],
                   help="how the sizing runs are scored (short runs from scratch: greedy by default)")
    p.add_argument("--limit", type=int, default=0, help="score only the first N utterances of each set (0: all)")
    p.add_argument("--extra", action="append", default=[], metavar="KEY=VALUE",
                   help="override for every training run, placed before the run's own (its data, steps)")
    p.add_argument("--report-dir", type=Path, default=ROOT / "benchmarks" / "voices",
                   help="where probes.json (merged with the results already there), probes.md and data_curve.png go")
    p.add_argument("--dry-run", action="store_true", help="list the steps, which are done, and their commands")
    a = p.parse_args(argv)
    work = a.work.resolve()
    steps, runs = plan(a, sys.executable)
    markers = work / "markers"
    (work / "scores").mkdir(parents=True, exist_ok=True)
    list_steps(steps, markers, "probes")
    if a.dry_run:
        return 0
    kokoro = a.synthetic_dir.resolve() / "train_kokoro_en.jsonl"
    if pending_steps(steps, markers) and a.only != "sizing":
        if not kokoro.is_file():
            print(f"probes: error: {kokoro} not found: build it with recipes/synthetic/kokoro_en_parts.sh",
                  file=sys.stderr)
            return 2
        for hours in a.curve_hours:
            if hours and not curve_manifest(kokoro, hours).exists():  # fixed once written: the corpus grows
                first_hours(kokoro, hours, curve_manifest(kokoro, hours))
    code = run_steps(steps, markers, ROOT, "probes")
    print(report(work, runs, rendering(a.synthetic_dir.resolve()), a.report_dir.resolve()), end="")
    return code


if __name__ == "__main__":
    sys.exit(main())
