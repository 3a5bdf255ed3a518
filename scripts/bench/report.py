"""RESULTS.md from the benchmark's results dictionary."""
from __future__ import annotations

from bench.attention import Measurement, table as scaling_table
from bench.peers import LABELS


def _pct(x: float) -> str:
    return f"{x * 100:.2f}"


def targets_table(results: dict) -> str:
    lines = ["| target | measured | goal | met |", "|---|---|---|---|"]
    for t in results["targets"]:
        met = "n/a" if t["ok"] is None else ("yes" if t["ok"] else "NO")
        lines.append(f"| {t['metric']} | {t['value']} | {t['goal']} | {met} |")
    return "\n".join(lines)


def accuracy_table(results: dict) -> str:
    lines = ["| set | utts | audio (min) | system | mode | WER % | CER % | RTF (1 thread) |",
             "|---|---:|---:|---|---|---:|---:|---:|"]
    for s in results["sets"]:
        labels = {"offline": "greedy, whole utterance", "streaming": f"greedy, {results['meta']['chunk_ms']:g} ms chunks",
                  "beam": "beam + word LM, whole utterance"}
        for mode, label in labels.items():
            if mode not in s:
                continue
            m = s[mode]
            lines.append(f"| {s['name']} | {m['utts']} | {m['audio_seconds'] / 60:.1f} | ours | {label} | "
                         f"{_pct(m['wer'])} | {_pct(m['cer'])} | {m['rtf']:.4f} |")
    for c in results["comparisons"]:
        lines.append(f"| {c['set']} | {c['utts']} | {c['audio_s'] / 60:.1f} | {c['peer']} | {c['mode']} | "
                     f"{_pct(c['peer_wer'])} | {_pct(c['peer_cer'])} | {_fmt(c.get('rtf'), '.4f')} |")
        lines.append(f"| {c['set']} | {c['utts']} | {c['audio_s'] / 60:.1f} | ours, same utterances | streaming | "
                     f"{_pct(c['ours_wer'])} | {_pct(c['ours_cer'])} | |")
    return "\n".join(lines)


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _stats(p: dict | None, spec: str) -> str:
    """'median / p95 / max' of a percentiles dict, '-' when there is none."""
    if not p or not p.get("n"):
        return "-"
    return " / ".join(format(p[k], spec) for k in ("median", "p95", "max"))


def latency_table(results: dict) -> str:
    lines = ["| set | chunk compute median / p95 / max (ms) | word end -> shown median / p95 / max (s) | "
             "end of speech -> final median / p95 / max (s) | endpointed / not |", "|---|---|---|---|---|"]
    rows = [(s["name"], s["chunk_ms"], s["word_delay_s"], s["endpoint_s"]) for s in results["sets"]]
    lat = results["latency"]
    rows.append(("all", lat["chunk_ms"], lat["word_delay_s"], lat["endpoint_s"]))
    for name, c, w, e in rows:
        lines.append(f"| {name} | {_stats(c, '.1f')} | {_stats(w, '.2f')} | {_stats(e, '.2f')} | "
                     f"{e['n']} / {e['not_endpointed']} |")
    return "\n".join(lines)


def peer_cost_table(results: dict) -> str:
    lines = ["| set | peer | live utts | RTF | per-chunk compute median / p95 / max (ms) | "
             "re-run on all audio so far, per update median / p95 / max (ms) | re-run RTF (utts) |",
             "|---|---|---:|---:|---|---|---|"]
    for c in results["comparisons"]:
        rerun = f"{c['rerun_rtf']:.3f} ({c['rerun_utts']})" if c.get("rerun_utts") else "-"
        lines.append(f"| {c['set']} | {c['peer']} | {c['live_utts']} | {_fmt(c.get('rtf'), '.4f')} | "
                     f"{_stats(c.get('chunk_ms'), '.1f')} | {_stats(c.get('rerun_ms'), '.1f')} | {rerun} |")
    return "\n".join(lines)


