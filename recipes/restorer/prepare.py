"""The restorer's text: cased, punctuated sentences of the text pool, split as the synthetic recipe splits them.

    python recipes/restorer/prepare.py [--text-dir ../shared/data/text] [--out data/restorer]

Every sentence goes through the synthetic recipe's own filter, deduplication and dev exclusion
(recipes/synthetic/prepare.py: `tts_text`, 2-25 words, speechocean762 dev transcripts left out), and
sentence i of each file (counted after filtering) is held out when i % HOLD_EVERY == 0: exactly the
sentences the synthetic check sets are made of, so no check-set or dev sentence ever trains the
restorer. Of those, the restorer keeps the sentences written in mixed case that map word for word onto
their normalised form (not the all-capitals LibriSpeech transcripts, not WordNet's lower-case examples).
Writes OUT/train.txt and OUT/held.txt, one original sentence a line.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.text.normalize import normalize  # noqa: E402
from asr.text.restore.labels import labelled  # noqa: E402


def synthetic_recipe():
    """recipes/synthetic/prepare.py as a module (its split rule and sentence filter)."""
    spec = importlib.util.spec_from_file_location("synthetic_prepare", ROOT / "recipes" / "synthetic" / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def dev_transcripts(text_dir: Path) -> set[str]:
    """The dev sets' transcripts (normalised) beside `text_dir`, which every sentence list here holds out."""
    synthetic = synthetic_recipe()
    return synthetic.dev_transcripts([text_dir.parent / name for name in synthetic.DEV_MANIFESTS])


def usable(line: str) -> bool:
    """A sentence the restorer can learn from: mixed case, starting with a capital, labels for every word."""
    letters = [c for c in line if c.isalpha()]
    return bool(letters) and letters[0].isupper() and any(c.islower() for c in letters) and labelled(line) is not None


def sentences(text_dir: Path, exclude: set[str]) -> Iterator[tuple[str, str, bool]]:
    """(sid, original sentence, held out) of every usable sentence: the synthetic recipe's `load_sentences`
    loop (its sid "<file stem>-<index>" names the check sets' audio), keeping the lines."""
    synthetic = synthetic_recipe()
    seen = set(exclude)
    for path in sorted(text_dir.glob("*.txt")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if synthetic.holds_dev(path, lines, exclude):
            continue
        kept = 0
        for line in lines:
            if synthetic.tts_text(line) is None:
                continue
            text = normalize(line)
            if not 2 <= len(text.split()) <= 25 or text in seen:
                continue
            seen.add(text)
            sid, is_held = f"{path.stem}-{kept:05d}", kept % synthetic.HOLD_EVERY == 0
            kept += 1
            if usable(line):
                yield sid, " ".join(line.split()), is_held


def split(text_dir: Path, exclude: set[str]) -> tuple[list[str], list[str]]:
    """(train, held-out) original sentences."""
    train, held = [], []
    for _, line, is_held in sentences(text_dir, exclude):
        (held if is_held else train).append(line)
    return train, held


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text-dir", type=Path, default=ROOT.parent / "shared" / "data" / "text")
    p.add_argument("--out", type=Path, default=ROOT / "data" / "restorer")
    a = p.parse_args(argv)
    if not any(a.text_dir.glob("*.txt")):
        print(f"recipes/restorer/prepare.py: error: {a.text_dir}: no *.txt files", file=sys.stderr)
        return 1
    train, held = split(a.text_dir, dev_transcripts(a.text_dir))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "train.txt").write_text("".join(s + "\n" for s in train), encoding="utf-8")
    (a.out / "held.txt").write_text("".join(s + "\n" for s in held), encoding="utf-8")
    print(f"restorer text: {len(train)} train and {len(held)} held-out sentences in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
