"""Carry one training run across working periods that may each start on a bare machine.

The run's state between periods is one small folder committed with the code (recipes/voices/state/):
`model.safetensors` (the weights where training stopped, float16 but for the CMVN stats, with the
tokenizer), `candidate.safetensors` (the period's scored model, stored the same way: the mean of the
period's checkpoints and the previous period's candidate; left out where the two files would pass
STATE_BUDGET_BYTES, what one period may commit) and `state.json`
(the period, the step, the schedule's position, the Kokoro slices used so far, the cumulative training
minutes). The optimizer's moments are not carried (they would triple the folder):
AdamW with betas (0.9, 0.98) forgets its moments within ~100 steps anyway, and a continued period ramps
its learning rate up again over `REWARM_STEPS` instead.

Within a period, its own run folder (runs/continue/pNNN/) holds `period.json` (what the period started
from, the phases done with their wall minutes) and the Lightning run; an interrupted period resumes there.
recipes/voices/continue.py drives the phases; this module holds what they read and write.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

REWARM_STEPS = 200
PHASES = ["data", "train", "export", "score"]  # a period's phases, in order (recipes/voices/continue.py)
BLEND_SEED_BASE = 20261125  # engines.KOKORO_EN_BLEND_SEED: period p's Kokoro blends use this + p
DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "pretrained" / "default.safetensors"
STATE_FILES = ("model.safetensors", "candidate.safetensors", "state.json")
STATE_BUDGET_BYTES = 40_000_000  # what one period may commit: a bigger model carries its weights, not its candidate


def _write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically: a cut-off write leaves the old file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text)
    os.replace(partial, path)


def _write_json(path: Path, data: dict) -> None:
    _write_text(path, json.dumps(data, indent=1) + "\n")


def read_state(state_dir: Path) -> dict | None:
    """The committed state's description, or None when the run has not started."""
    path = state_dir / "state.json"
    return json.loads(path.read_text()) if path.exists() else None


def current_period(work: Path, state_dir: Path, synthetic: Path, blend_seed_base: int) -> tuple[dict, str]:
    """The period to work on and where it comes from: this machine's unfinished period (newest run folder
    whose period.json has no "saved" phase), else the period after the committed state, else period 1."""
    local = sorted(work.glob("p[0-9][0-9][0-9]/period.json"))
    if local:
        period = json.loads(local[-1].read_text())
        if "saved" not in period["timings"]:
            return period, "resumed from this machine's run folder"
    state = read_state(state_dir)
    number = state["period"] + 1 if state else 1
    folder = work / f"p{number:03d}"
    previous = {"steps": 0, "train_minutes": 0.0, "kokoro_slices": [], "kokoro_hours_seen": 0.0, "schedule_start": 0}
    if state:
        previous = {k: state.get(k, default) for k, default in previous.items()}
    slices = previous["kokoro_slices"]
    period = {
        "period": number,
        "init_from": str(folder / "start.safetensors"),  # a copy: the state folder is rewritten at the end
        "state_from": str(state_dir / "model.safetensors") if state else "grown shipped model",
        "step_offset": previous["steps"] - previous["schedule_start"],  # the schedule's position
        "rewarm_steps": REWARM_STEPS if state else 0,
        "kokoro_slice": {"manifest": str(synthetic / f"train_kokoro_en_p{number:03d}.jsonl"),
                         "start": slices[-1]["end"] if slices else 0, "blend_seed": blend_seed_base + number},
        "previous": previous,
        "timings": {},
    }
    if state:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(state_dir / "model.safetensors", period["init_from"])
        if (state_dir / "candidate.safetensors").exists():  # the running mean's older part (export_period)
            period["previous_candidate"] = str(folder / "previous_candidate.safetensors")
            shutil.copyfile(state_dir / "candidate.safetensors", period["previous_candidate"])
    return period, "from the committed state" if state else "new run: the shipped model, grown"


