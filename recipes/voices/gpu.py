"""Train a period of the continued retrain on a GPU machine that has none of the data:

    python recipes/voices/continue.py --stop-after data      # here: the period's corpora
    python recipes/voices/gpu.py pack                        # here: them, as Opus, in .device/ and .device.zip
    # there, with the checkout and .device.zip (~46 MiB) copied over:
    python recipes/voices/gpu.py train --call-minutes 9.5 --out RESULTS
    # here, with RESULTS copied back:
    python recipes/voices/gpu.py receive RESULTS
    python recipes/voices/continue.py                        # scores, the progress row, the new state

`pack` re-encodes the period's training audio (speechocean762 train, the FSDD train split, the cheaper
voices and the period's Kokoro slice) as Ogg Opus at about 13 kbit/s, with manifests of the same layout,
so a period's corpora fit in a copy of a few tens of MB. `train` runs the same continue.py phases there
(training with `trainer.accelerator=gpu`, then the export) and leaves the two weight files in float16, the
period's record, its step times and its log in --out. `receive` puts them into this machine's run folder,
so that continue.py goes on with the scoring. See recipes/voices/README.md, "On a GPU".
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import zipfile
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.corpus.manifest import read_manifest, write_manifest  # noqa: E402
from asr.training.acoustic import carry  # noqa: E402

OPUS_LEVEL = 0.985  # libsndfile's Opus compression level: about 11.7 kbit/s for 16 kHz speech (0.975: 13.9)
RESULTS = ("last.safetensors", "candidate.safetensors", "period.json", "step_times.json", "train.log")
REMOTE_OVERRIDES = ["trainer.limit_val_batches=0", "trainer.enable_progress_bar=false"]  # dev's audio stays here
EXPORT_SECONDS = 90  # --call-minutes keeps this much after fitting: checkpoint averaging, export, float16 copies


def _encode(job: tuple[Path, Path, float]) -> int:
    """Write one file as Ogg Opus (16 kHz mono) at a compression level; its size in bytes."""
    import soundfile as sf  # noqa: PLC0415

    from asr.audio.files import load_audio  # noqa: PLC0415

    source, target, level = job
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}")
        sf.write(partial, load_audio(source), 16000, format="OGG", subtype="OPUS", compression_level=level)
        partial.rename(target)
    return target.stat().st_size


def _pack_manifest(manifest: Path, out: Path, split: str = "", audio: bool = True) -> list[tuple[Path, Path]]:
    """Write `manifest`'s utterances (of `split`, as read_manifest keeps them) to `out`, each audio path
    ending in .ogg; the encoding jobs. A path outside the manifest's folder lands under abs/, so that
    nothing is written outside `out`'s folder."""
    utts = read_manifest(manifest, split, durations=True)
    targets = []
    for u in utts:
        inside = u.audio.is_relative_to(manifest.parent) and ".." not in u.audio.relative_to(manifest.parent).parts
        relative = u.audio.relative_to(manifest.parent) if inside else Path("abs", *u.audio.resolve().parts[1:])
        targets.append(relative.with_suffix(".ogg"))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_manifest(out, [{"audio": str(t), "duration": u.duration, "text": u.text, "speaker": u.speaker, "split": u.split}
                         for u, t in zip(utts, targets)])
    return [(u.audio, out.parent / t) for u, t in zip(utts, targets)] if audio else []


def pack(a: argparse.Namespace) -> None:
    period, _ = carry.current_period(a.work, a.state, a.synthetic, carry.BLEND_SEED_BASE)
    if "data" not in period["timings"]:
        sys.exit("gpu: error: the period has no data yet: run continue.py --stop-after data first")
    data, synthetic = a.pack / "data", a.pack / "synthetic"
    kokoro = Path(period["kokoro_slice"]["manifest"])
    jobs = [*_pack_manifest(a.data_root / "speechocean762" / "train.jsonl", data / "speechocean762" / "train.jsonl"),
            *_pack_manifest(a.data_root / "fsdd" / "fsdd.jsonl", data / "fsdd" / "fsdd.jsonl", split="train"),
            *_pack_manifest(a.synthetic / "train.jsonl", synthetic / "train.jsonl"),
            *_pack_manifest(kokoro, synthetic / kokoro.name)]
    # continue.py checks for dev; training there does not validate (REMOTE_OVERRIDES), so its audio stays here
    _pack_manifest(a.data_root / "speechocean762" / "dev.jsonl", data / "speechocean762" / "dev.jsonl", audio=False)
    shutil.copyfile(kokoro.with_suffix(".slice.json"), synthetic / kokoro.with_suffix(".slice.json").name)
    jobs = [(source, target, a.opus_level) for source, target in jobs]
    if a.jobs > 1:
        with Pool(a.jobs) as pool:
            size = sum(pool.imap_unordered(_encode, jobs, chunksize=16))
    else:
        size = sum(map(_encode, jobs))
    archive = a.pack.with_suffix(".zip")  # one file to copy: Opus stored as it is, the manifests deflated
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(p for p in a.pack.rglob("*") if p.is_file()):
            z.write(path, path.relative_to(a.pack), zipfile.ZIP_STORED if path.suffix == ".ogg" else zipfile.ZIP_DEFLATED)
    print(f"gpu: {len(jobs)} files of period {period['period']}'s corpora in {a.pack} ({size / 2**20:.1f} MiB of audio), "
          f"and as one file in {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")


