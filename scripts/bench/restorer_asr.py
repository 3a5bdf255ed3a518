"""Casing and punctuation on the recognizer's own output of held-out audio, and on clean held-out text.

    python scripts/bench/restorer_asr.py [--restorer NAME=FILE ...] [--fresh] [--out benchmarks/restorer/restorer_asr.md]

Held-out audio: the committed check sets (benchmarks/check_sets/*.jsonl), whose clips speak held-out
sentences of the text pool in held-out voices. A clip's cased, punctuated reference is its original
sentence (recipes/restorer/prepare.py `sentences`: the audio's name is the sentence id); clips whose
sentence the restorer cannot learn from (all capitals, lower-case starts, numbers) are left out. Two
ways to hear them, both recognized by the bundled model with its default decoding and no restorer:

  - clips: each clip alone (mostly one sentence, one final);
  - joined: three clips in a row (sorted by speaker), silence trimmed and 0.15-0.45 s put between
    (seeded), so a final may hold more than one sentence, as in running speech.

Each file's recognized words (all its finals) are aligned to its reference's words and take their
labels by the rules of `asr.text.restore.align` (an inserted word: lower case, no mark; a deleted word's mark
moves to the word before; sentence starts follow the carried marks). The restorer then labels each
final on its own, with the pauses from its word times or without, and as a stream does (`Segmenter._close`:
after the finals before it, its end decided at the endpoint: `score_streamed`), and is scored per word: F1 per mark and casing accuracy (a word Capitalised where the reference writes it
lower case mid-sentence is an error). Clean text: held.txt as `asr.evaluate --restorer-text` scores it.
Recognition is cached in data/restorer/check_asr.json (--fresh: redo). Writes OUT (markdown) and its .json.
"""
from __future__ import annotations

import asr  # noqa: F401  (first: it keeps numpy's BLAS to one thread before numpy loads)

import argparse
import datetime
import json
import math
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "recipes" / "restorer"))
from prepare import dev_transcripts, sentences  # noqa: E402

from asr.audio import SAMPLE_RATE  # noqa: E402
from asr.audio.files import load_audio
from asr.text.restore.align import carry_labels  # noqa: E402
from asr.text.restore.context import Context, final_labels  # noqa: E402
from asr.text.restore.labels import baseline, labelled, word_pauses  # noqa: E402
from asr.text.restore.metrics import RestoreScore, score_baseline, score_restorer  # noqa: E402
from asr.text.restore.restorer import Restorer, load_restorer  # noqa: E402
from asr.training.restorer.data import read_sentences  # noqa: E402

Final = list[tuple[str, float, float]]  # (word, start, end)


def references(check_dir: Path, text_dir: Path) -> list[dict]:
    """{"set", "audio", "speaker", "text"} of each check-set clip whose sentence has usable labels."""
    held = {sid: line for sid, line, is_held in sentences(text_dir, dev_transcripts(text_dir)) if is_held}
    out = []
    for manifest in sorted(check_dir.glob("*.jsonl")):
        for line in manifest.read_text().splitlines():
            item = json.loads(line)
            text = held.get(Path(item["audio"]).stem)
            if text is not None:
                out.append({"set": manifest.stem, "audio": str(check_dir / item["audio"]), "speaker": item["speaker"],
                            "text": text})
    return out


def trimmed(audio: np.ndarray) -> np.ndarray:
    """The audio without its leading and trailing silence (10 ms frames 40 dB below the loudest)."""
    n = len(audio) // 160
    rms = np.sqrt(np.mean(audio[:n * 160].reshape(n, 160) ** 2, axis=1))
    voiced = np.flatnonzero(rms > rms.max() * 0.01)
    return audio[voiced[0] * 160:(voiced[-1] + 1) * 160] if len(voiced) else audio


def recognize(refs: list[dict], seed: int = 0) -> dict[str, list[dict]]:
    """{"clips" / "joined": [{"text": reference, "finals": [final, ...]}]} by the bundled recognizer."""
    model = asr.load(restore=False)

    def finals(audio: np.ndarray) -> list[Final]:
        return [[(w.word, round(w.start, 3), round(w.end, 3)) for w in s.words] for s in model.transcribe(audio, sample_rate=SAMPLE_RATE).segments]

    audio = {r["audio"]: load_audio(r["audio"]) for r in refs}
    clips = [{"text": r["text"], "finals": finals(audio[r["audio"]])} for r in refs]
    rng, joined = random.Random(seed), []
    for name in sorted({r["set"] for r in refs}):
        group = sorted((r for r in refs if r["set"] == name), key=lambda r: (r["speaker"], r["audio"]))
        for i in range(0, len(group), 3):
            parts = []
            for r in group[i:i + 3]:
                parts += [trimmed(audio[r["audio"]]), np.zeros(int(rng.uniform(0.15, 0.45) * SAMPLE_RATE), np.float32)]
            joined.append({"text": " ".join(r["text"] for r in group[i:i + 3]), "finals": finals(np.concatenate(parts))})
    return {"clips": clips, "joined": joined}


def score_asr(items: list[dict], predict) -> RestoreScore:
    """`predict(words, pauses) -> (cases, marks)` on each final, against the labels carried from the reference."""
    score = RestoreScore()
    for item in items:
        ref = labelled(item["text"])
        target = carry_labels(ref, [w for final in item["finals"] for w, _, _ in final])
        at = 0
        for final in item["finals"]:
            words = [w for w, _, _ in final]
            cases, marks = predict(words, word_pauses([s for _, s, _ in final], [e for _, _, e in final]))
            score.add(target.cases[at:at + len(words)], target.marks[at:at + len(words)], cases, marks)
            at += len(words)
    return score