def save_period(work: Path, period: dict) -> None:
    _write_json(work / "period.json", period)


def grow_default(out: Path, n_layers: int) -> None:
    """Period 1's starting weights: the shipped model with `n_layers` blocks, computing what it computes."""
    from asr.model.loader import load_model, save_model  # noqa: PLC0415 (torch: only when it is needed)
    from asr.training.acoustic.grow import deepen  # noqa: PLC0415

    encoder, tokenizer, info = load_model()
    out.parent.mkdir(parents=True, exist_ok=True)
    save_model(out, deepen(encoder, n_layers), tokenizer, {"grown_from": "asr/pretrained/default.safetensors",
                                                          "grown_from_layers": len(encoder.blocks)})


def export_period(work: Path, previous_candidate: str | Path | None = None) -> None:
    """From the period's Lightning run: `last.safetensors` (where training stopped: the next state) and
    `candidate.safetensors`, the model it scores: the mean of the period's kept step checkpoints and the
    last one (`period_mean.safetensors`), averaged in turn with the previous period's candidate when there
    is one. So the candidate is a running mean over periods that halves each older period's weight, as
    WeNet and icefall average their last epochs; training itself goes on from `last`."""
    from asr.training.acoustic.train import export_checkpoint  # noqa: PLC0415

    ckpts = work / "checkpoints"
    last = ckpts / "last.ckpt"
    if not last.exists():
        raise FileNotFoundError(f"{last}: the period's training left no checkpoint")
    kept = sorted(ckpts.glob("step*.ckpt"), key=lambda p: int(p.stem.removeprefix("step")))
    export_checkpoint(work, [last], work / "last.safetensors")
    if previous_candidate is None:
        export_checkpoint(work, [*kept, last], work / "candidate.safetensors")
        return
    export_checkpoint(work, [*kept, last], work / "period_mean.safetensors")
    average_with_previous(work, previous_candidate)


def average_with_previous(work: Path, previous_candidate: str | Path) -> None:
    """`candidate.safetensors` := the mean of the previous period's candidate and this period's
    `period_mean.safetensors` (the running mean over periods)."""
    from asr.model.loader import average_models  # noqa: PLC0415 (torch: only when it is needed)

    average_models([Path(previous_candidate), work / "period_mean.safetensors"], work / "candidate.safetensors")


def period_steps(work: Path) -> int:
    """Optimizer steps this period's run took (from its exported last weights)."""
    from safetensors import safe_open  # noqa: PLC0415

    with safe_open(str(work / "last.safetensors"), framework="np") as f:
        return int(json.loads(f.metadata()["info"])["steps"])


def step_split(work: Path) -> dict | None:
    """Seconds per step in the model (forward, backward, optimizer) and between steps (fetching and
    augmenting the batch, checkpoints, logging), and the share that is not the model's (train.StepTimes)."""
    path = work / "step_times.json"
    if not path.exists():
        return None
    times = json.loads(path.read_text())
    steps = max(times["steps"], 1)
    return {"fit_minutes": round(times["wall_s"] / 60, 1), "model_s": round(times["model_s"] / steps, 3), "between_s": round(times["between_s"] / steps, 3),
            "non_model_share": round(times["between_s"] / max(times["model_s"] + times["between_s"], 1e-9), 3),
            "validation_minutes": round(times["validation_s"] / 60, 1)}


def progress_row(period: dict, work: Path, machine: dict) -> dict:
    """The period's row of benchmarks/voices/training_progress.jsonl (WER in %, minutes of wall time)."""
    previous, kokoro = period["previous"], period["kokoro_slice"] or {}
    return {"period": period["period"], "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "steps": previous["steps"] + period_steps(work),
            "train_minutes": round(previous["train_minutes"] + period["timings"]["train"], 1),
            "kokoro_hours_seen": round(previous["kokoro_hours_seen"] + kokoro.get("hours", 0.0), 2),
            "candidate": "mean with the previous candidate" if period.get("previous_candidate") else "period mean",
            **period["wers"], **({"search": period["search"]} if "search" in period else {}), "machine": machine, "phase_minutes": period["timings"],
            "step_split": step_split(work), "overrides": period.get("overrides", [])}


