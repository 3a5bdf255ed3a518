"""What a word LM costs the torch-free runtime, two LMs (each with its search settings) in one run.

    python scripts/bench/lm.py --lm asr/pretrained/default.arpa.gz \
        --baseline old/default.arpa --baseline-args '--lexicon-words 20000 --beam-size 128 --lm-weight 1.5 --word-score 0' \
        [--lm-args '...'] [--limit 30] [--runs 3] [--out benchmarks/lm] [--name lm]
    python scripts/bench/lm.py --baseline asr/pretrained/default.arpa.gz --baseline-args '--onnx-dir OLD/onnx ...'

For each: the file's size; the time from starting `python -m asr.transcribe --backend onnx` on a 5.5 s file (the
two shipped examples) to its first line of text, the median of --runs runs; the peak RSS of the same command on a
33 s file (the examples six times over, with pauses); and the compute per 500 ms chunk (model step, search and
partial, one thread, p50 and p95) streaming the first --limit dev-clean-2 utterances as asr.stream does, in a
process that cannot import torch. `--onnx-dir` in an LM's args puts another exported model under it (two models
with one LM). The server's knee (streams at p95 < 250 ms) is scripts/bench/serve.py's, run
with --server-args '--lm NEW ...' --baseline '--lm OLD ...'. Writes OUT/NAME.md (a table) and OUT/NAME.json;
refuses to write into benchmarks/ on a busy machine (bench/quiet.py).
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts/ folder: `bench` package

from bench import peak  # noqa: E402
from bench.quiet import machine, parse_guarded, write_page  # noqa: E402
from bench.server_process import ROOT  # noqa: E402

EXAMPLES = sorted((ROOT / "asr" / "examples").glob("*.flac"))
DEV = ROOT.parent / "shared" / "data" / "librispeech" / "dev-clean-2.jsonl"


def test_files(folder: Path) -> tuple[Path, Path]:
    """A 5.5 s file (the two examples, back to back) and a 33 s one (both six times, with 0.25 s pauses)."""
    waves = [sf.read(path, dtype="float32")[0] for path in EXAMPLES]
    pause = np.zeros(4000, np.float32)
    short, long = folder / "short.wav", folder / "long.wav"
    sf.write(short, np.concatenate(waves), 16000)
    sf.write(long, np.concatenate([part for _ in range(6) for w in waves for part in (w, pause)]), 16000)
    return short, long


def first_text_s(audio: Path, args: list[str]) -> float:
    """Seconds from starting asr.transcribe to the first line it prints."""
    began = time.perf_counter()
    with subprocess.Popen([sys.executable, "-m", "asr.transcribe", "--backend", "onnx", *args, str(audio)], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as process:
        line = process.stdout.readline()
        elapsed = time.perf_counter() - began
        process.wait()
    if not line.strip():
        raise RuntimeError(f"asr.transcribe {' '.join(args)} printed no text")
    return elapsed


def peak_rss_mb(audio: Path, args: list[str], folder: Path) -> float:
    report = folder / "peak.txt"
    subprocess.run(peak.command(report, "asr.transcribe", "--backend", "onnx", *args, str(audio)), cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return peak.read_mb(report)


def mix_s(lm: Path, folder: Path) -> float:
    """Seconds of `python -m asr.training.lm.mix` mixing a trigram of 200 sentences into `lm`, as asr.finetune does
    with a user's transcripts (its output compressed, as a model folder's lm.arpa.gz)."""
    text = folder / "user.txt"
    rows = (DEV.parent.parent / "speechocean762" / "train.jsonl").read_text().splitlines()[:200]
    text.write_text("".join(json.loads(row)["text"] + "\n" for row in rows))
    subprocess.run([sys.executable, "-m", "asr.training.lm", str(text), "--out", str(folder / "user.arpa")], cwd=ROOT,
                   check=True, stderr=subprocess.DEVNULL)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "asr.training.lm.mix", str(folder / "user.arpa"), str(lm), "--weight", "0.1",
                    "--out", str(folder / "mixed.arpa.gz")], cwd=ROOT, check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


def chunk_worker(lm: str, args: list[str], limit: int) -> dict:
    """Stream the first `limit` dev utterances through the bundled ONNX export (or `--onnx-dir` in `args`) with `lm`
    (500 ms chunks, one thread), in this process, which must not import torch."""
    sys.modules["torch"] = None
    from asr import cli  # noqa: PLC0415
    from asr.audio.files import load_audio  # noqa: PLC0415
    from asr.corpus.manifest import read_manifest  # noqa: PLC0415
    from asr.decoding.beam import BeamConfig  # noqa: PLC0415
    from asr.decoding.decoder import Decoder  # noqa: PLC0415
    from asr.model.recognizer import Recognizer  # noqa: PLC0415
    from asr.pretrained import bundled  # noqa: PLC0415
    from bench.ours import stream_clip  # noqa: PLC0415

    parser = cli.new_parser("bench.lm", "")
    cli.add_decoder_args(parser)
    parser.add_argument("--onnx-dir", type=Path, default=bundled("onnx"))
    o = parser.parse_args(args)
    cfg = BeamConfig(o.beam_size, o.lm_weight, o.word_score, o.lexicon_words, o.beam_threshold, o.token_beam)
    recognizer = Recognizer.load(o.onnx_dir / "encoder.onnx", backend="onnx", threads=1)
    began = time.perf_counter()
    decoder = Decoder.load(recognizer.tokenizer, lm, cfg, restorer=None)
    load_s = time.perf_counter() - began
    chunk_ms = []
    for utt in read_manifest(DEV)[:limit]:
        chunk_ms += stream_clip(recognizer, decoder, load_audio(utt.audio), 8000)[1]
    return {"lm_load_s": load_s, "chunks": len(chunk_ms), "chunk_p50_ms": float(np.percentile(chunk_ms, 50)),
            "chunk_p95_ms": float(np.percentile(chunk_ms, 95))}


def measure(lm: Path, args: list[str], limit: int, runs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        short, long = test_files(folder)
        full = ["--lm", str(lm), *args]
        first = statistics.median(first_text_s(short, full) for _ in range(runs))
        rss = peak_rss_mb(long, full, folder)
        out = folder / "chunks.json"
        subprocess.run([sys.executable, __file__, "--chunk-worker", str(lm), "--lm-args", shlex.join(args),
                        "--limit", str(limit), "--json", str(out)], cwd=ROOT, check=True)
        chunks = json.loads(out.read_text())
        mix = mix_s(lm, folder)
    return {"finetune_mix_s": round(mix, 1), "lm": str(lm), "args": args, "lm_mb": round(lm.stat().st_size / 1e6, 1), "first_text_s": round(first, 2),
            "peak_rss_mb": round(rss), **{k: round(v, 2) for k, v in chunks.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lm", type=Path, default=ROOT / "asr" / "pretrained" / "default.arpa.gz")
    p.add_argument("--lm-args", default="", help="its search options, as asr.transcribe takes them")
    p.add_argument("--baseline", type=Path, help="the LM to compare with, in the same run")
    p.add_argument("--baseline-args", default="")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "lm")
    p.add_argument("--name", default="lm")
    p.add_argument("--chunk-worker", help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv) if "--chunk-worker" in (argv or sys.argv) else parse_guarded(p, argv, "bench.lm")
    if a.chunk_worker:
        a.json.write_text(json.dumps(chunk_worker(a.chunk_worker, shlex.split(a.lm_args), a.limit)))
        return 0
    rows = {"date": time.strftime("%Y-%m-%d %H:%M"), "load_at_start": a.load, "machine": machine()}
    for name, lm, args in [("baseline", a.baseline, a.baseline_args), ("lm", a.lm, a.lm_args)]:
        if lm is not None:
            rows[name] = measure(lm, shlex.split(args), a.limit, a.runs)
            print(json.dumps(rows[name]), flush=True)
    columns = [("lm_mb", "file MB"), ("first_text_s", "start -> first text, s"), ("peak_rss_mb", "peak RSS MB"),
               ("lm_load_s", "LM load, s"), ("chunk_p50_ms", "chunk p50 ms"), ("chunk_p95_ms", "chunk p95 ms"),
               ("finetune_mix_s", "a user's text mixed in, s")]
    lines = [f"# What the word LM costs ({rows['date']})", "",
             f"`python scripts/bench/lm.py {shlex.join(argv if argv is not None else sys.argv[1:])}` on {rows['machine']}"
             f" (1-minute load {rows['load_at_start']} at the start). asr.transcribe --backend onnx (no torch): the time"
             " to its first line on a 5.5 s file (median of the runs) and its peak RSS on a 33 s file; the compute per"
             f" 500 ms chunk (model step + search + partial, one thread) over the first {a.limit} dev-clean-2 utterances;"
             " the time asr.training.lm.mix takes to mix a trigram of 200 sentences into it, as asr.finetune does.",
             "", "| LM | search options | " + " | ".join(title for _, title in columns) + " |",
             "|---|---|" + "---:|" * len(columns)]
    for name in ("baseline", "lm"):
        if name in rows:
            row = rows[name]
            lines.append(f"| `{Path(row['lm']).name}` | `{shlex.join(row['args']) or 'the defaults'}` | "
                         + " | ".join(str(row[c]) for c, _ in columns) + " |")
    write_page(a.out, a.name, lines + [""])
    (a.out / f"{a.name}.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
