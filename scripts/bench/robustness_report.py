"""The robustness benchmark's figures from its scored items: per set and condition each system's WER and its ratio
to the same system's clean WER on the same set, the mean ratio over the degraded conditions, and the words each
system invents in noise alone (per minute); then the Markdown page and the plot of the ratios."""
from __future__ import annotations

from pathlib import Path

from asr.corpus.evaluation import summarize
from asr.corpus.scoring import UttResult

from bench.conditions import BY_NAME, CLEAN
from bench.rendered import NOISE_SET, Item

Scored = dict[str, dict[tuple[str, str], UttResult]]  # system -> (set, item key) -> its scored hypothesis


def ratio(wer: float, clean: float | None) -> float | None:
    """`wer` over the clean WER (None where there is no clean WER or it is 0)."""
    return wer / clean if clean else None


def _speech(items: list[Item], scored: Scored) -> dict:
    sets: dict[str, dict] = {}
    for item in items:
        entry = sets.setdefault(item.set, {"utterances": 0, "conditions": {}})
        entry["conditions"].setdefault(item.condition, {"label": BY_NAME[item.condition].label, "items": []})
        entry["conditions"][item.condition]["items"].append(item)
    for entry in sets.values():
        entry["utterances"] = len(entry["conditions"][CLEAN.name]["items"])
        for condition in entry["conditions"].values():
            its = condition.pop("items")
            condition["systems"] = {}
            for system, results in scored.items():
                mine = [results[it.set, it.key] for it in its if (it.set, it.key) in results]
                if mine:
                    s = summarize(mine, [])
                    condition["systems"][system] = {"wer": s["wer"], "utts": s["utts"], "ref_words": s["ref_words"],
                                                    "errors": s["substitutions"] + s["deletions"] + s["insertions"]}
        for system in scored:
            clean = entry["conditions"][CLEAN.name]["systems"].get(system, {}).get("wer")
            ratios = []
            for name, condition in entry["conditions"].items():
                if system in condition["systems"]:
                    condition["systems"][system]["ratio"] = r = ratio(condition["systems"][system]["wer"], clean)
                    if name != CLEAN.name and r is not None:
                        ratios.append(r)
            entry.setdefault("mean_ratio", {})[system] = sum(ratios) / len(ratios) if ratios else None
    return sets


def _noise(items: list[Item], scored: Scored, labels: dict[str, str]) -> dict:
    out: dict[str, dict] = {"items": {}, "total": {}}
    for item in items:
        row = {"label": labels.get(item.name, item.name), "seconds": item.seconds, "source": item.drawn,
               "systems": {}}
        for system, results in scored.items():
            if (item.set, item.key) in results:
                result = results[item.set, item.key]
                row["systems"][system] = {"words": result.words.ins, "text": result.hyp,
                                          "words_per_minute": result.words.ins / item.seconds * 60}
        out["items"][item.name] = row
    for system in scored:
        heard = [row for row in out["items"].values() if system in row["systems"]]
        words, seconds = sum(r["systems"][system]["words"] for r in heard), sum(r["seconds"] for r in heard)
        out["total"][system] = {"words": words, "seconds": seconds,
                                "words_per_minute": words / seconds * 60 if seconds else None}
    return out