def reference_path(progress: Path) -> Path:
    return progress.with_name(f"{progress.stem}_reference.json")


def write_reference(progress: Path, wers: dict[str, float]) -> None:
    """The shipped model's scores on the progress row's sets, beside the progress file (the reference lines).
    The first reference written is the model the run grew from: it stays as "start", the curve's 0-h point,
    when a promoted period later becomes the shipped model."""
    path = reference_path(progress)
    old = json.loads(path.read_text()) if path.exists() else None
    start = old.get("start", {c: old[c] for c in COLUMNS if c in old}) if old else dict(wers)
    _write_json(path, {"model": "asr/pretrained/default.safetensors",
                       "date": time.strftime("%Y-%m-%d", time.gmtime()), **wers, "start": start})


PROMOTE_ON = ("dev_beam", "libri_dev_beam", "synthetic_check_beam", "kokoro_check_beam")  # must beat the shipped
# model on each (a row scored before librispeech/dev-clean-2 was a dev set lacks that column: it is not promoted)
FSDD_CEILING = 3.0  # and FSDD test (beam) must stay below this WER (%)


def beats_default(row: dict, progress: Path) -> bool:
    """Whether the period's model may replace the shipped one: better on dev (beam) and both check sets
    than the shipped model's reference scores, with FSDD test under FSDD_CEILING."""
    reference = reference_path(progress)
    if not reference.exists():
        return False
    shipped = json.loads(reference.read_text())
    return all(c in row and c in shipped and row[c] < shipped[c] for c in PROMOTE_ON) and row["fsdd_beam"] < FSDD_CEILING


def append_row(path: Path, row: dict) -> None:
    """Add `row` to the JSON Lines file, replacing an earlier row of the same period."""
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    rows = [r for r in rows if r["period"] != row["period"]] + [row]
    _write_text(path, "".join(json.dumps(r) + "\n" for r in sorted(rows, key=lambda r: r["period"])))


COLUMNS = {"dev_beam": "dev (beam)", "dev_greedy": "dev (greedy)", "libri_dev_beam": "LibriSpeech dev (beam)",
           "libri_dev_greedy": "LibriSpeech dev (greedy)", "synthetic_check_beam": "synthetic check",
           "kokoro_check_beam": "Kokoro check", "fsdd_beam": "FSDD test"}


