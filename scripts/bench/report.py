"""RESULTS.md from the benchmark's results dictionary: the targets, then a numbered section per measurement."""
from __future__ import annotations

from bench.attention import Measurement, table as scaling_table
from bench.peers import LABELS


def _pct(x: float) -> str:
    return f"{x * 100:.2f}"


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _stats(p: dict | None, spec: str) -> str:
    """'median / p95 / max' of a percentiles dict, '-' when there is none."""
    if not p or not p.get("n"):
        return "-"
    return " / ".join(format(p[k], spec) for k in ("median", "p95", "max"))


def targets(results: dict) -> list[dict]:
    """The project's targets, each with what this run measured (rows for what it did not measure are left out)."""
    rows = []
    if "latency" in results:
        lat, final = results["latency"]["chunk_ms"], results["latency"]["endpoint_s"]
        rows.append({"metric": "streaming compute p95 per 500 ms chunk (the default decoding, as asr.stream runs it), "
                               "1 thread", "value": f"{lat['p95']:.1f} ms", "goal": "< 25 ms",
                     "ok": lat["p95"] < 25 if lat["n"] else None})
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
    one = [r for r in results.get("speed", {}).get("threads", []) if r["threads"] == 1]
    if one:
        rows.append({"metric": "streaming RTF, 1 thread", "value": f"{one[0]['streaming_rtf']:.4f}", "goal": "< 0.1",
                     "ok": one[0]["streaming_rtf"] < 0.1})
    mem = [r for r in results.get("memory", []) if "vmhwm_mb" in r]
    if len(mem) >= 2:
        growth = mem[-1]["vmhwm_mb"] - mem[0]["vmhwm_mb"]
        rows.append({"metric": f"peak RSS growth {mem[0]['minutes']:g} -> {mem[-1]['minutes']:g} min of audio",
                     "value": f"{growth:+.1f} MB ({mem[0]['vmhwm_mb']:.0f} -> {mem[-1]['vmhwm_mb']:.0f} MB)",
                     "goal": "flat (< 5% and < 25 MB)", "ok": growth < min(25.0, 0.05 * mem[0]["vmhwm_mb"])})
    return rows


def targets_table(results: dict) -> str:
    lines = ["| target | measured | goal | met |", "|---|---|---|---|"]
    for t in results["targets"]:
        met = "n/a" if t["ok"] is None else ("yes" if t["ok"] else "NO")
        lines.append(f"| {t['metric']} | {t['value']} | {t['goal']} | {met} |")
    return "\n".join(lines)


def accuracy_table(results: dict) -> str:
    """Our rows per set (asr.evaluate's figures), then each peer and ours (the default) on the utterances it decoded."""
    lines = ["| set | utts | audio (min) | system | decoding | WER % | CER % | RTF (1 thread) |",
             "|---|---:|---:|---|---|---:|---:|---:|"]
    for s in results["sets"]:
        for key, m in s["rows"].items():
            what = f"{results['meta']['decoding']}: {m['what']}" if key == "default" else m["what"]
            lines.append(f"| {s['name']} | {m['utts']} | {m['audio_seconds'] / 60:.1f} | ours | {what} | "
                         f"{_pct(m['wer'])} | {_pct(m['cer'])} | {m['rtf']:.4f} |")
    for c in results["comparisons"]:
        lines.append(f"| {c['set']} | {c['utts']} | {c['audio_s'] / 60:.1f} | {c['peer']} | {c['mode']} | "
                     f"{_pct(c['peer_wer'])} | {_pct(c['peer_cer'])} | {_fmt(c.get('rtf'), '.4f')} |")
        lines.append(f"| {c['set']} | {c['utts']} | {c['audio_s'] / 60:.1f} | ours, same utterances | the default | "
                     f"{_pct(c['ours_wer'])} | {_pct(c['ours_cer'])} | |")
    return "\n".join(lines)


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
            acc = f"WER {wer['wer'] * 100:.2f}% on {wer['set']} (the benchmarked model, the default decoding)"
        window = "full" if r["window"] is None else r["window"]
        lines.append(f"| {r['preset']} | {window} | {r['heads']} | {_stats(r, '.1f')} | {r['rtf']:.4f} | {acc} |")
    return "\n".join(lines)


def header(results: dict) -> list[str]:
    """The title and how, when, where and on which model the figures were measured."""
    meta = results["meta"]
    model = meta["model"]
    named = (f"`{model['file']}`" + (" (the shipped default)" if model["shipped"] else "")
             + (f", sha256 `{model['sha256']}`" if model["sha256"] else ""))
    out = ["# Benchmark results\n",
           f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}, 1-minute load "
           f"{meta['load_at_start']} at the start, {meta['elapsed_min']:.1f} min).",
           f"Model: {named}" + (" — **untrained (random weights): accuracy numbers are meaningless**"
                                if meta["untrained"] else "") + ".",
           f"Sets: {', '.join(meta['set_notes'])}. Limit: {meta['limit'] or 'all'} utterances per set. Our model runs "
           f"on the {meta['backend']} backend, 1 thread, with the tools' default decoding ({meta['decoding']}"
           + (f", word LM `{meta['lm']}`" if meta.get("lm") else "") + ") unless a row says otherwise.\n"]
    if meta["smoke"]:
        out.append("**Smoke run** (tiny sizes for the test suite): the numbers only show that every part runs.\n")
    if meta["accuracy_only"]:
        out.append("**Accuracy only** (`--accuracy-only`): latency, speed, memory and the other sections were not "
                   "measured.\n")
    out += [f"- set {s['name']}: {s['reason']}" for s in results["skipped_sets"]]
    return out


