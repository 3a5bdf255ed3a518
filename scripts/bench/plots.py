"""PNG plots of the benchmark results (matplotlib; skipped with a note when it is not installed)."""
from __future__ import annotations

from pathlib import Path


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def make_plots(results: dict, out: Path) -> tuple[list[str], str]:
    """Write every plot the results allow; returns (file names, note)."""
    plt = _pyplot()
    if plt is None:
        return [], "plots skipped: matplotlib is not installed in this environment"
    made = []
    for name, draw in (("accuracy.png", _accuracy), ("latency.png", _latency), ("memory.png", _memory),
                       ("scaling.png", _scaling), ("presets.png", _presets)):
        fig = draw(plt, results)
        if fig is not None:
            fig.tight_layout()
            fig.savefig(out / name, dpi=100)
            plt.close(fig)
            made.append(name)
    return made, ""


def _accuracy(plt, results: dict):
    """WER per set: ours (the default decoding, whole set) and each peer (on the utterances it decoded)."""
    sets = [s["name"] for s in results.get("sets", [])]
    if not sets:
        return None
    systems = {"ours (the default decoding)": {s["name"]: s["rows"]["default"]["wer"] * 100 for s in results["sets"]}}
    for r in results.get("comparisons", []):
        systems.setdefault(r["peer"], {})[r["set"]] = r["peer_wer"] * 100
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(systems)
    for j, (system, wers) in enumerate(systems.items()):
        points = [(i + j * width, wers[name]) for i, name in enumerate(sets) if name in wers]
        ax.bar([x for x, _ in points], [y for _, y in points], width, label=system)
    ax.set_xticks([i + width * (len(systems) - 1) / 2 for i in range(len(sets))], sets)
    ax.set_ylabel("WER (%)")
    ax.set_title("Word error rate (peers on the utterances they decoded; see RESULTS.md)", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def _latency(plt, results: dict):
    chunk = results.get("latency", {}).get("chunk_ms_all", [])
    words = results.get("latency", {}).get("word_delay_s_all", [])
    if not chunk:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.hist(chunk, bins=50)
    left.axvline(50, color="red", linestyle="--", label="50 ms target (p95)")
    left.set_xlabel("compute per 500 ms chunk (ms, 1 thread)")
    left.set_ylabel("chunks")
    left.legend()
    if words:
        right.hist(words, bins=50)
    right.set_xlabel("word end in audio -> word shown (s)")
    right.set_ylabel("words")
    return fig


def _memory(plt, results: dict):
    runs = [r for r in results.get("memory", []) if "vmhwm_mb" in r]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in runs:
        xs = [0.0] + [s["minutes"] for s in r["rss_samples"]]
        ys = [r["start_rss_mb"]] + [s["rss_mb"] for s in r["rss_samples"]]
        ax.plot(xs, ys, marker=".", label=f"{r['minutes']:g} min stream (peak {r['vmhwm_mb']:.0f} MB)")
    ax.set_xlabel("audio streamed (minutes)")
    ax.set_ylabel("RSS (MB)")
    ax.set_ylim(0, 1.2 * max(r["vmhwm_mb"] for r in runs))
    ax.set_title("Memory while streaming (each run in a fresh process)")
    ax.legend(fontsize=8)
    return fig


def _scaling(plt, results: dict):
    rows = [r for r in results.get("scaling", []) if r.get("seconds") is not None]
    if not rows:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for mode in sorted({r["mode"] for r in rows}):
        mine = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["minutes"])
        left.plot([r["minutes"] for r in mine], [r["seconds"] for r in mine], marker="o", label=mode)
        right.plot([r["minutes"] for r in mine], [max(r["peak_mb"], 1) for r in mine], marker="o", label=mode)
    for ax, label in ((left, "encoder time (s)"), (right, "peak memory growth (MB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("audio (minutes)")
        ax.set_ylabel(label)
        ax.legend()
    left.set_title("Sliding window vs full causal attention")
    return fig


def _presets(plt, results: dict):
    rows = results.get("presets", [])
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [r["preset"] for r in rows]
    ax.bar(names, [r["p95"] for r in rows], color="tab:orange", label="p95")
    ax.bar(names, [r["median"] for r in rows], color="tab:blue", label="median")
    ax.set_ylabel("encoder compute per 500 ms chunk (ms)")
    ax.set_title("Encoder speed per attention preset (random weights, the benchmarked model's width/depth)",
                 fontsize=9)
    wer = results.get("default_preset_wer")
    if wer:
        ax.annotate(f"trained default: streaming WER {wer['wer'] * 100:.1f}% ({wer['set']})",
                    xy=(0.01, 0.95), xycoords="axes fraction", fontsize=8, va="top")
    ax.legend()
    return fig