def plot_progress(progress: Path, out: Path) -> None:
    """WER (%) of every period against cumulative training hours, the shipped model's as dashed lines."""
    import matplotlib  # noqa: PLC0415 (the train extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = [json.loads(line) for line in progress.read_text().splitlines()]
    reference = reference_path(progress)
    shipped = json.loads(reference.read_text()) if reference.exists() else {}
    fig, ax = plt.subplots(figsize=(7, 4.2))
    hours = [r["train_minutes"] / 60 for r in rows]
    for (column, label), color in zip(COLUMNS.items(), plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        first = shipped.get("start", shipped)  # at 0 h the grown model computes what the model it grew from did
        start = [first[column]] if column in first else []
        scored = [(h, r[column]) for h, r in zip(hours, rows) if column in r]  # older rows lack newer columns
        if not start and not scored:
            continue
        ax.plot([0.0] * len(start) + [h for h, _ in scored], start + [w for _, w in scored], "o-", color=color,
                label=label)
        if column in shipped:
            ax.axhline(shipped[column], color=color, linestyle="--", linewidth=0.8)
    for r, h in zip(rows, hours):  # a period on a GPU buys far more steps per wall hour than one on 2 cores
        if (r.get("machine") or {}).get("gpu"):
            ax.annotate(r["machine"]["gpu"].removeprefix("NVIDIA "), (h, r["dev_greedy"]), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=7)
    ax.set_xlabel("cumulative training (hours of wall time, all periods)")
    ax.set_ylabel("WER (%)")
    ax.set_title("The continued retrain, period by period (dashed: the shipped model)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def write_state(state_dir: Path, work: Path, period: dict, row: dict, weights_only: bool = False) -> None:
    """Replace the committed state with this period's (newest only): float16 weights where training
    stopped, float16 weights of the scored candidate (what a promotion ships) unless the two together pass
    STATE_BUDGET_BYTES or `weights_only` (two arms sharing one period's budget) says so (then the next period's
    candidate is that period's own mean), and state.json."""
    from asr.model.loader import load_model, save_model  # noqa: PLC0415

    state_dir.mkdir(parents=True, exist_ok=True)
    for stale in state_dir.iterdir():
        if stale.name not in STATE_FILES:
            stale.unlink()
    for source, name in (("last.safetensors", "model.safetensors"),
                         ("candidate.safetensors", "candidate.safetensors")):
        encoder, tokenizer, info = load_model(work / source)
        save_model(state_dir / name, encoder, tokenizer, {**info, "period": period["period"]}, half=True)
    carried = sum((state_dir / name).stat().st_size for name in ("model.safetensors", "candidate.safetensors"))
    candidate_carried = carried <= STATE_BUDGET_BYTES and not weights_only
    if not candidate_carried:  # e.g. Whisper base's shapes, 40 MB each: the next period's candidate is its own mean
        (state_dir / "candidate.safetensors").unlink()
    heard = [{"period": period["period"], **period["kokoro_slice"]}] if period["kokoro_slice"] else []
    slices = period["previous"]["kokoro_slices"] + heard
    for s in slices:
        s["manifest"] = Path(s["manifest"]).name  # this machine's paths stay out of the repo
    _write_json(state_dir / "state.json", {
        "period": period["period"], "date": row["date"], "steps": row["steps"],
        "schedule": {"next_step_offset": row["steps"] - period["previous"].get("schedule_start", 0),
                     "rewarm_steps": REWARM_STEPS},
        "schedule_start": period["previous"].get("schedule_start", 0),
        "train_minutes": row["train_minutes"], "kokoro_hours_seen": row["kokoro_hours_seen"],
        "kokoro_slices": slices, "layers": encoder.cfg.n_layers, "candidate_carried": candidate_carried})


def score_sets(data_root: Path, check_sets: Path, kathleen: Path | None = None) -> dict[str, tuple[list[str], str]]:
    """Progress-row column -> (asr.evaluate arguments that select its set, decoding). A data root without
    LibriSpeech's dev-clean-2 (one laid out before it came) scores the other sets; `kathleen` (a manifest split by
    recipes/phones/kathleen.py) adds her held-out prompts, with the search."""
    dev = ["--manifest", str(data_root / "speechocean762" / "dev.jsonl")]
    libri = data_root / "librispeech" / "dev-clean-2.jsonl"
    libri_dev = {"libri_dev_greedy": (["--manifest", str(libri)], "greedy"),
                 "libri_dev_beam": (["--manifest", str(libri)], "beam")} if libri.exists() else {}
    return {"dev_greedy": (dev, "greedy"), "dev_beam": (dev, "beam"), **libri_dev,
            "fsdd_beam": (["--manifest", str(data_root / "fsdd" / "fsdd.jsonl"), "--split", "test"], "beam"),
            "synthetic_check_beam": (["--manifest", str(check_sets / "check.jsonl")], "beam"),
            "kokoro_check_beam": (["--manifest", str(check_sets / "check_kokoro_en.jsonl")], "beam"),
            **({"kathleen_test_beam": (["--manifest", str(kathleen), "--split", "test"], "beam")} if kathleen else {})}