def render(results: dict, plots: list[str], plot_note: str) -> str:
    """The whole RESULTS.md."""
    meta = results["meta"]
    out = header(results) + ["## Targets\n", targets_table(results), "",
           "## 1. Accuracy\n",
           "Each of our rows is `python -m asr.evaluate MANIFEST` with the flags it names, through asr.evaluate's own "
           "code (`scripts/bench/accuracy.py`): the text `asr.transcribe` prints (cut where the endpointer ends "
           "segments, the second pass, cased and written), or with `--streaming` the text `asr.stream` gives in "
           f"{meta['chunk_ms']:g} ms chunks; then `asr.text.normalize` on both sides and `asr.corpus.scoring.score`. "
           f"The streaming row covers the first {meta.get('streaming_limit')} utterances of each set "
           "(`--streaming-limit`; its chunks are section 3's chunk compute). "
           "RTF is the row's wall time over its audio, one process, one thread. Peer rows cover the utterances that "
           "peer has decoded (this run's first utterances plus earlier runs' saved hypotheses in "
           "`benchmarks/peers/`), each followed by our default on exactly those utterances.\n",
           accuracy_table(results), ""]
    out += ["## 2. Peers\n"] + [f"- {LABELS.get(peer, peer)}: {status}" for peer, status in
                                 results["peers"]["status"].items()]
    if results["comparisons"]:
        out += ["", f"In this run each peer decoded the first {meta['peer_limit']} utterances of each set "
                f"(`--peer-limit`); the re-run cost was measured on the first {meta['rerun_limit']} "
                "(`--rerun-limit`). Peers run in `.venv-peers` (`bash scripts/install_peers.sh`), each as a subprocess "
                "pinned to one CPU, on the same 16 kHz samples as ours. Whisper cannot stream: its cost of re-decoding "
                "all audio so far after every 500 ms chunk is measured on the first utterances (re-run RTF = total "
                "re-decode time / audio time).\n", peer_cost_table(results), ""]
    else:
        out += ["", "No peer ran in this run (`--peers`; `bash scripts/install_peers.sh` installs them).", ""]
    if "latency" in results:
        out += latency_section(results)
    for title, text in results.get("sections", []):
        out += [f"## {title}\n", text]
    if plots or plot_note:
        out += ["## Plots\n"] + ([f"![{p}]({p})" for p in plots] or [plot_note]) + [""]
    return "\n".join(out)


def latency_section(results: dict) -> list[str]:
    """Sections 3 to 6: streaming latency, speed, memory, scaling and the attention presets."""
    meta = results["meta"]
    out = ["## 3. Streaming latency\n",
           "Chunk compute: the wall time of each whole 500 ms chunk of the streaming row (`asr.evaluate --streaming`: "
           "the model's step, endpointing, the search, its partial, and at an endpoint the final with its second "
           "pass), 1 thread. Word end -> shown: from the end of a word in the audio (its last unit's frame, from the "
           "search's word times) until the end of the chunk whose step emitted it plus that chunk's compute, i.e. "
           "buffering + compute as a live microphone would see it (the model's own emission lag behind the true "
           "acoustic end is not included: there is no reference alignment). End of speech -> final: each utterance "
           f"is followed by {results['latency']['endpoint_s'].get('pad_s', 0):g} s of faint noise and streamed "
           "through the emission loop with the tools' endpointing and decoding (`asr.decoding.endpoint.emissions`); "
           "the delay runs from the last word's end to the final being ready. Both delays on the first "
           f"{meta['endpoint_limit']} utterances per set.\n",
           latency_table(results), "",
           "## 4. Speed\n", f"Streaming and whole-utterance decoding (the default decoder's first pass) of "
           f"{results['speed']['clips']} utterances of the first set on the torch backend (`--backend torch`), per "
           "torch thread count:\n", speed_table(results), ""]
    batch = results["speed"]["batch"]
    if "error" in batch:
        out.append(f"Batch transcription failed: {batch['error']}\n")
    else:
        out.append(f"Batch file transcription (`python -m asr.transcribe MANIFEST`, fresh process, model load "
                   f"included, OMP_NUM_THREADS={batch['threads']}): {batch['files']} files, {batch['audio_s']:.0f} s "
                   f"of audio in {batch['wall_s']:.1f} s = {batch['files_per_s']:.2f} files/s, "
                   f"{batch['audio_s_per_s']:.1f} s of audio per second.\n")
    out += ["## 5. Memory\n",
            "Each length streams in a fresh process (`scripts/bench/memory.py`): real dev utterances looped "
            "(generated on the fly), 500 ms chunks through the emission loop with the default decoding, 1 thread, the "
            "default backend. Peak RSS is the process's own VmHWM (its ru_maxrss would be the benchmark's, which "
            "Linux carries across exec); what matters is that it does not grow with the length of the stream.\n",
            memory_table(results), "",
            "## 6. Scaling\n",
            f"Encoder alone, the benchmarked model's architecture ({meta['architecture']}), random weights and "
            "features, 1 thread, each point in a fresh process (`python scripts/bench/attention.py`). Sliding "
            "window: `Encoder.stream` in 500 ms chunks; full causal attention: `Encoder.forward` on the whole "
            "input (dense T x T masks), run only while its estimated size stays under the limit.\n",
            scaling_table([Measurement(**{k: v for k, v in r.items() if k != "rtf"}) for r in results["scaling"]]),
            "",
            f"Attention presets (`conf/attention/*.yaml`) at the benchmarked model's width and depth (d_model "
            f"{meta['d_model']}, {meta['n_layers']} layers), random weights, {meta['preset_seconds']:g} s streamed "
            "in 500 ms chunks. Accuracy per preset would need a model trained per preset, which we do not have: only "
            "the benchmarked (default) model's accuracy is shown.\n",
            presets_table(results), ""]
    return out