def figures(items: list[Item], scored: Scored, noise_labels: dict[str, str]) -> dict:
    """{"sets": per set its utterances, conditions (label, per system wer, ratio, utts...) and mean_ratio,
    "noise_alone": per item and in total the words each system emitted}."""
    speech = [it for it in items if it.set != NOISE_SET]
    noise = [it for it in items if it.set == NOISE_SET]
    return {"sets": _speech(speech, scored), "noise_alone": _noise(noise, scored, noise_labels)}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.2f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(record: dict) -> list[str]:
    """The page: how it was measured, a table per set, the noise-alone table."""
    systems = record["systems"]
    lines = ["# Robustness: the same speech through codecs, phones, microphones, levels, rooms, noise and talkers", "",
             f"Measured {record['date']} on {record['machine']} (1-minute load {record['load']} at the start) with "
             f"`{record['command']}`.", "",
             f"Model: {record['model']}; decoding: {record['decoding']}.", "",
             "Every system heard the same rendered audio; rooms, microphones and noise come from the test side of "
             f"`{record['noise_root']}` only (`asr.training.acoustic.channel.pools(..., \"test\")`). WER is scored "
             "with `asr.evaluate`'s scorer after `asr.text.normalize`; a ratio is a condition's WER over the same "
             "system's clean WER on the same utterances.", ""]
    for name, note in record["notes"].items():
        lines.append(f"- {name}: {note}")
    if record["notes"]:
        lines.append("")
    for set_name, entry in record["figures"]["sets"].items():
        lines += [f"## {set_name} ({entry['utterances']} utterances)", "",
                  "| condition | " + " | ".join(f"{systems[s]} WER | ratio" for s in systems) + " |",
                  "|---|" + "---:|---:|" * len(systems)]
        for condition in entry["conditions"].values():
            cells = []
            for s in systems:
                got = condition["systems"].get(s)
                cells += [_pct(got["wer"]), _times(got["ratio"])] if got else ["-", "-"]
            lines.append(f"| {condition['label']} | " + " | ".join(cells) + " |")
        degraded = len(entry["conditions"]) - 1
        lines.append(f"| **mean of the {degraded} degraded** | "
                     + " | ".join(f" | **{_times(entry['mean_ratio'].get(s))}**" for s in systems) + " |")
        lines.append("")
    noise = record["figures"]["noise_alone"]
    if noise["items"]:
        lines += ["## Noise alone: words per minute (should be 0)", "",
                  "| noise | seconds | " + " | ".join(systems[s] for s in systems) + " | what ours said |",
                  "|---|---:|" + "---:|" * len(systems) + "---|"]
        for row in noise["items"].values():
            cells = [f"{row['systems'][s]['words_per_minute']:.1f}" if s in row["systems"] else "-" for s in systems]
            said = row["systems"].get("asr", {}).get("text", "")
            lines.append(f"| {row['label']} | {row['seconds']:.1f} | " + " | ".join(cells)
                         + f" | {said[:60] + ('...' if len(said) > 60 else '')} |")
        total = [f"**{noise['total'][s]['words_per_minute']:.1f}**" if noise["total"].get(s, {}).get("seconds")
                 else "-" for s in systems]
        lines += [f"| **all** | {sum(r['seconds'] for r in noise['items'].values()):.1f} | " + " | ".join(total)
                  + " | |", ""]
    timing = record["timing"]
    lines += [f"Rendering took {timing['render_s']:.1f} s (nothing where the cache had it), loading our model "
              f"{timing['load_s']:.1f} s, our decoding {timing['ours_s']:.1f} s for {timing['files']} files "
              f"({timing['speech_items']} utterance-conditions, {timing['audio_s']:.0f} s of audio; "
              f"{timing['ours_s_per_file']:.2f} s a file) with --jobs {timing['jobs']}."
              + "".join(f" {record['systems'].get(name, name)}: {t['files']} files decoded afresh in {t['s']:.1f} s "
                        f"on {t['threads']} thread(s), the rest from the cache."
                        for name, t in timing.get("peers", {}).items() if t), ""]
    return lines


def plot(record: dict, path: Path) -> str:
    """The ratio to clean per condition, one panel per set, a bar per system; '' or why no plot was drawn."""
    try:
        import matplotlib  # noqa: PLC0415
    except ImportError:
        return "no plot: matplotlib is not installed here"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    sets = record["figures"]["sets"]
    if not sets:
        return "no plot: no speech was scored"
    systems = record["systems"]
    fig, axes = plt.subplots(len(sets), 1, figsize=(10, 3.6 * len(sets)), squeeze=False)
    for ax, (set_name, entry) in zip(axes[:, 0], sets.items()):
        degraded = [c for name, c in entry["conditions"].items() if name != CLEAN.name]
        width = 0.8 / len(systems)
        for j, system in enumerate(systems):
            points = [(i + j * width, c["systems"][system]["ratio"]) for i, c in enumerate(degraded)
                      if c["systems"].get(system, {}).get("ratio") is not None]
            ax.bar([x for x, _ in points], [y for _, y in points], width,
                   label=f"{systems[system]} (mean {_times(entry['mean_ratio'].get(system))})")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks([i + width * (len(systems) - 1) / 2 for i in range(len(degraded))],
                      [c["label"] for c in degraded], rotation=25, ha="right", fontsize=8)
        ax.set_ylabel("WER / clean WER")
        ax.set_title(f"{set_name} ({entry['utterances']} utterances)", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return ""
