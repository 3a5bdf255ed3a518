"""Torch against ONNX fp32 against ONNX int8 on the same audio, in one run.

    python scripts/bench/onnx.py [--limit N] [--manifest M] [--onnx-dir DIR] [--out benchmarks/onnx]

Each variant runs in a fresh worker process of its own (the ONNX ones with torch made unimportable),
so its peak RSS and its thread settings are its own. A worker streams every utterance in 500 ms
chunks at 1 thread (per-chunk compute: p50/p95; RTF = compute / audio), decodes the log-probs
greedily and with the word-LM beam search (dev WER both ways), and `asr.transcribe` runs on a 60 s
file for the peak RSS of the command a user runs. Prints a markdown table and writes OUT/onnx.md
and OUT/onnx.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if sys.path and Path(sys.path[0] or ".").resolve() == HERE:
    sys.path[0] = str(HERE.parent)  # run as a script: `import onnx` must find the onnx package, not this file

VARIANTS = {"torch": "torch (safetensors)", "fp32": "ONNX fp32", "int8": "ONNX int8"}
DEV = ROOT.parent / "shared" / "data" / "speechocean762" / "dev.jsonl"


def version(package: str) -> str:
    try:
        return _version(package)
    except PackageNotFoundError:
        return "not installed"


def percentile(values: list[float], q: float) -> float:
    import numpy as np
    return float(np.percentile(values, q)) if values else 0.0


def model_path(variant: str, onnx_dir: Path) -> tuple[str, Path]:
    """(backend, what to load) for a variant."""
    if variant == "torch":
        from asr.pretrained import default_model_path
        return "torch", default_model_path()
    meta = json.loads((onnx_dir / "model.json").read_text())
    name = meta["files"]["fp32" if variant == "fp32" else "int8"]
    return "onnx", onnx_dir / name


def worker(variant: str, manifest: Path, limit: int | None, onnx_dir: Path, chunk_ms: float) -> dict:
    """Every measurement of one variant that runs inside one process."""
    import jiwer
    import numpy as np

    from asr.audio.chunks import rechunk
    from asr.audio.files import load_audio
    from asr.corpus.manifest import read_manifest
    from asr.decoding.decoder import Decoder
    from asr.model.recognizer import Recognizer
    from asr.text.normalize import normalize
    from bench.server_process import proc_rss_mb

    backend, path = model_path(variant, onnx_dir)
    began = time.perf_counter()
    recognizer = Recognizer.load(path, backend=backend, threads=1)
    load_s = time.perf_counter() - began
    greedy, beam = Decoder.load(recognizer.tokenizer, lm=None), Decoder.load(recognizer.tokenizer)
    utterances = read_manifest(manifest)[:limit] if limit else read_manifest(manifest)
    chunk = round(chunk_ms * 16)
    chunk_times, compute_s, audio_s, beam_s, refs, hyps_greedy, hyps_beam = [], 0.0, 0.0, 0.0, [], [], []
    for utt in utterances:
        wave = load_audio(utt.audio)
        outs = []
        for step in recognizer.stream(rechunk([wave], chunk)):
            outs.append(step.logprobs)
            compute_s += step.compute_ms / 1000
            if not step.tail:
                chunk_times.append(step.compute_ms)
        logprobs = np.concatenate(outs)
        audio_s += wave.size / 16000
        t0 = time.perf_counter()
        hyps_beam.append(normalize(beam.text(beam.decode(logprobs))))
        beam_s += time.perf_counter() - t0
        hyps_greedy.append(normalize(greedy.text(greedy.decode(logprobs))))
        refs.append(normalize(utt.text))
    return {
        "variant": variant, "backend": backend, "model": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "model_mb": path.stat().st_size / 1e6, "load_s": load_s, "utts": len(refs), "audio_s": audio_s,
        "chunks": len(chunk_times), "chunk_p50_ms": percentile(chunk_times, 50), "chunk_p95_ms": percentile(chunk_times, 95),
        "rtf": compute_s / audio_s, "beam_rtf": beam_s / audio_s,
        "wer_greedy": 100 * jiwer.wer(refs, hyps_greedy), "wer_beam": 100 * jiwer.wer(refs, hyps_beam),
        "worker_peak_rss_mb": proc_rss_mb(os.getpid(), "VmHWM"),
        "torch_imported": "torch" in sys.modules and sys.modules["torch"] is not None,
        "hyps_greedy": hyps_greedy, "hyps_beam": hyps_beam,
    }


def long_file(manifest: Path, seconds: float, out: Path) -> Path:
    """`seconds` of real speech: dev utterances end to end, written as a 16 kHz wav."""
    import numpy as np
    import soundfile as sf

    from asr.audio.files import load_audio
    from asr.corpus.manifest import read_manifest
    waves, total = [], 0
    for utt in read_manifest(manifest):
        waves.append(load_audio(utt.audio))
        total += waves[-1].size
        if total >= seconds * 16000:
            break
    sf.write(out, np.concatenate(waves)[:round(seconds * 16000)], 16000)
    return out


def transcribe_rss(variant: str, onnx_dir: Path, audio: Path, decoding: str) -> dict:
    """Peak RSS (MB), wall time and text of `python -m asr.transcribe AUDIO --greedy|--beam` in a fresh process."""
    from bench import peak  # noqa: PLC0415

    backend, path = model_path(variant, onnx_dir)
    args = [str(audio), "--backend", backend, f"--{decoding}"] + (["--onnx-dir", str(path)] if backend == "onnx" else [])
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "peak_kb"
        cmd = peak.command(report, "asr.transcribe", *args)
        began = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - began
        if done.returncode:
            raise RuntimeError(f"asr.transcribe {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        peak_mb = peak.read_mb(report)
    return {f"rss_{decoding}_mb": peak_mb, f"transcribe_{decoding}_wall_s": wall,
            f"transcribe_{decoding}_text": done.stdout.strip()}


def run_worker(variant: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", variant, "--json", str(out),
               "--manifest", str(args.manifest), "--onnx-dir", str(args.onnx_dir), "--chunk-ms", str(args.chunk_ms)]
        cmd += ["--limit", str(args.limit)] if args.limit else []
        subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
        return json.loads(out.read_text())


def table(rows: list[dict]) -> str:
    head = ("| variant | model MB | chunk p50 ms | chunk p95 ms | RTF (1 thread) | peak RSS MB, 60 s: greedy / beam "
            "| WER % greedy | WER % beam | utts |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    return head + "".join(
        f"| {VARIANTS[r['variant']]} | {r['model_mb']:.1f} | {r['chunk_p50_ms']:.2f} | {r['chunk_p95_ms']:.2f} | "
        f"{r['rtf']:.4f} | {r['rss_greedy_mb']:.0f} / {r['rss_beam_mb']:.0f} | {r['wer_greedy']:.2f} | "
        f"{r['wer_beam']:.2f} | {r['utts']} |\n" for r in rows)


def run(limit: int | None = None, manifest: Path = DEV, onnx_dir: Path | None = None,
        out: Path = ROOT / "benchmarks" / "onnx", chunk_ms: float = 500.0, variants: tuple[str, ...] = tuple(VARIANTS)) -> list[dict]:
    """The whole comparison; writes OUT/onnx.md and OUT/onnx.json and returns the rows."""
    if onnx_dir is None:
        from asr.model.onnx_backend import default_onnx_dir
        onnx_dir = default_onnx_dir()
    args = argparse.Namespace(limit=limit, manifest=manifest, onnx_dir=onnx_dir, chunk_ms=chunk_ms)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        audio = long_file(manifest, 60.0, Path(tmp) / "long60.wav")
        for variant in variants:
            print(f"bench/onnx: {variant} ...", file=sys.stderr, flush=True)
            rows.append({**run_worker(variant, args), **transcribe_rss(variant, onnx_dir, audio, "greedy"),
                         **transcribe_rss(variant, onnx_dir, audio, "beam")})
    base = rows[0]
    for row in rows:
        row["same_greedy_text_as_first"] = sum(a == b for a, b in zip(row["hyps_greedy"], base["hyps_greedy"]))
        row["same_beam_text_as_first"] = sum(a == b for a, b in zip(row["hyps_beam"], base["hyps_beam"]))
        row["same_transcribe_text_as_first"] = all(row[f"transcribe_{d}_text"] == base[f"transcribe_{d}_text"]
                                                   for d in ("greedy", "beam"))
    rows = [{k: v for k, v in row.items() if not k.startswith("hyps_") and not k.endswith("_text")} for row in rows]
    versions = {name: version(name) for name in ("torch", "onnxruntime")}
    meta = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(), **versions}
    text = (f"# Torch vs ONNX ({manifest.name}, {rows[0]['utts']} utterances, {chunk_ms:g} ms chunks, 1 thread)\n\n"
            f"Measured {meta['date']} on {meta['cpus']} CPUs (torch {versions['torch']}, onnxruntime "
            f"{versions['onnxruntime']}) by `python scripts/bench/onnx.py"
            f"{f' --limit {limit}' if limit else ''}`.\n\n{table(rows)}\n"
            + "".join(f"- {VARIANTS[r['variant']]}: greedy text equal to {VARIANTS[base['variant']]} on "
                      f"{r['same_greedy_text_as_first']}/{r['utts']} utterances, beam text on "
                      f"{r['same_beam_text_as_first']}/{r['utts']}, 60 s transcript "
                      f"{'identical' if r['same_transcribe_text_as_first'] else 'different'}\n"
                      for r in rows[1:])
            + "\nChunk times: one `Recognizer.step` (features + acoustic model) per 500 ms chunk, every chunk of "
              "every utterance, in a process of its own per variant (the ONNX ones with torch unimportable); RTF: "
              "that compute over the audio's duration (the decoding not counted). Peak RSS: "
              "`python -m asr.transcribe FILE --backend ... --greedy` (or `--beam`: the lexicon beam search "
              "with the bundled word LM, whose lexicon trie and KenLM take about 35 MB) on 60 s of dev speech, in a fresh "
              "process. WER: the same log-probs decoded greedily and with the beam search. "
              "Reproduce: `python scripts/bench/onnx.py` (`--limit N` for a quick look).\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "onnx.md").write_text(text)
    (out / "onnx.json").write_text(json.dumps({"manifest": str(manifest.name), "limit": limit, "chunk_ms": chunk_ms,
                                               **meta, "rows": rows}, indent=1) + "\n")
    print(text)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/bench/onnx.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, help="first N utterances of the manifest (default: all)")
    p.add_argument("--manifest", type=Path, default=DEV)
    p.add_argument("--onnx-dir", type=Path, help="exported folder (default: the bundled export)")
    p.add_argument("--chunk-ms", type=float, default=500.0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "onnx")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: torch,fp32,int8")
    p.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: bench.quiet, the load guard
    from bench import quiet  # noqa: PLC0415

    quiet.add_allow_load(p)
    args = p.parse_args(argv)
    if args.worker:
        if args.worker != "torch":
            sys.modules["torch"] = None  # the ONNX runtime path must not need torch
        result = worker(args.worker, args.manifest, args.limit, args.onnx_dir, args.chunk_ms)
        args.json.write_text(json.dumps(result))
        return 0
    quiet.guard(args.allow_load, args.out, "onnx")  # committed figures: only on a quiet machine
    run(args.limit, args.manifest, args.onnx_dir, args.out, args.chunk_ms, tuple(args.variants.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