def score_streamed(items: list[dict], restorer: Restorer) -> RestoreScore:
    """Each file's finals restored as a stream restores them (`asr.text.restore.context`: after the words of the
    finals before, titles written, the end decided at the endpoint), against the labels carried from the
    reference. The silence after a final is the gap to the next final's first word, at most the endpointer's
    default 0.4 s (a shorter gap: the segment was cut at its longest); after the file's last final, none follows."""
    score = RestoreScore()
    for item in items:
        ref = labelled(item["text"])
        target = carry_labels(ref, [w for final in item["finals"] for w, _, _ in final])
        context, at = Context(), 0
        for k, final in enumerate(item["finals"]):
            words = [w for w, _, _ in final]
            after = min(0.4, item["finals"][k + 1][0][1] - final[-1][2]) if k + 1 < len(item["finals"]) else math.inf
            cases, marks, _ = final_labels(restorer, words, [(a, b) for _, a, b in final], context, after)
            score.add(target.cases[at:at + len(words)], target.marks[at:at + len(words)], cases, marks)
            at += len(words)
    return score


def rows_for(name: str, restorer: Restorer, held, asr_items: dict[str, list[dict]]) -> list[dict]:
    """One row per evaluation: clean text, then each recognized set without pauses and (if read) with them."""
    rows = [{"restorer": name, "input": "clean held-out text", **score_restorer(held, restorer.labels).summary()}]
    for key, items in asr_items.items():
        rows.append({"restorer": name, "input": f"recognized, {key}",
                     **score_asr(items, lambda w, p: restorer.labels(w)).summary()})
        if restorer.uses_pauses:
            rows.append({"restorer": name, "input": f"recognized, {key}, with pauses",
                         **score_asr(items, restorer.labels).summary()})
        rows.append({"restorer": name, "input": f"recognized, {key}, as streamed",
                     **score_streamed(items, restorer).summary()})
    return rows


def table(rows: list[dict]) -> str:
    head = ("| restorer | input | period F1 | comma F1 | question F1 | exclamation F1 | casing accuracy % | finals or sentences |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|\n")
    return head + "".join(f"| {r['restorer']} | {r['input']} | {r['period_f1']:.2f} | {r['comma_f1']:.2f} | "
                          f"{r['question_f1']:.2f} | {r['exclaim_f1']:.2f} | {r['case_accuracy']:.2f} | "
                          f"{r['sentences']} |\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--restorer", action="append", default=[], metavar="NAME=FILE",
                   help="a restorer to score (repeatable; default: the bundled one, as 'bundled')")
    p.add_argument("--check-sets", type=Path, default=ROOT / "benchmarks" / "check_sets")
    p.add_argument("--text-dir", type=Path, default=ROOT.parent / "shared" / "data" / "text")
    p.add_argument("--held", type=Path, default=ROOT / "data" / "restorer" / "held.txt")
    p.add_argument("--cache", type=Path, default=ROOT / "data" / "restorer" / "check_asr.json")
    p.add_argument("--fresh", action="store_true", help="recognize the check sets again")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "restorer" / "restorer_asr.md")
    p.add_argument("--note", default="", help="a paragraph to put under the table")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: bench.quiet, the load guard
    from bench import quiet  # noqa: PLC0415

    quiet.add_allow_load(p)
    a = p.parse_args(argv)
    quiet.guard(a.allow_load, a.out, "restorer_asr")  # committed figures: only on a quiet machine
    if a.fresh or not a.cache.exists():
        refs = references(a.check_sets, a.text_dir)
        a.cache.parent.mkdir(parents=True, exist_ok=True)
        a.cache.write_text(json.dumps(recognize(refs)) + "\n")
    asr_items = json.loads(a.cache.read_text())
    held = read_sentences(a.held)
    rows = [{"restorer": "baseline", "input": "clean held-out text", **score_baseline(held).summary()}]
    rows += [{"restorer": "baseline", "input": f"recognized, {key}",
              **score_asr(items, lambda w, p: baseline(w)).summary()} for key, items in asr_items.items()]
    for spec in a.restorer or ["bundled="]:
        name, _, path = spec.partition("=")
        rows += rows_for(name, load_restorer("onnx", path or None), held, asr_items)
    sizes = {key: (len(items), sum(len(it["finals"]) for it in items), sum(len(f) for it in items for f in it["finals"]))
             for key, items in asr_items.items()}
    command = []
    for arg in sys.argv[1:] if argv is None else argv:
        if command and command[-1] == "--note":
            command[-1] = "--note ..."
        else:
            command.append(arg)
    text = (f"# Casing and punctuation on recognized speech ({datetime.date.today().isoformat()})\n\n"
            f"Made by `python scripts/bench/restorer_asr.py {' '.join(command)}`. "
            f"Held-out audio: the check sets' clips with usable references, recognized by the bundled model; "
            + ", ".join(f"{key}: {n} files, {f} finals, {w} words" for key, (n, f, w) in sizes.items())
            + f". Clean text: {len(held)} held-out sentences. Scores per word (see the script's docstring for the "
            "alignment rules); the last column counts finals (recognized) or sentences (text).\n\n"
            + table(rows) + (f"\n{a.note}\n" if a.note else ""))
    a.out.write_text(text)
    a.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
