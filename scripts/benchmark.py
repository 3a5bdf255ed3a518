"""Benchmark the recognizer: accuracy, streaming latency, speed, memory, scaling, and peers.

    python scripts/benchmark.py [--model PATH] [--limit N] [--peers pocketsphinx,whisper-tiny,...]
                                [--out benchmarks/] [--smoke]

Writes OUT/RESULTS.md (tables), OUT/results.json (every number) and OUT/*.png (plots, with
matplotlib), and prints the targets and accuracy tables. Peers need `bash scripts/install_peers.sh`;
a peer that is not installed is skipped and RESULTS.md says why. --smoke is the seconds-long
version the test suite runs (3 utterances per set, tiny durations, no peers).
"""
from __future__ import annotations

import argparse
import datetime
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

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from asr.audio import SAMPLE_RATE  # noqa: E402
from asr.decoding.decoder import Decoder  # noqa: E402
from asr.model.recognizer import Recognizer  # noqa: E402
from asr.pretrained import default_lm_path  # noqa: E402
from bench import ours, peers, quiet  # noqa: E402
from bench.attention import chunk_speed, describe, scaling  # noqa: E402
from bench.data import ROOT, SETS, Clip, EvalSet, load_set, write_wavs  # noqa: E402
from bench.plots import make_plots  # noqa: E402
from bench.report import accuracy_table, render, targets_table  # noqa: E402


STARTED = time.perf_counter()