def train(a: argparse.Namespace) -> None:
    """continue.py's training and export phases from the pack (unpacked from its .zip when only that came
    along), then the results (float16) into a.out."""
    began = time.time()
    deadline = [] if a.call_minutes is None else [f"stop_at={began + 60 * a.call_minutes - EXPORT_SECONDS:.0f}"]
    if not a.pack.exists() and a.pack.with_suffix(".zip").exists():
        with zipfile.ZipFile(a.pack.with_suffix(".zip")) as z:
            z.extractall(a.pack)
    # augmentation drawn afresh in --jobs loader processes: on 16 cores they keep up with most of the GPU's
    # pace from the first second, where rendering the views first took 6 of a call's 10 minutes
    loader = [] if a.rendered_variants else ["data.variants=0", f"data.num_workers={a.jobs}"]
    command = [sys.executable, str(ROOT / "recipes" / "voices" / "continue.py"), "--data-root", str(a.pack / "data"),
               "--synthetic", str(a.pack / "synthetic"), "--skip-data", "--stop-after", "export",
               "--minutes", str(a.minutes or a.call_minutes or 6.0), "--variants-dir", str(a.variants_dir), "--jobs", str(a.jobs),
               "--work", str(a.work), "--state", str(a.state),
               "--", f"trainer.accelerator={a.accelerator}", *REMOTE_OVERRIDES, *loader, *deadline, *a.overrides]
    code = subprocess.run(command, cwd=ROOT).returncode
    period, _ = carry.current_period(a.work, a.state, a.pack / "synthetic", carry.BLEND_SEED_BASE)
    work = a.work / f"p{period['period']:03d}"
    a.out.mkdir(parents=True, exist_ok=True)
    for name in ("period.json", "step_times.json", "train.log"):
        if (work / name).exists():
            shutil.copyfile(work / name, a.out / name)
    if code:
        sys.exit(f"gpu: error: continue.py failed with exit {code} (log: {a.out / 'train.log'})")
    from asr.model.loader import load_model, save_model  # noqa: PLC0415

    for name in ("last.safetensors", "candidate.safetensors"):
        encoder, tokenizer, info = load_model(work / name)
        save_model(a.out / name, encoder, tokenizer, info, half=True)
    print(f"gpu: period {period['period']}'s results in {a.out}: {', '.join(RESULTS)}")


def receive(a: argparse.Namespace) -> None:
    """The GPU's results into this machine's run folder, with the phases they stand for marked done."""
    period, _ = carry.current_period(a.work, a.state, a.synthetic, carry.BLEND_SEED_BASE)
    remote = json.loads((a.results / "period.json").read_text())
    if remote["period"] != period["period"] or remote["kokoro_slice"]["start"] != period["kokoro_slice"]["start"]:
        sys.exit(f"gpu: error: {a.results} holds period {remote['period']}'s results, not period {period['period']}'s")
    if "export" not in remote["timings"]:
        sys.exit(f"gpu: error: {a.results}: the GPU run did not finish its export")
    work = a.work / f"p{period['period']:03d}"
    for name in RESULTS:
        if name != "period.json" and (a.results / name).exists():
            shutil.copyfile(a.results / name, work / name)
    if period.get("previous_candidate") and not remote.get("previous_candidate"):
        # the call left the previous candidate behind (the 64 MiB tree): the running mean is taken here
        (work / "candidate.safetensors").replace(work / "period_mean.safetensors")
        carry.average_with_previous(work, period["previous_candidate"])
    for name in ("train", "export"):
        period["timings"][name] = remote["timings"][name]
    period["machine"], period["overrides"] = remote["machine"], remote.get("overrides", [])
    carry.save_period(work, period)
    print(f"gpu: period {period['period']} trained on {remote['machine']['gpu'] or remote['machine']['cpu']}; "
          "continue.py goes on with the scores")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("pack", "train", "receive"):
        s = sub.add_parser(name)
        s.add_argument("--pack", type=Path, default=ROOT / ".device", help="the packed corpora's folder")
        s.add_argument("--state", type=Path, default=ROOT / "recipes" / "voices" / "state")
        s.add_argument("--work", type=Path, default=ROOT / "runs" / "continue")
        s.add_argument("--synthetic", type=Path, default=ROOT / "data" / "synthetic")
        s.add_argument("--jobs", type=int, default=2,
                       help="encoding processes (pack); loader processes that draw the augmentation, "
                            "or rendering processes with --rendered-variants (train)")
    sub.choices["pack"].add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    sub.choices["pack"].add_argument("--opus-level", type=float, default=OPUS_LEVEL,
                                     help="libsndfile's Opus compression level (1: smallest)")
    sub.choices["train"].add_argument("--minutes", type=float, default=None,
                                      help="wall minutes of fitting at most (default: --call-minutes, else 6)")
    sub.choices["train"].add_argument("--call-minutes", type=float, default=None,
                                      help="wall minutes this whole command may take (a device call's limit): fitting "
                                           f"ends {EXPORT_SECONDS} s before them, whatever rendering took")
    sub.choices["train"].add_argument("--out", type=Path, required=True, help="where the results go")
    sub.choices["train"].add_argument("--accelerator", default="gpu", help="Lightning's accelerator")
    sub.choices["train"].add_argument("--variants-dir", type=Path, default=ROOT / "data" / "variants")
    sub.choices["train"].add_argument("--rendered-variants", action="store_true",
                                      help="render the augmentation views first (data.variants) instead of "
                                           "drawing them in --jobs loader processes")
    sub.choices["train"].add_argument("overrides", nargs="*", help="extra Hydra overrides for training")
    sub.choices["receive"].add_argument("results", type=Path, help="the folder `train --out` filled")
    a = p.parse_args(argv)
    {"pack": pack, "train": train, "receive": receive}[a.command](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