def speed_table(results: dict) -> str:
    lines = ["| torch threads | audio (s) | streaming RTF (500 ms chunks) | offline RTF (whole utterance) |",
             "|---:|---:|---:|---:|"]
    for r in results["speed"]["threads"]:
        lines.append(f"| {r['threads']} | {r['audio_s']:.0f} | {r['streaming_rtf']:.4f} | {r['offline_rtf']:.4f} |")
    return "\n".join(lines)


def memory_table(results: dict) -> str:
    lines = ["| audio streamed (min) | RSS after load (MB) | peak RSS VmHWM (MB) | RSS at end (MB) | "
             "RTF | chunk p95 first / last 10% (ms) |", "|---:|---:|---:|---:|---:|---|"]
    for r in results["memory"]:
        if "error" in r:
            lines.append(f"| {r['minutes']:g} | failed: {r['error']} | | | | |")
            continue
        end = r["rss_samples"][-1]["rss_mb"] if r["rss_samples"] else r["start_rss_mb"]
        lines.append(f"| {r['minutes']:g} | {r['start_rss_mb']:.0f} | {r['vmhwm_mb']:.0f} | "
                     f"{end:.0f} | {r['rtf']:.4f} | {r['chunk_ms_first_10pct']['p95']:.1f} / "
                     f"{r['chunk_ms_last_10pct']['p95']:.1f} |")
    return "\n".join(lines)


def presets_table(results: dict) -> str:
    lines = ["| preset | window (frames of 40 ms) | heads | chunk compute median / p95 / max (ms) | RTF | accuracy |",
             "|---|---:|---:|---|---:|---|"]
    wer = results.get("default_preset_wer")
    for r in results["presets"]:
        acc = "not trained"
        if r.get("is_default") and wer:
            acc = f"streaming WER {wer['wer'] * 100:.2f}% on {wer['set']} (the benchmarked model)"
        window = "full" if r["window"] is None else r["window"]
        lines.append(f"| {r['preset']} | {window} | {r['heads']} | {_stats(r, '.1f')} | {r['rtf']:.4f} | {acc} |")
    return "\n".join(lines)