def log(message: str) -> None:
    print(f"benchmark: [{time.perf_counter() - STARTED:6.0f} s] {message}", flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python scripts/benchmark.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="model file (.safetensors); default: the bundled model")
    p.add_argument("--manifest", type=Path, action="append",
                   help="evaluate this manifest instead of the default sets (repeatable)")
    p.add_argument("--lm", help="word LM for the beam-search rows (default: the bundled one, with the bundled model)")
    p.add_argument("--limit", type=int, help="utterances per set for our model (default: all)")
    p.add_argument("--peers", default=",".join(peers.PEERS), help="comma-separated peers, or 'none'")
    p.add_argument("--peer-limit", type=int, default=5, help="utterances per set each peer decodes in this run")
    p.add_argument("--rerun-limit", type=int, default=1, help="utterances per set for the re-run-every-chunk cost")
    p.add_argument("--peer-cache", type=Path, default=ROOT / "benchmarks" / "peers",
                   help="saved peer hypotheses, merged and reused for accuracy ('none' to disable)")
    p.add_argument("--endpoint-limit", type=int, default=30, help="utterances per set for end-of-speech delay")
    p.add_argument("--speed-seconds", type=float, default=60.0, help="audio for the thread-count RTF")
    p.add_argument("--memory-minutes", type=float, nargs="+", default=[1.0, 10.0, 60.0])
    p.add_argument("--scaling-minutes", type=float, nargs="+", default=[1.0, 2.0, 5.0, 10.0, 60.0])
    p.add_argument("--preset-seconds", type=float, default=30.0, help="audio per attention preset")
    p.add_argument("--chunk-ms", type=float, default=500.0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks")
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
    return args


def measure_set(recognizer: Recognizer, clips: list[Clip], chunk: int, endpoint_limit: int,
                beam: Decoder | None) -> tuple[dict, ours.StreamResult, ours.StreamResult, list[float], int]:
    """Our model on one set: offline (greedy, and beam with the word LM) and streaming accuracy,
    chunk compute, word and endpoint delays, the streaming ones with the default decoder (`beam`
    where there is a word LM, as asr.stream runs)."""
    greedy = Decoder(recognizer.tokenizer)
    offline = ours.run_offline(recognizer, greedy, clips)
    stream = ours.run_streaming(recognizer, greedy, clips, chunk)
    delays, not_fired = ours.endpoint_delays(recognizer, beam or greedy, clips[:endpoint_limit], chunk)
    row = {"utts": len(clips), "offline": ours.summary(offline), "streaming": ours.summary(stream.results, stream.chunk_ms),
           "chunk_ms": ours.percentiles(stream.chunk_ms), "word_delay_s": ours.percentiles(stream.word_delay_s),
           "endpoint_s": ours.endpoint_stats(delays, not_fired)}
    default = stream  # what asr.stream runs: the latency figures
    if beam:
        row["beam"] = ours.summary(ours.run_offline(recognizer, beam, clips))
        default = ours.run_streaming(recognizer, beam, clips, chunk)
        row["beam_streaming"] = ours.summary(default.results, default.chunk_ms)
        row["chunk_ms"], row["word_delay_s"] = ours.percentiles(default.chunk_ms), ours.percentiles(default.word_delay_s)
    return row, stream, default, delays, not_fired


def compare_peer(args: argparse.Namespace, run: peers.PeerRun, set_name: str, clips: list[Clip],
                 stream: ours.StreamResult) -> dict:
    """Score one peer on one set (this run's hypotheses plus saved ones) against ours on the same utterances."""
    live_rows = run.rows.get(set_name, {})
    cached = {}
    if args.peer_cache:
        path = peers.cache_path(args.peer_cache, run.peer, set_name)
        peers.save_cache(path, live_rows)
        cached = peers.load_cache(path)
    hyps = {**cached, **live_rows}
    by_name = {c.name: c for c in clips}
    ours_by_name = {r.audio: r for r in stream.results}
    names = [n for n in by_name if n in hyps]
    p = ours.summary([ours.scored(by_name[n], hyps[n]["hyp"], 0.0) for n in names])
    o = ours.summary([ours_by_name[n] for n in names])
    live = list(live_rows.values())
    chunk_ms = [t for r in live for t in r.get("chunk_ms", [])]
    rerun = [r for r in live if "rerun_ms" in r]
    live_audio = sum(r["duration"] for r in live)
    row = {"set": set_name, "peer": run.peer, "utts": len(names), "audio_s": p["audio_seconds"], "live_utts": len(live),
           "mode": "streaming, 500 ms chunks" if chunk_ms else "whole utterance",
           "peer_wer": p["wer"], "peer_cer": p["cer"], "ours_wer": o["wer"], "ours_cer": o["cer"],
           "rtf": sum(r["compute_s"] for r in live) / live_audio if live_audio else None,
           "chunk_ms": ours.percentiles(chunk_ms), "rerun_ms": ours.percentiles([t for r in rerun for t in r["rerun_ms"]]),
           "rerun_utts": len(rerun), "error": run.error}
    if rerun:
        row["rerun_rtf"] = sum(sum(r["rerun_ms"]) for r in rerun) / 1000 / sum(r["duration"] for r in rerun)
    return row


def run_peers(args: argparse.Namespace, prepared: list[tuple[str, list[Clip], Path, ours.StreamResult]],
              work: Path, status: dict[str, str]) -> list[dict]:
    """Each requested peer decodes the first --peer-limit utterances of every set in one worker process."""
    manifest = work / "peers.jsonl"
    with manifest.open("w") as f:
        for set_name, _, wavs, _ in prepared:
            for line in wavs.read_text().splitlines()[: args.peer_limit]:
                f.write(json.dumps({**json.loads(line), "set": set_name}) + "\n")
    comparisons = []
    for peer in args.peers:
        if status[peer] != "requested":
            continue
        log(f"peer {peer}")
        run = peers.run_peer(peer, manifest, work / f"{peer}.out.jsonl", args.rerun_limit)
        if run.error and not run.rows:
            status[peer] = f"skipped: {run.error}"
            continue
        status[peer] = "ran" + (f" (stopped early: {run.error})" if run.error else "")
        comparisons += [compare_peer(args, run, name, clips, stream) for name, clips, _, stream in prepared]
    return comparisons


def presets(recognizer: Recognizer, seconds: float) -> list[dict]:
    cfg, rows = recognizer.model.cfg, []
    for path in sorted((ROOT / "conf" / "attention").glob("*.yaml")):
        preset = OmegaConf.to_container(OmegaConf.load(path))
        if cfg.d_model % preset.get("n_heads", 4):  # heads for another width (Whisper's shapes)
            continue
        speed = chunk_speed(preset.get("window"), preset.get("n_heads", 4), seconds, base=cfg)
        rows.append({"preset": path.stem, "window": preset.get("window"), "heads": preset.get("n_heads", 4),
                     "n": 1, "median": speed["median_ms"], "p95": speed["p95_ms"], "max": speed["max_ms"],
                     "rtf": speed["rtf"], "is_default": (preset.get("window"), preset.get("n_heads")) == (cfg.window, cfg.n_heads)})
    return rows


def _body(markdown: str) -> str:
    """A report's text without its own top-level title (RESULTS.md gives it a numbered one)."""
    return markdown.split("\n", 1)[1].lstrip() if markdown.startswith("# ") else markdown


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


def targets(results: dict) -> list[dict]:
    lat, speed = results["latency"]["chunk_ms"], results["speed"]["threads"]
    rows = [{"metric": "streaming compute p95 per 500 ms chunk (model + decoder), 1 thread", "value": f"{lat['p95']:.1f} ms",
             "goal": "< 25 ms", "ok": lat["p95"] < 25 if lat["n"] else None}]
    final = results["latency"]["endpoint_s"]
    rows.append({"metric": "end of speech -> final, median", "value": f"{final['median']:.2f} s", "goal": "< 0.5 s",
                 "ok": final["median"] < 0.5 if final["n"] else None})
    rows.append({"metric": "end of speech -> final, p95", "value": f"{final['p95']:.2f} s", "goal": "< 0.8 s",
                 "ok": final["p95"] < 0.8 if final["n"] else None})
    for key, backend in (("serve", "torch"), ("serve_onnx", "onnx")):
        if key in results:
            n = results[key]["largest_n_p95_under_250ms"]
            rows.append({"metric": f"asr.serve real-time streams with p95 < 250 ms ({backend}, "
                                   f"{results[key]['workers']} workers)", "value": str(n), "goal": ">= 120",
                         "ok": n is not None and n >= 120})
    if "serve_ceiling" in results:  # the bound on the row above: perfect passes, nothing but recognition and sockets
        best = max(r["bound_streams_with_clients"] for r in results["serve_ceiling"]["recognition"])
        rows.append({"metric": "at most, if every pass were full and serving cost nothing more (8c, the clients on the "
                               "same cores)", "value": str(best), "goal": ">= 120", "ok": best >= 120})
    one = [r for r in speed if r["threads"] == 1]
    rows.append({"metric": "streaming RTF, 1 thread", "value": f"{one[0]['streaming_rtf']:.4f}" if one else "-",
                 "goal": "< 0.1", "ok": one[0]["streaming_rtf"] < 0.1 if one else None})
    mem = [r for r in results["memory"] if "vmhwm_mb" in r]
    if len(mem) >= 2:
        growth = mem[-1]["vmhwm_mb"] - mem[0]["vmhwm_mb"]
        rows.append({"metric": f"peak RSS growth {mem[0]['minutes']:g} -> {mem[-1]['minutes']:g} min of audio",
                     "value": f"{growth:+.1f} MB ({mem[0]['vmhwm_mb']:.0f} -> {mem[-1]['vmhwm_mb']:.0f} MB)",
                     "goal": "flat (< 5% and < 25 MB)", "ok": growth < min(25.0, 0.05 * mem[0]["vmhwm_mb"])})
    for s in results["sets"]:
        ps = [c for c in results["comparisons"] if c["set"] == s["name"] and c["peer"] == "pocketsphinx"]
        value = (f"{ps[0]['ours_wer'] * 100:.2f}% vs {ps[0]['peer_wer'] * 100:.2f}% ({ps[0]['utts']} utts)"
                 if ps and ps[0]["utts"] else "pocketsphinx not run")
        rows.append({"metric": f"streaming WER below pocketsphinx, {s['name']}", "value": value, "goal": "ours < pocketsphinx",
                     "ok": ps[0]["ours_wer"] < ps[0]["peer_wer"] if ps and ps[0]["utts"] else None})
    return rows


def score_saved_peers(folder: Path) -> int:
    """WER/CER of every saved peer hypothesis file (benchmarks/peers/<peer>/<set>.jsonl)."""
    print("| peer | set | utts | audio (min) | WER % | CER % |\n|---|---|---:|---:|---:|---:|")
    for path in sorted(folder.glob("*/*.jsonl")):
        rows = peers.load_cache(path).values()
        clips = [Clip(r["name"], r["ref"], np.zeros(round(r["duration"] * SAMPLE_RATE), np.float32)) for r in rows]
        s = ours.summary([ours.scored(c, r["hyp"], 0.0) for c, r in zip(clips, rows)])
        print(f"| {path.parent.name} | {path.stem} | {s['utts']} | {s['audio_seconds'] / 60:.1f} | "
              f"{s['wer'] * 100:.2f} | {s['cer'] * 100:.2f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.score_peers:
        return score_saved_peers(args.peer_cache)
    load = quiet.guard(args.allow_load, args.out)  # the committed figures: only on a quiet machine
    machine = quiet.machine()
    began = time.perf_counter()
    recognizer = Recognizer.load(args.model, threads=1)
    lm = args.lm or (default_lm_path() if not args.model else None)
    beam = Decoder.load(recognizer.tokenizer, lm) if lm and (args.lm or not args.smoke) else None
    chunk = round(args.chunk_ms * SAMPLE_RATE / 1000)
    args.out.mkdir(parents=True, exist_ok=True)
    if str(args.peer_cache) == "none":
        args.peer_cache = None
    status = {p: "not requested (--peers)" for p in peers.PEERS}
    status.update({p: f"skipped: {peers.installed()}" if peers.installed() else "requested" for p in args.peers})
    results: dict = {"sets": [], "skipped_sets": [], "comparisons": [], "peers": {"status": status}}
    chunk_all, words_all, endpoint_all, not_fired_all, speed_clips, prepared = [], [], [], 0, [], []
    with tempfile.TemporaryDirectory(prefix="asr-bench-") as tmp:
        work = Path(tmp)
        sets = [EvalSet(m.stem, m) for m in args.manifest] if args.manifest else SETS
        for eval_set in sets:
            clips, reason = load_set(eval_set, args.limit)
            if not clips:
                results["skipped_sets"].append({"name": eval_set.name, "reason": reason or "no utterances"})
                continue
            log(f"{eval_set.name}: {len(clips)} utterances")
            row, stream, default, delays, not_fired = measure_set(recognizer, clips, chunk, args.endpoint_limit, beam)
            results["sets"].append({"name": eval_set.name, "note": eval_set.note, **row})
            chunk_all += default.chunk_ms
            words_all += default.word_delay_s
            speed_clips = speed_clips or clips
            prepared.append((eval_set.name, clips, write_wavs(clips, work / eval_set.name), stream))
            endpoint_all += delays
            not_fired_all += not_fired
        if not results["sets"]:
            print("benchmark: error: no evaluation set found", file=sys.stderr)
            return 1
        results["comparisons"] = run_peers(args, prepared, work, status)
        selected, total = [], 0.0
        for clip in speed_clips:
            if total >= args.speed_seconds:
                break
            selected.append(clip)
            total += clip.seconds
        log("speed")
        threads = sorted({1, os.cpu_count() or 1, 2} & set(range(1, (os.cpu_count() or 1) + 1)))
        batch_manifest = write_wavs(selected, work / "batch")
        on_torch = recognizer if "onnx" not in recognizer.info else Recognizer.load(args.model, "torch")  # sets torch threads
        results["speed"] = {"clips": len(selected), "threads": ours.thread_rtf(on_torch, beam or Decoder(recognizer.tokenizer), selected, chunk, threads),
                            "batch": ours.batch_throughput(args.model, batch_manifest, total, len(selected), max(threads))}
    results["latency"] = {"chunk_ms": ours.percentiles(chunk_all), "word_delay_s": ours.percentiles(words_all),
                          "endpoint_s": ours.endpoint_stats(endpoint_all, not_fired_all), "chunk_ms_all": chunk_all, "word_delay_s_all": words_all}
    log("memory")
    results["memory"] = memory_runs(args)
    log("scaling")
    results["scaling"] = [{**asdict(m), "rtf": m.rtf} for m in scaling(args.scaling_minutes, cfg=recognizer.model.cfg)]
    log("attention presets")
    results["presets"] = presets(recognizer, args.preset_seconds)
    first = results["sets"][0]
    results["default_preset_wer"] = {"set": first["name"], "wer": first["streaming"]["wer"]}
    if not args.smoke:  # deployment, serving and load: each measured by its own script, OUT/<name>.md + .json
        from bench import (batched as batched_bench, ceiling as ceiling_bench, hotwords as hotwords_bench,
                           load as load_bench, onnx as onnx_bench, restorer as restorer_bench, serve as serve_bench)
        log("onnx: torch vs ONNX fp32 vs ONNX int8")
        results["onnx"] = onnx_bench.run(limit=args.limit, out=args.out)
        log("serve: concurrent real-time streams")
        serve_bench.main(["--out", str(args.out), "--server-args=--backend torch", "--allow-load"])
        results["serve"] = json.loads((args.out / "serve.json").read_text())
        log("serve: the same with --backend onnx")
        serve_bench.main(["--out", str(args.out), "--server-args=--backend onnx", "--name", "serve_onnx", "--allow-load"])
        results["serve_onnx"] = json.loads((args.out / "serve_onnx.json").read_text())
        log("serve: the onnx server's streams with two uploads running beside them")
        serve_bench.main(["--out", str(args.out), "--server-args=--backend onnx", "--uploads", "2", "--name",
                          "serve_uploads", "--allow-load"])
        log("serve: the most streams the cores could carry")
        ceiling_bench.main(["--out", str(args.out), "--allow-load"])
        results["serve_ceiling"] = json.loads((args.out / "serve_ceiling.json").read_text())
        log("transcription under CPU load")
        load_bench.main(["--out", str(args.out), "--allow-load"])
        results["load"] = json.loads((args.out / "load.json").read_text())
        log("restorer: casing and punctuation of held-out sentences")
        held = ROOT / "data" / "restorer" / "held.txt"
        if not held.exists():
            subprocess.run([sys.executable, str(ROOT / "recipes" / "restorer" / "prepare.py")], check=True)
        restorer_bench.main(["--text", str(held), "--out", str(args.out), "--allow-load"])
        log("hotwords: recall of listed names, and what a list costs on dev")
        hotwords_bench.main(["--out", str(args.out), "--allow-load"])
        log("batched transcription against the per-file path")
        batched_bench.main(["--out", str(args.out), "--allow-load"])  # the load was checked above
        results["batched"] = json.loads((args.out / "batched.json").read_text())
        results["sections"] = [(title, _body((args.out / f"{name}.md").read_text())) for title, name in
                               (("7. Torch, ONNX fp32 and ONNX int8", "onnx"), ("8. The streaming server", "serve"),
                                ("8b. The streaming server on the onnx backend", "serve_onnx"),
                                ("8c. The most streams the cores could carry", "serve_ceiling"),
                                ("8d. The streaming server with two uploads running beside it", "serve_uploads"),
                                ("9. Transcription under CPU load", "load"), ("10. Casing and punctuation", "restorer"),
                                ("11. Hotwords", "hotwords"), ("12. Batched transcription", "batched"))]
        if (args.out / "lm.md").is_file():  # scripts/bench/lm.py's, run on its own (it compares two LMs)
            results["sections"].append(("13. What the word LM costs", _body((args.out / "lm.md").read_text())))
    results["targets"] = targets(results)
    results["meta"] = {"command": "python scripts/benchmark.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
                       "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
                       "machine": machine, "load_at_start": load,
                       "torch": torch.__version__, "model": args.model or "bundled default",
                       "backend": "onnx" if "onnx" in recognizer.info else "torch", "lm": (args.lm or "bundled default") if beam else None,
                       "untrained": bool(recognizer.info.get("untrained")), "limit": args.limit, "smoke": args.smoke,
                       "chunk_ms": args.chunk_ms, "peer_limit": args.peer_limit, "rerun_limit": args.rerun_limit,
                       "endpoint_limit": args.endpoint_limit, "preset_seconds": args.preset_seconds,
                       "d_model": recognizer.model.cfg.d_model, "n_layers": recognizer.model.cfg.n_layers,
                       "architecture": describe(recognizer.model.cfg),
                       "set_notes": [f"{s.name} ({s.note or s.manifest})" for s in sets], "elapsed_min": (time.perf_counter() - began) / 60}
    plots, note = make_plots(results, args.out)
    (args.out / "RESULTS.md").write_text(render(results, plots, note))
    slim = {k: v for k, v in results.items() if k != "latency"} | {"latency": {k: v for k, v in results["latency"].items()
                                                                                if not k.endswith("_all")}}
    (args.out / "results.json").write_text(json.dumps(slim, indent=1) + "\n")
    print(targets_table(results) + "\n\n" + accuracy_table(results))
    log(f"wrote {args.out / 'RESULTS.md'} ({len(plots)} plots) in {results['meta']['elapsed_min']:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
