"""Generate a multi-voice synthetic English speech corpus offline.

    python recipes/synthetic/prepare.py --text-dir ../shared/data/text --out data/synthetic \
        --hours-train 8 --jobs 2 [--engines espeak flite festival hibari piper kokoro kokoro_en]

Writes <out>/train.jsonl (--train-manifest), <out>/check.jsonl (the first six engines' held-out voices),
<out>/check_kokoro_en.jsonl (Kokoro's four held-out English voices) ({"audio", "duration", "text", "speaker"}),
16 kHz mono FLAC under <out>/audio/<speaker>/, and <out>/train_text.txt: every training-side sentence
(normalised, synthesised or not; never a held-out or dev one), the text for the word LM. --text-only
writes just that file. Files that exist are reused (resume); the manifests
are rewritten atomically after every round. Deterministic given --seed. See README.md beside this file.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import sys
import time
import unicodedata
from dataclasses import dataclass
from itertools import takewhile
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import soundfile as sf

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]
from asr.text.normalize import normalize  # noqa: E402
import engines as E  # noqa: E402

log = logging.getLogger("synthetic")
HOLD_EVERY = 50  # sentence i of each text file (after filtering) is held out when i % 50 == 0
_ABBREV = re.compile(r"\b(Mr|Mrs|Ms|Dr|St|Jr|Sr|Co|Ltd|Inc|vs|etc|viz|cf|Prof|Gen|Col|Capt|Lt|Sgt|Rev|Hon|"
                     r"Gov|Sen|Rep|No|Vol|Ch|Fig|Mt|Ft|ca|approx|e\.g|i\.e)\.", re.I)
_ROMAN = re.compile(r"\b[IVXLCDM]{2,}\b")
_UNSAFE = re.compile(r"[^A-Za-z\s.,;:!?'\"()\-&]")
_LABEL = re.compile(r"^[A-Z][A-Za-z]{0,3}:")  # "DE: Is that ...?" (dialogue speaker labels)


@dataclass(frozen=True)
class Sentence:
    sid: str   # "<file stem>-<index>"
    tts: str   # what the engine reads (the original, case-fixed)
    text: str  # normalised transcript


@dataclass(frozen=True)
class Item:
    sentence: Sentence
    voice: E.Voice
    seed: int

    @property
    def rel(self) -> str:
        return f"audio/{self.voice.speaker}/{self.sentence.sid}.flac"


def fold(s: str) -> str:
    s = s.translate(str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"',
                                   "\u2014": " - ", "\u2013": " - "}))
    return unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()


def tts_text(s: str) -> str | None:
    """The sentence as the engine should read it, or None when it is unsuitable for synthesis."""
    s = " ".join(s.split())
    if any(c.isdigit() for c in s) or _UNSAFE.search(fold(s)) or _ABBREV.search(s) or _LABEL.match(s):
        return None
    if s.upper() == s:  # all-caps transcript (LibriSpeech): read as words, not letters
        return re.sub(r"\bi\b", "I", s.lower())
    if _ROMAN.search(s):
        return None
    # capitals are read as words (runs of them are headings); "FBI", "MTBF" alone stay spelled
    shortest = 2 if len(re.findall(r"\b[A-Z]{2,}\b", s)) >= 2 else 4
    return re.sub(r"\b(?=[A-Z]*[AEIOU])[A-Z]{%d,}\b" % shortest, lambda m: m.group().lower(), s)


DEV_MANIFESTS = ("speechocean762/dev.jsonl", "librispeech/dev-clean-2.jsonl")  # beside the text folder


def dev_transcripts(manifests: list[Path]) -> set[str]:
    """The normalised transcripts of the dev manifests that exist: text never used for synthesis."""
    return {normalize(json.loads(line)["text"]) for dev in manifests if dev.exists() for line in dev.open()}


def holds_dev(path: Path, lines: list[str], exclude: set[str]) -> bool:
    """Whether a text file holds any `exclude`d (dev) transcript, so that it is left out whole (logged)."""
    overlap = sum(normalize(line) in exclude for line in lines)
    if overlap:
        log.info("%s: left out, it holds %d dev transcripts", path.name, overlap)
    return overlap > 0


def load_sentences(text_dir: Path, exclude: set[str]) -> tuple[list[Sentence], list[Sentence]]:
    """Filter every *.txt in text_dir; return (train, held_out), deduplicated on normalised text. A file
    that holds any `exclude`d (dev) transcript is left out whole: its other lines come from the same
    chapters as the dev set (LibriSpeech dev-clean's transcripts hold every dev-clean-2 sentence)."""
    seen, train, held = set(exclude), [], []
    for path in sorted(text_dir.glob("*.txt")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if holds_dev(path, lines, exclude):
            continue
        kept = 0
        for line in lines:
            tts = tts_text(line)
            if tts is None:
                continue
            text = normalize(line)
            if not 2 <= len(text.split()) <= 25 or text in seen:
                continue
            seen.add(text)
            s = Sentence(f"{path.stem}-{kept:05d}", tts, text)
            (held if kept % HOLD_EVERY == 0 else train).append(s)
            kept += 1
    return train, held


def stable_seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha1("|".join(map(str, parts)).encode()).digest()[:8], "little")


def postprocess(audio: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Trim silence to at most ~0.3 s each side, scale the peak to a random level in [0.3, 0.95]."""
    frame = 160
    n = len(audio) // frame
    if n == 0:
        return audio
    rms = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame) ** 2, axis=1))
    voiced = np.flatnonzero(rms > rms.max() * 10 ** (-40 / 20))
    start = max(0, voiced[0] * frame - int(rng.uniform(0.05, 0.3) * E.SR))
    end = min(len(audio), (voiced[-1] + 1) * frame + int(rng.uniform(0.05, 0.3) * E.SR))
    audio = audio[start:end]
    peak = float(np.abs(audio).max())
    return audio * (rng.uniform(0.3, 0.95) / peak) if peak > 0 else audio


def synthesize(job: tuple[Item, str]) -> tuple[str, float, float]:
    """Worker: make one file unless it exists; return (rel path, duration s, synthesis wall s)."""
    item, out = job
    path = Path(out) / item.rel
    if path.exists():
        return item.rel, sf.info(str(path)).duration, 0.0
    t0 = time.perf_counter()
    rng = np.random.default_rng(item.seed)
    try:
        audio = postprocess(E.SYNTH[item.voice.engine](item.sentence.tts, item.voice, rng), rng)
    except Exception as e:  # noqa: BLE001 - one bad sentence must not stop the corpus
        log.warning("failed %s (%s): %r", item.rel, item.sentence.tts, e)
        return item.rel, 0.0, 0.0
    if len(audio) < E.SR // 5 or not np.isfinite(audio).all():
        return item.rel, 0.0, 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.flac")
    sf.write(str(tmp), audio, E.SR, subtype="PCM_16")
    os.replace(tmp, path)
    return item.rel, len(audio) / E.SR, time.perf_counter() - t0


class Stream:
    """One engine's deterministic, endless-until-exhausted sequence of train items."""

    def __init__(self, engine: str, sentences: list[Sentence], seed: int, start: int = 0,
                 blend_seed: int = E.KOKORO_EN_BLEND_SEED) -> None:
        self.engine, self.sentences, self.seed, self.start = engine, sentences, seed, start
        self.voices = E.train_voices(engine, blend_seed)  # never a held-out voice (E.never_train)
        self.probs = E.voice_probs(engine, self.voices)
        self.done: list[tuple[Item, float]] = []  # generated prefix: (item, duration)
        self.hours = 0.0
        self.synth_s = self.audio_s = 0.0  # for the x-real-time report
        self.next_i = start  # next index of self.sentences to take (a slice of the sequence starts later)

    def item(self, i: int) -> Item:
        rng = np.random.default_rng(stable_seed(self.seed, self.engine, i))
        if self.probs is None:
            voice = self.voices[int(rng.integers(len(self.voices)))]
        else:
            voice = self.voices[int(rng.choice(len(self.voices), p=self.probs))]
        s = self.sentences[i]
        return Item(s, voice, stable_seed(self.seed, voice.speaker, s.sid))


def extend(stream: Stream, target_h: float, pool: Pool | None, out: Path, chunk: int = 32) -> None:
    """Grow `stream.done` in order until it holds `target_h` hours (or the sentences run out).

    With pool=None only existing files are taken, up to the first missing one."""
    while stream.hours < target_h and stream.next_i < len(stream.sentences):
        i = stream.next_i
        mean_s = stream.hours * 3600 / len(stream.done) if stream.done else 3.0
        n = min(chunk, int((target_h - stream.hours) * 3600 / mean_s) + 1)  # don't overshoot much
        items = [stream.item(j) for j in range(i, min(i + n, len(stream.sentences)))]
        if pool is None:
            items = list(takewhile(lambda it: (out / it.rel).exists(), items))
            if not items:
                return
        for it, (_, dur, wall) in zip(items, (pool.imap if pool else map)(
                synthesize, [(it, str(out)) for it in items])):
            if stream.hours >= target_h:
                break
            stream.next_i += 1
            if wall > 0:
                stream.synth_s, stream.audio_s = stream.synth_s + wall, stream.audio_s + dur
            if dur > 0:
                stream.done.append((it, dur))
                stream.hours += dur / 3600


def check_items(held: list[Sentence], engines: list[str], n: int, seed: int) -> list[Item]:
    """~85% held-out voices, ~15% training voices, all on held-out sentences."""
    rng = np.random.default_rng(stable_seed(seed, "check"))
    order = rng.permutation(len(held))[:n]
    held_v = [v for e in engines for v in E.voices(e) if E.is_held_out(v)]
    groups = [[v for v in held_v if v.engine == e] for e in engines]
    groups = [g for g in groups if g]
    train_v = [v for e in engines for v in E.voices(e) if not E.is_held_out(v)]
    items = []
    for k, j in enumerate(order):
        if not groups or rng.random() < 0.15:
            v = train_v[int(rng.integers(len(train_v)))]
        else:
            g = groups[k % len(groups)]
            v = g[int(rng.integers(len(g)))]
        items.append(Item(held[j], v, stable_seed(seed, v.speaker, held[j].sid)))
    return items


def kokoro_check_items(held: list[Sentence], n: int, seed: int) -> list[Item]:
    """Held-out sentences spoken in turn by Kokoro's four held-out English voices (E.KOKORO_EN_CHECK)."""
    rng = np.random.default_rng(stable_seed(seed, "check_kokoro_en"))
    check_v = [v for v in E.voices("kokoro_en") if E.is_held_out(v)]
    assert [v.args[0][0] for v in check_v] == sorted(E.KOKORO_EN_CHECK, key=E.KOKORO_EN_VOICES.index)
    items = []
    for k, j in enumerate(rng.permutation(len(held))[:n]):
        v = check_v[k % len(check_v)]
        items.append(Item(held[j], v, stable_seed(seed, v.speaker, held[j].sid)))
    return items


def train_slices(n: int, seed: int, engines: list[str]) -> dict[str, np.ndarray]:
    """Which train sentences (indices) each engine reads; no two engines share one.

    One seeded permutation: its first half is dealt round-robin to the six original engines
    (E.LEGACY_ENGINES, fixed order, so their items never change), its second half is Kokoro English's
    alone (sentences no other voice has spoken)."""
    order = np.random.default_rng(seed).permutation(n)
    half = order[: n // 2]
    out = {e: half[k::len(E.LEGACY_ENGINES)] for k, e in enumerate(E.LEGACY_ENGINES)}
    out["kokoro_en"] = order[n // 2:]
    return {e: out[e] for e in engines}


def write_manifest(path: Path, rows: list[tuple[Item, float]]) -> None:
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for it, dur in rows:
            f.write(json.dumps({"audio": it.rel, "duration": round(dur, 3), "text": it.sentence.text,
                                "speaker": it.voice.speaker}) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text-dir", type=Path, default=Path("../shared/data/text"))
    p.add_argument("--out", type=Path, default=Path("data/synthetic"))
    p.add_argument("--dev-manifest", type=Path, nargs="+", default=None,
                   help="transcripts never used as synthesis text, nor any text file holding one (default: "
                        "<text-dir>/../speechocean762/dev.jsonl and <text-dir>/../librispeech/dev-clean-2.jsonl)")
    p.add_argument("--hours-train", type=float, default=8.0)
    p.add_argument("--check-utts", type=int, default=300)
    p.add_argument("--engines", nargs="+", default=list(E.SYNTH), choices=list(E.SYNTH))
    p.add_argument("--train-engines", nargs="+", default=None, choices=list(E.SYNTH),
                   help="engines that make train.jsonl (default: --engines); the check set uses all of --engines")
    p.add_argument("--train-manifest", default="train.jsonl",
                   help="file name of the train manifest in --out (e.g. train_kokoro_en.jsonl for a build of "
                        "--train-engines kokoro_en alone, so it does not replace train.jsonl)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=4, help="manifests are rewritten after each round")
    p.add_argument("--max-sentences", type=int, default=0, help="use only the first N train/held sentences (tests)")
    p.add_argument("--start-sentence", type=int, default=0,
                   help="each train engine starts at this index of its sentence sequence (a later slice of the "
                        "same sequence: recipes/voices/continue.py renders a new one every period)")
    p.add_argument("--blend-seed", type=int, default=E.KOKORO_EN_BLEND_SEED,
                   help="seed of Kokoro English's 1000 blended training speakers (another seed, other blends)")
    p.add_argument("--text-only", action="store_true", help="only write <out>/train_text.txt, then exit")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    exclude = dev_transcripts(a.dev_manifest or [a.text_dir.parent / name for name in DEV_MANIFESTS])
    train_s, held_s = load_sentences(a.text_dir, exclude)
    if a.max_sentences:
        train_s, held_s = train_s[: a.max_sentences], held_s[: a.max_sentences]
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "train_text.txt").write_text("".join(f"{s.text}\n" for s in train_s), encoding="utf-8")
    log.info("%d train sentences (%s), %d held-out sentences, %d dev transcripts excluded",
             len(train_s), a.out / "train_text.txt", len(held_s), len(exclude))
    if a.text_only:
        return
    engines = [e for e in a.engines if E.available(e)]
    for e in sorted(set(a.engines) - set(engines)):
        log.warning("engine %s is not available here: skipped", e)
    if not engines:
        sys.exit("no TTS engine available")
    log.info("engines %s", engines)
    for e in engines:
        E.prepare_once(e)

    # Each engine reads its own slice of one shuffled sentence list, so engines never share a sentence.
    train_engines = [e for e in engines if a.train_engines is None or e in a.train_engines]
    for e in [e for e in train_engines if not E.train_voices(e)]:
        log.info("engine %s has no training voice (all held out): it makes no train items", e)
    train_engines = [e for e in train_engines if E.train_voices(e)]
    slices = train_slices(len(train_s), a.seed, train_engines)
    streams = [Stream(e, [train_s[j] for j in slices[e]], a.seed, a.start_sentence, a.blend_seed)
               for e in train_engines]
    share = {e: E.WEIGHTS[e] / sum(E.WEIGHTS[x] for x in train_engines) for e in train_engines}
    train_path = a.out / a.train_manifest

    with Pool(a.jobs) as pool:
        legacy = [e for e in engines if e in E.LEGACY_ENGINES]
        check_sets = {"check.jsonl": check_items(held_s, legacy, a.check_utts, a.seed) if legacy else [],
                      "check_kokoro_en.jsonl": kokoro_check_items(held_s, a.check_utts, a.seed)
                      if "kokoro_en" in engines else []}
        n_check = 0
        for name, checks in check_sets.items():
            if not checks or not a.check_utts:
                continue
            results = pool.map(synthesize, [(it, str(a.out)) for it in checks], chunksize=4)
            write_manifest(a.out / name, [(it, r[1]) for it, r in zip(checks, results) if r[1] > 0])
            n_check += sum(1 for r in results if r[1] > 0)
        for st in streams:  # pick up what a previous run made, so the manifest only grows
            extend(st, a.hours_train * share[st.engine], None, a.out)
        write_manifest(train_path, [row for st in streams for row in st.done])
        for r in range(1, a.rounds + 1):
            for st in streams:
                extend(st, a.hours_train * share[st.engine] * r / a.rounds, pool, a.out)
                log.info("round %d %-8s %6.2f h %5d utts %s", r, st.engine, st.hours, len(st.done),
                         f"{st.audio_s / st.synth_s:.1f}x real time per job" if st.synth_s else "")
                write_manifest(train_path, [row for st in streams for row in st.done])
    slice_path = train_path.with_suffix(".slice.json")  # which part of each engine's sequence it holds
    slice_path.write_text(json.dumps({st.engine: {"start": st.start, "end": st.next_i, "hours": round(st.hours, 4),
                                                  "utterances": len(st.done), "blend_seed": a.blend_seed}
                                      for st in streams}, indent=1) + "\n")
    total = sum(st.hours for st in streams)
    log.info("done: train %.2f h in %d utts (%s), check %d utts", total, sum(len(st.done) for st in streams),
             train_path, n_check)


if __name__ == "__main__":
    main()
