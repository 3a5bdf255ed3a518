"""The recognizer's own output on training sentences, for the restorer: speak, recognize, keep the words and times.

    python recipes/restorer/asr_outputs.py [--sentences 3000] [--jobs 2] [--out data/restorer/asr_train.jsonl]

Sentences come from data/restorer/train.txt only (recipes/restorer/prepare.py; never the held-out split),
1-3 in a row per item so that a final can hold a sentence end. Each item is spoken by a training voice of
espeak-ng (85%) or flite (15%) (`recipes/synthetic/engines.train_voices`: never a check-set voice),
postprocessed as the synthetic recipe does, and recognized by the bundled model without restorer. One
JSON line per item: {"text": the cased, punctuated sentences, "voice", "finals": [[[word, start, end],
...], ...]} (the finals' plain words with their times). Seeded, so a rerun rebuilds the same items; the
audio is not kept. About 12 minutes for 3000 sentences on 2 cores.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "recipes" / "synthetic"))
import engines as E  # noqa: E402


def synthetic_recipe():
    """recipes/synthetic/prepare.py as a module (its `tts_text` and `postprocess`)."""
    spec = importlib.util.spec_from_file_location("restorer_prepare", ROOT / "recipes" / "restorer" / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic_recipe()

_WORKER: dict = {}


def plan(lines: list[str], sentences: int, seed: int) -> list[tuple[str, str, int]]:
    """(text, engine, seed) per item: `sentences` training lines drawn at random, 1-3 to an item."""
    rng = random.Random(seed)
    chosen = rng.sample(lines, min(sentences, len(lines)))
    items, i = [], 0
    while i < len(chosen):
        n = rng.choice((1, 2, 2, 3))
        items.append((" ".join(chosen[i:i + n]), "flite" if rng.random() < 0.15 else "espeak", rng.randrange(2 ** 31)))
        i += n
    return items


def _init() -> None:
    import asr

    _WORKER["model"] = asr.load(restore=False)
    _WORKER["synthetic"] = synthetic_recipe()
    _WORKER["voices"] = {engine: E.train_voices(engine) for engine in ("espeak", "flite")}


def recognize(item: tuple[str, str, int]) -> dict | None:
    """One item spoken and recognized; None when the engine fails."""
    text, engine, seed = item
    synthetic, rng = _WORKER["synthetic"], np.random.default_rng(seed)
    voices = _WORKER["voices"][engine]
    voice = voices[int(rng.integers(len(voices)))]
    try:
        audio = synthetic.postprocess(E.SYNTH[engine](synthetic.tts_text(text) or text, voice, rng), rng)
    except Exception:  # an engine that chokes on one text: skip the item
        return None
    result = _WORKER["model"].transcribe(audio, sample_rate=E.SR)
    finals = [[[w.word, round(w.start, 3), round(w.end, 3)] for w in s.words] for s in result.segments]
    return {"text": text, "voice": voice.speaker, "finals": finals}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", type=Path, default=ROOT / "data" / "restorer" / "train.txt")
    p.add_argument("--out", type=Path, default=ROOT / "data" / "restorer" / "asr_train.jsonl")
    p.add_argument("--sentences", type=int, default=3000)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if not a.train.is_file():
        print(f"asr_outputs.py: error: {a.train}: run recipes/restorer/prepare.py first", file=sys.stderr)
        return 1
    items = plan(a.train.read_text(encoding="utf-8").splitlines(), a.sentences, a.seed)
    began, done = time.time(), 0
    tmp = a.out.with_suffix(".partial")
    with mp.get_context("spawn").Pool(a.jobs, initializer=_init) as pool, tmp.open("w") as out:
        for record in pool.imap(recognize, items, chunksize=4):
            if record is not None:
                out.write(json.dumps(record) + "\n")
                done += 1
            if done % 200 == 0:
                print(f"{done}/{len(items)} items, {time.time() - began:.0f} s", flush=True)
    tmp.replace(a.out)
    print(f"{done} items ({a.sentences} sentences) in {a.out}, {(time.time() - began) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