def render(results: dict, plots: list[str], plot_note: str) -> str:
    """The whole RESULTS.md."""
    meta = results["meta"]
    out = ["# Benchmark results\n",
           f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}, "
           f"torch {meta['torch']}, "
           f"{meta['elapsed_min']:.1f} min). Model: `{meta['model']}`" + (" — **untrained (random weights): "
           "accuracy numbers are meaningless**" if meta["untrained"] else "") + ".",
           f"Sets: {', '.join(meta['set_notes'])}. Limit: {meta['limit'] or 'all'} utterances per set. "
           f"Streaming uses {meta['chunk_ms']:g} ms chunks; our model runs on the {meta.get('backend', 'torch')} "
           "backend (the default for the model), 1 thread, unless stated."
           + (f" Beam rows: lexicon beam search with the word LM ({meta['lm']})." if meta.get("lm") else "") + "\n"]
    if meta["smoke"]:
        out.append("**Smoke run** (tiny sizes for the test suite): the numbers only show that every part runs.\n")
    for s in results["skipped_sets"]:
        out.append(f"- set {s['name']}: {s['reason']}")
    out += ["## Targets\n", targets_table(results), "",
            "## 1. Accuracy\n",
            "WER/CER after `asr.text.normalize` on both sides, scored with `asr.corpus.scoring.score`. Peer rows cover "
            "the utterances that peer has decoded (this run's first utterances plus earlier runs' saved "
            "hypotheses in `benchmarks/peers/`); each is followed by ours on exactly those utterances.\n",
            accuracy_table(results), "",
            "## 2. Streaming latency\n",
            "Chunk compute: wall time of one 500 ms chunk, 1 thread: the model's `Recognizer.step` plus the "
            "decoder's work for it (feeding the search and reading the partial), with the default decoding "
            "(the word-LM search where there is an LM). Word end -> shown: "
            "from the end of a word in the audio (its last token's frame, from the model's word times) until the "
            "end of the chunk that emitted it plus that chunk's compute, i.e. buffering + compute delay as a live "
            "microphone would see it (the model's own emission lag behind the true acoustic end is not "
            "included: there is no reference alignment). End of speech -> final: each utterance is followed by "
            f"{results['latency']['endpoint_s'].get('pad_s', 0):g} s of faint noise and streamed through the "
            "emission loop with endpointing (`asr.decoding.endpoint`); delay from the last word's end to the final "
            f"emission being ready (first {meta['endpoint_limit']} utterances per set)"
            + (", its beam search with the word LM included (the default finals)" if meta.get("lm") else
               ", greedy finals") + ".\n",
            latency_table(results), "",
            "## 3. Speed\n", f"Streaming and whole-utterance decoding of {results['speed']['clips']} utterances "
            "of the first set on the torch backend (`--backend torch`), per torch thread count:\n",
            speed_table(results), ""]
    batch = results["speed"]["batch"]
    if "error" in batch:
        out.append(f"Batch transcription failed: {batch['error']}\n")
    else:
        out.append(f"Batch file transcription (`python -m asr.transcribe MANIFEST`, fresh process, model load "
                   f"included, OMP_NUM_THREADS={batch['threads']}): {batch['files']} files, {batch['audio_s']:.0f} s "
                   f"of audio in {batch['wall_s']:.1f} s = {batch['files_per_s']:.2f} files/s, "
                   f"{batch['audio_s_per_s']:.1f} s of audio per second.\n")
    out += ["## 4. Memory\n",
            "Each length streams in a fresh process: real dev utterances looped (generated on the fly), 500 ms "
            "chunks through the emission loop (`Recognizer.step` + endpointing), 1 thread, the default backend. "
            "Peak RSS is the process's own VmHWM (its ru_maxrss would be the benchmark's, which Linux carries across "
            "exec); what matters is that it does not grow with the length of the stream.\n",
            memory_table(results), "",
            "## 5. Scaling\n",
            f"Encoder alone, the benchmarked model's architecture ({meta['architecture']}), random weights and "
            "features, 1 thread, each "
            "point in a fresh process (`python scripts/bench/attention.py`). Sliding "
            "window: `Encoder.stream` in 500 ms chunks; full causal attention: `Encoder.forward` on the whole "
            "input (dense T x T masks), run only while its estimated size stays under the limit.\n",
            scaling_table([Measurement(**{k: v for k, v in r.items() if k != "rtf"}) for r in results["scaling"]]),
            "",
            f"Attention presets (`conf/attention/*.yaml`) at the benchmarked model's width and depth (d_model "
            f"{meta['d_model']}, {meta['n_layers']} layers), random weights, "
            f"{meta['preset_seconds']:g} s streamed in 500 ms chunks. Accuracy per preset would need a model "
            "trained per preset, which we do not have: only the benchmarked (default) model's accuracy is shown.\n",
            presets_table(results), "",
            "## 6. Peers\n"]
    for peer, status in results["peers"]["status"].items():
        out.append(f"- {LABELS.get(peer, peer)}: {status}")
    out += ["", f"Subsets: in this run each peer decoded the first {meta['peer_limit']} utterances of each set "
            f"(`--peer-limit`), and the re-run cost was measured on the first {meta['rerun_limit']} (`--rerun-limit`); "
            "the accuracy rows add the hypotheses saved by earlier, longer runs in `benchmarks/peers/` (the `utts` "
            "column says how many utterances each comparison covers). PocketSphinx's 8 kHz FSDD input is "
            "upsampled to 16 kHz like ours (its bundled model is wideband only).\n",
            "Peers run in `.venv-peers` (`bash scripts/install_peers.sh`), each as a subprocess pinned to one "
            "CPU, on the same 16 kHz samples as ours. PocketSphinx streams (500 ms chunks to `process_raw`, a "
            "partial hypothesis after each). Whisper and Moonshine cannot stream: their cost of re-decoding all "
            "audio so far after every 500 ms chunk is measured on the first utterances (re-run RTF = total "
            "re-decode time / audio time).\n", peer_cost_table(results), ""]
    for title, text in results.get("sections", []):
        out += [f"## {title}\n", text]
    out += ["## Plots\n"] + ([f"![{p}]({p})" for p in plots] or [plot_note]) + [""]
    return "\n".join(out)
