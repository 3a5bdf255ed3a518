"""Batched transcription against the per-file path: wall time, throughput, peak memory, the same text.

    python scripts/bench/batched.py [--manifest ../shared/data/speechocean762/dev.jsonl] [--limit 500]
                                    [--out benchmarks/transcribe] [--allow-load]

Runs `python -m asr.transcribe` on the manifest's first `--limit` files as a user would (model loading
included), each run in a fresh process whose peak RSS is its own and its workers' (bench/peak.py), greedy and
beam + word LM:

  per-file   --batch-seconds 0 (one file at a time, 2 s steps: the path before asr.batch.padded), 1 thread
  batched    the default --batch-seconds, 1 thread, then 2 threads (2 cores), then --jobs 2 (two worker
             processes of 1 thread, asr.batch.processes)
  per-file, 2 processes   the files split in two halves, two processes at once, 1 thread each

and checks that every batched text equals the per-file text. Writes OUT/batched.json and OUT/batched.md:
audio hours per wall-clock hour, speed-up over per-file, peak RSS. Refuses above a load of 0.5 (bench/quiet.py).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts/ folder: `bench` package

from asr.batch.padded import DEFAULT_BATCH_SECONDS, WINDOW_SECONDS  # noqa: E402
from asr.corpus.manifest import read_manifest, write_manifest  # noqa: E402
from bench import peak, quiet  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT.parent / "shared" / "data" / "speechocean762" / "dev.jsonl"


def transcribe(manifests: list[Path], args: list[str]) -> tuple[float, float, float, dict[str, str]]:
    """`asr.transcribe` on each manifest, one process each, all at once -> (wall seconds, largest peak RSS in
    MB, CPU-seconds of every process and worker, file -> text)."""
    began, outs, procs = time.perf_counter(), [], []
    with tempfile.TemporaryDirectory() as folder:
        reports = [Path(folder) / f"peak{i}" for i in range(len(manifests))]
        for manifest, report in zip(manifests, reports):
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")  # files: a full pipe would block it
            procs.append((subprocess.Popen(peak.command(report, "asr.transcribe", str(manifest), *args), cwd=ROOT,
                                           stdout=out, stderr=err, text=True), err))
            outs.append(out)
        for proc, err in procs:
            if proc.wait() != 0:
                err.seek(0)
                raise SystemExit(f"batched: error: asr.transcribe {' '.join(args)} failed: {err.read().strip()[-500:]}")
        wall = time.perf_counter() - began
        largest = max(peak.read_mb(report) for report in reports)
        cpu = sum(peak.read_cpu_s(report) for report in reports)
    texts: dict[str, str] = {}
    for out in outs:
        out.seek(0)
        texts.update(line.rstrip("\n").split("\t", 1) for line in out if "\t" in line)
    return wall, largest, cpu, texts


def halves(manifest: Path, folder: Path) -> list[Path]:
    """The manifest's rows in two manifests (alternate rows, so both halves hold about as much audio)."""
    rows = read_manifest(manifest)
    paths = [folder / "half0.jsonl", folder / "half1.jsonl"]
    for i, path in enumerate(paths):
        write_manifest(path, [{"audio": str(r.audio), "duration": r.duration, "text": r.text} for r in rows[i::2]])
    return paths


RUNS = [  # name, processes, extra options
    ("per-file", 1, ["--batch-seconds", "0"]),
    ("batched", 1, []),
    ("batched, 2 threads", 1, ["--threads", "2"]),
    ("per-file, 2 processes", 2, ["--batch-seconds", "0"]),
    ("batched, --jobs 2", 1, ["--jobs", "2"]),
]


def measure(manifest: Path, limit: int, folder: Path) -> dict:
    """Every run of RUNS, greedy and beam + LM, on the manifest's first `limit` files."""
    rows = read_manifest(manifest)[:limit]
    subset = folder / "subset.jsonl"
    write_manifest(subset, [{"audio": str(Path(r.audio).resolve()), "duration": r.duration, "text": r.text}
                            for r in rows])
    audio_h = sum(r.duration or 0.0 for r in rows) / 3600
    results = {"files": len(rows), "audio_hours": round(audio_h, 4), "batch_seconds": DEFAULT_BATCH_SECONDS,
               "window_seconds": WINDOW_SECONDS, "decoders": {}}
    for decoder in ("greedy", "beam"):
        runs, reference = [], None
        for name, processes, extra in RUNS:
            manifests = [subset] if processes == 1 else halves(subset, folder)
            wall, peak, cpu, texts = transcribe(manifests, ["--" + decoder, *extra])
            reference = reference or texts
            differ = sum(texts.get(path) != text for path, text in reference.items())
            runs.append({"run": name, "processes": processes, "wall_s": round(wall, 2),
                         "audio_hours_per_hour": round(audio_h * 3600 / wall, 1),
                         "speedup": round(runs[0]["wall_s"] / wall, 2) if runs else 1.0,
                         "cpu_s": round(cpu, 2), "peak_rss_mb": round(peak), "texts_differing": differ})
            print(f"batched: {decoder:6} {name:24} {wall:7.2f} s  {cpu:6.2f} CPU-s  x{runs[-1]['speedup']:.2f}  "
                  f"{peak:5.0f} MB  {differ} text(s) differ", flush=True)
        results["decoders"][decoder] = runs
    return results


def markdown(results: dict) -> str:
    lines = ["# Batched transcription against the per-file path\n",
             f"`python scripts/bench/batched.py`: `asr.transcribe` on {results['files']} files "
             f"({results['audio_hours'] * 60:.1f} min of audio), model loading included, on "
             f"{results['machine']} "
             f"(1-minute load {results['load_at_start']} at the start); batched: --batch-seconds "
             f"{results['batch_seconds']:g}, {results['window_seconds']:g} s windows. Texts differing: against the "
             "per-file text, file by file. CPU: user + system seconds of the run's processes and workers. Peak RSS: the largest single process of a run (with --jobs, of the main process and "
             "its workers; scripts/bench/peak.py).\n",
             "| decoder | run | wall (s) | CPU (s) | audio h / h | speed-up | peak RSS (MB) | texts differing |",
             "|---|---|---|---|---|---|---|---|"]
    for decoder, runs in results["decoders"].items():
        lines += [f"| {decoder} | {r['run']} | {r['wall_s']} | {r['cpu_s']} | {r['audio_hours_per_hour']} | x{r['speedup']} | "
                  f"{r['peak_rss_mb']} | {r['texts_differing']} |" for r in runs]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/bench/batched.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", type=Path, default=DEV, help="utterances to transcribe (default: speechocean762 dev)")
    parser.add_argument("--limit", type=int, default=500, help="its first N files (default 500)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "transcribe",
                        help="where batched.json and batched.md go")
    args = quiet.parse_guarded(parser, argv, "batched")
    if not args.manifest.is_file():
        parser.error(f"{args.manifest}: no such manifest")
    machine = quiet.machine()
    with tempfile.TemporaryDirectory() as folder:
        results = {**measure(args.manifest, args.limit, Path(folder)), "load_at_start": args.load, "machine": machine}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "batched.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "batched.md").write_text(markdown(results))
    print(f"batched: wrote {args.out / 'batched.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
