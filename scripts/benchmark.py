"""Benchmark the recognizer as the tools run it: accuracy, streaming latency, speed, memory, scaling, and peers.

    python scripts/benchmark.py [--model PATH] [--limit N] [--peers whisper-tiny,whisper-base] [--out benchmarks/]
                                [--accuracy-only] [--smoke]

Writes OUT/RESULTS.md (tables), OUT/results.json (every number) and OUT/*.png (plots, with matplotlib), and prints
the targets and accuracy tables. Accuracy is `asr.evaluate`'s, through its own code (`bench/accuracy.py`): the
tools' default decoding (the text `asr.transcribe` prints), the first pass alone, no word LM, and the default
streamed as `asr.stream` streams it. RESULTS.md names the model by its file and sha256. Peers (Whisper tiny.en and
base by default) need `bash scripts/install_peers.sh`; a peer that is not installed is skipped and RESULTS.md says
why. --accuracy-only writes the accuracy and peer tables alone; --smoke is the seconds-long version the test suite
runs (3 utterances per set, tiny durations, no peers).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the `bench` helper package beside this file

from omegaconf import OmegaConf  # noqa: E402

from asr.api import Transcriber  # noqa: E402
from asr.audio import SAMPLE_RATE  # noqa: E402
from asr.corpus.evaluation import summarize  # noqa: E402
from asr.model.folder import WEIGHTS  # noqa: E402
from asr.model.recognizer import Recognizer  # noqa: E402
from asr.pretrained import default_model_path  # noqa: E402
from bench import accuracy, ours, peers, quiet, sections  # noqa: E402
from bench.attention import chunk_speed, describe, scaling  # noqa: E402
from bench.data import ROOT, SETS, EvalSet, load_set, write_wavs  # noqa: E402
from bench.plots import make_plots  # noqa: E402
from bench.report import accuracy_table, render, targets, targets_table  # noqa: E402

STARTED = time.perf_counter()


def log(message: str) -> None:
    print(f"benchmark: [{time.perf_counter() - STARTED:6.0f} s] {message}", flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python scripts/benchmark.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="model file (.safetensors) or folder; default: the bundled model")
    p.add_argument("--manifest", type=Path, action="append",
                   help="evaluate this manifest instead of the default sets (repeatable)")
    p.add_argument("--lm", help="word LM for our rows (asr.evaluate --lm; default: the tools' choice)")
    p.add_argument("--limit", type=int, help="utterances per set for our model (default: all)")
    p.add_argument("--streaming-limit", type=int, default=100,
                   help="utterances per set for the streaming row, whose chunks give the chunk compute (default 100)")
    p.add_argument("--accuracy-only", action="store_true", help="only the accuracy and peer tables")
    p.add_argument("--peers", default=",".join(peers.DEFAULT),
                   help=f"comma-separated peers of {', '.join(peers.PEERS)}, or 'none' (default: %(default)s)")
    p.add_argument("--peer-limit", type=int, default=5, help="utterances per set each peer decodes in this run")
    p.add_argument("--rerun-limit", type=int, default=1, help="utterances per set for the re-run-every-chunk cost")
    p.add_argument("--peer-cache", type=Path, default=ROOT / "benchmarks" / "peers",
                   help="saved peer hypotheses, reused for accuracy; a run whose --out is in benchmarks/ adds its own "
                        "('none' to disable)")
    p.add_argument("--endpoint-limit", type=int, default=30,
                   help="utterances per set for the end-of-speech and word delays")
    p.add_argument("--speed-seconds", type=float, default=60.0, help="audio for the thread-count RTF")
    p.add_argument("--memory-minutes", type=float, nargs="+", default=[1.0, 10.0, 60.0])
    p.add_argument("--scaling-minutes", type=float, nargs="+", default=[1.0, 2.0, 5.0, 10.0, 60.0])
    p.add_argument("--preset-seconds", type=float, default=30.0, help="audio per attention preset")
    p.add_argument("--chunk-ms", type=float, default=500.0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks")
    p.add_argument("--robustness", default=str(ROOT / "benchmarks" / "robustness"), metavar="DIR",
                   help="include the tables of DIR/robustness.json (scripts/bench/robustness.py) where it is there; "
                        "'none' to leave them out (default: %(default)s)")
    p.add_argument("--smoke", action="store_true", help="tiny, fast version (the test suite's)")
    quiet.add_allow_load(p)
    p.add_argument("--score-peers", action="store_true",
                   help="only print the WER/CER of the saved peer hypotheses in --peer-cache, then exit")
    args = p.parse_args(argv)
    if args.smoke:
        args.limit, args.peers, args.endpoint_limit, args.speed_seconds = args.limit or 3, "none", 2, 3.0
        args.memory_minutes, args.scaling_minutes, args.preset_seconds = [0.05, 0.1], [0.05], 2.0
    args.peers = [] if args.peers in ("", "none") else args.peers.split(",")
    unknown = set(args.peers) - set(peers.PEERS)
    if unknown:
        p.error(f"unknown peers {sorted(unknown)} (known: {', '.join(peers.PEERS)})")
    args.peer_cache = None if str(args.peer_cache) == "none" else args.peer_cache
    return args


def model_identity(model: str | None) -> dict:
    """The benchmarked model's weights file and its sha256: what RESULTS.md names it by. `shipped`: it is the bundled
    default (asr/pretrained/default.safetensors, as docs/figures.json knows it)."""
    path, bundled = Path(model) if model else default_model_path(), default_model_path()
    if path is not None and path.is_dir():
        path = path / WEIGHTS if (path / WEIGHTS).is_file() else None  # an ONNX export folder has no weights file
    if path is None or not path.is_file():
        return {"file": str(model), "sha256": None, "shipped": False}
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    shipped = bundled is not None and hashlib.sha256(bundled.read_bytes()).hexdigest() == digest
    shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    return {"file": str(shown), "sha256": digest, "shipped": shipped}


def measure_set(rows: accuracy.Rows, eval_set: EvalSet, args: argparse.Namespace, chunk: int) -> dict | None:
    """Our model on one set: every accuracy row, then (unless --accuracy-only) the word and end-of-speech delays on
    its first --endpoint-limit utterances. None when the set is not here."""
    if not eval_set.manifest.is_file():
        return None
    row: dict = {"name": eval_set.name, "note": eval_set.note, "set": eval_set, "rows": {}, "errors": []}
    for decoding in rows.wanted():
        log(f"{eval_set.name}: {decoding.key}")
        limit = args.limit if decoding.key != "streaming" else min(args.limit or 10 ** 9, args.streaming_limit)
        scored = rows.score(decoding, eval_set, limit)
        row["rows"][decoding.key] = {**scored.summary, "what": decoding.what}
        row["errors"] += scored.errors
        if decoding.key == "default":
            row["by_name"] = accuracy.by_name(scored.results, eval_set.manifest)
        if decoding.key == "streaming":
            row["chunk_ms_all"] = scored.chunk_ms
    row["utts"] = row["rows"]["default"]["utts"]
    if args.accuracy_only:
        return row
    clips, _ = load_set(eval_set, min(args.limit or 10 ** 9, max(args.endpoint_limit, args.peer_limit, 1)))
    model = rows.default
    delays, not_fired = ours.endpoint_delays(rows.recognizer, model.decoder, clips[:args.endpoint_limit], chunk,
                                             cfg=model.endpoint)
    words = [d for clip in clips[:args.endpoint_limit]
             for d in ours.stream_clip(rows.recognizer, model.decoder, clip.wave, chunk)[2]]
    row.update(clips=clips, delays=delays, not_fired=not_fired, word_delay_all=words,
               chunk_ms=ours.percentiles(row.get("chunk_ms_all", [])), word_delay_s=ours.percentiles(words),
               endpoint_s=ours.endpoint_stats(delays, not_fired))
    return row


def presets(recognizer: Recognizer, seconds: float) -> list[dict]:
    cfg, rows = recognizer.model.cfg, []
    for path in sorted((ROOT / "conf" / "attention").glob("*.yaml")):
        preset = OmegaConf.to_container(OmegaConf.load(path))
        if cfg.d_model % preset.get("n_heads", 4):  # heads for another width (Whisper's shapes)
            continue
        speed = chunk_speed(preset.get("window"), preset.get("n_heads", 4), seconds, base=cfg)
        rows.append({"preset": path.stem, "window": preset.get("window"), "heads": preset.get("n_heads", 4),
                     "n": 1, "median": speed["median_ms"], "p95": speed["p95_ms"], "max": speed["max_ms"],
                     "rtf": speed["rtf"],
                     "is_default": (preset.get("window"), preset.get("n_heads")) == (cfg.window, cfg.n_heads)})
    return rows


def memory_runs(args: argparse.Namespace) -> list[dict]:
    rows = []
    for minutes in args.memory_minutes:
        cmd = [sys.executable, str(ROOT / "scripts" / "bench" / "memory.py"), "--minutes", str(minutes),
               "--clips", "3" if args.smoke else "40"] + (["--source", str(args.manifest[0])] if args.manifest else [])
        done = subprocess.run(cmd + (["--model", args.model] if args.model else []), capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
        if done.returncode != 0:
            rows.append({"minutes": minutes, "error": (done.stderr.strip().splitlines() or ["failed"])[-1]})
        else:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        log(f"memory {minutes:g} min done")
    return rows


def costs(args: argparse.Namespace, rows: accuracy.Rows, sets: list[dict], work: Path) -> dict:
    """Everything after accuracy on our model: speed by thread count, memory, scaling, presets and (not --smoke)
    the deployment, serving and load benchmarks (`bench.sections`)."""
    results: dict = {}
    chunk = round(args.chunk_ms * SAMPLE_RATE / 1000)
    selected, total = [], 0.0
    for clip in sets[0]["clips"]:
        if total >= args.speed_seconds:
            break
        selected.append(clip)
        total += clip.seconds
    log("speed")
    threads = sorted({1, os.cpu_count() or 1, 2} & set(range(1, (os.cpu_count() or 1) + 1)))
    batch_manifest = write_wavs(selected, work / "batch")
    recognizer = rows.recognizer
    on_torch = recognizer if "onnx" not in recognizer.info else Recognizer.load(args.model, "torch")  # torch threads
    results["speed"] = {"clips": len(selected),
                        "threads": ours.thread_rtf(on_torch, rows.default.decoder, selected, chunk, threads),
                        "batch": ours.batch_throughput(args.model, batch_manifest, total, len(selected), max(threads))}
    log("memory")
    results["memory"] = memory_runs(args)
    log("scaling")
    results["scaling"] = [{**asdict(m), "rtf": m.rtf} for m in scaling(args.scaling_minutes, cfg=recognizer.model.cfg)]
    log("attention presets")
    results["presets"] = presets(recognizer, args.preset_seconds)
    first = sets[0]
    results["default_preset_wer"] = {"set": first["name"], "wer": first["rows"]["default"]["wer"]}
    if args.smoke:
        return results
    results |= sections.run(args.out, args.limit, log)
    return results


def score_saved_peers(folder: Path) -> int:
    """WER/CER of every saved peer hypothesis file (benchmarks/peers/<peer>/<set>.jsonl)."""
    print("| peer | set | utts | audio (min) | WER % | CER % |\n|---|---|---:|---:|---:|---:|")
    for path in sorted(folder.glob("*/*.jsonl")):
        rows = peers.load_cache(path).values()
        s = summarize([peers.scored(r["name"], r["ref"], r["duration"], r["hyp"]) for r in rows], [])
        print(f"| {path.parent.name} | {path.stem} | {s['utts']} | {s['audio_seconds'] / 60:.1f} | "
              f"{s['wer'] * 100:.2f} | {s['cer'] * 100:.2f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.score_peers:
        return score_saved_peers(args.peer_cache)
    load = quiet.guard(args.allow_load, args.out)  # the committed figures: only on a quiet machine
    machine, began = quiet.machine(), time.perf_counter()
    rows = accuracy.Rows(["--model", args.model] if args.model else [], ["--lm", args.lm] if args.lm else [])
    chunk = round(args.chunk_ms * SAMPLE_RATE / 1000)
    args.out.mkdir(parents=True, exist_ok=True)
    status = {p: "not requested (--peers)" for p in peers.PEERS}
    status.update({p: f"skipped: {peers.installed()}" if peers.installed() else "requested" for p in args.peers})
    results: dict = {"sets": [], "skipped_sets": [], "comparisons": [], "peers": {"status": status}}
    sets = [EvalSet(m.stem, m) for m in args.manifest] if args.manifest else SETS
    measured = []
    for eval_set in sets:
        row = measure_set(rows, eval_set, args, chunk)
        if row is None:
            results["skipped_sets"].append({"name": eval_set.name, "reason": f"{eval_set.manifest} not found"})
            continue
        for error in row.pop("errors"):
            log(f"{eval_set.name}: {error}")
        measured.append(row)
    if not measured:
        print("benchmark: error: no evaluation set found", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="asr-bench-") as tmp:
        work = Path(tmp)
        if "requested" in status.values():  # the same samples as ours, as wav files, for the peers' workers
            peer_limit = min(args.limit or args.peer_limit, args.peer_limit)
            wavs = [(s["name"], write_wavs(load_set(s["set"], peer_limit)[0], work / s["name"]), s["by_name"])
                    for s in measured]
            save = quiet.COMMITTED in (args.out.resolve(), *args.out.resolve().parents)  # the committed run's only
            results["comparisons"] = peers.run_all(args.peers, status, wavs, work, args.rerun_limit, args.peer_cache,
                                                   save, log)
        if not args.accuracy_only:
            results |= costs(args, rows, measured, work)
    if args.robustness != "none" and (section := sections.robustness(Path(args.robustness), args.out)):
        results.setdefault("sections", []).append(section)
    results["sets"] = [{k: v for k, v in s.items() if k not in ("set", "by_name", "clips", "delays", "not_fired")}
                       for s in measured]
    if not args.accuracy_only:
        results["latency"] = latency(measured)
    results["targets"] = targets(results)
    results["meta"] = meta(args, argv, rows.default, sets) | {"machine": machine, "load_at_start": load,
                                                              "elapsed_min": (time.perf_counter() - began) / 60}
    plots, note = make_plots(results, args.out)
    (args.out / "RESULTS.md").write_text(render(results, plots, note))
    slim = {k: v for k, v in results.items() if k != "latency"}
    slim["sets"] = [{k: v for k, v in s.items() if not k.endswith("_all")} for s in results["sets"]]
    if "latency" in results:
        slim["latency"] = {k: v for k, v in results["latency"].items() if not k.endswith("_all")}
    (args.out / "results.json").write_text(json.dumps(slim, indent=1) + "\n")
    print(targets_table(results) + "\n\n" + accuracy_table(results))
    log(f"wrote {args.out / 'RESULTS.md'} ({len(plots)} plots) in {results['meta']['elapsed_min']:.1f} min")
    return 0


def meta(args: argparse.Namespace, argv: list[str] | None, default: Transcriber, sets: list[EvalSet]) -> dict:
    """How the run was made and on what: the command, the model (file and sha256), its backend and decoding."""
    cfg, lm = default.recognizer.model.cfg, default.decoder.lm
    return {"command": "python scripts/benchmark.py " + shlex.join(sys.argv[1:] if argv is None else argv),
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
            "model": model_identity(args.model), "backend": "onnx" if "onnx" in default.recognizer.info else "torch",
            "decoding": accuracy.decoding(default.decoder), "lm": lm.path.name if lm and lm.path else None,
            "untrained": bool(default.recognizer.info.get("untrained")), "limit": args.limit, "smoke": args.smoke,
            "accuracy_only": args.accuracy_only, "chunk_ms": args.chunk_ms, "peer_limit": args.peer_limit,
            "rerun_limit": args.rerun_limit, "endpoint_limit": args.endpoint_limit,
            "streaming_limit": args.streaming_limit, "preset_seconds": args.preset_seconds,
            "d_model": cfg.d_model, "n_layers": cfg.n_layers, "architecture": describe(cfg),
            "set_notes": [f"{s.name} ({s.note or s.manifest})" for s in sets]}


def latency(sets: list[dict]) -> dict:
    """The delays of every set together: chunk compute (the streaming row's chunks), word end -> shown, end of
    speech -> final."""
    chunk_all = [t for s in sets for t in s.get("chunk_ms_all", [])]
    words_all = [d for s in sets for d in s["word_delay_all"]]
    delays = [d for s in sets for d in s["delays"]]
    return {"chunk_ms": ours.percentiles(chunk_all), "word_delay_s": ours.percentiles(words_all),
            "endpoint_s": ours.endpoint_stats(delays, sum(s["not_fired"] for s in sets)),
            "chunk_ms_all": chunk_all, "word_delay_s_all": words_all}


if __name__ == "__main__":
    sys.exit(main())
