"""Build the bundled word LM from ../shared/data in one resumable command (numbered stages, each kept in --work).

    python recipes/lm/build.py [--data-root ../shared/data] [--work data/lm] [--out asr/pretrained/default.arpa.gz]
                               [--min-counts 2 3] [--from-stage N]

1. text: the books (`books/part-*.txt.xz`) as normalised sentences, one a line (`asr.training.lm.book_text`), and
   the in-domain text: the text pool's training side (recipes/synthetic/prepare.py --text-only) and every
   transcript of the real training corpora (recipes/native/lm.py), nothing of a dev set;
2. vocab: LibriSpeech's 200k-word vocabulary (the words the normaliser keeps: not DR, ST), every word of the
   in-domain text, and the books' words seen at least --book-word-count times;
3. counts: each text file's trigram counts in word ids (numpy, one file at a time: memory follows the distinct
   n-grams, not the text);
4. lm: an interpolated modified Kneser-Ney trigram of the books and one of the in-domain text, each pruned by
   count (--min-counts: bigrams, trigrams; n-grams with <unk> unlisted); their mixture weight chosen on the
   dev sets' perplexity (validation: their transcripts are scored, never trained on); the mixture written to
   --out and a report of every candidate's perplexity and OOV rate to <work>/report.json.

A stage whose output exists is skipped (--from-stage N redoes N and later).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402
from asr.training.lm import kneser_ney as kn  # noqa: E402
from asr.training.lm.book_text import book_paragraphs, book_sentences  # noqa: E402
from asr.decoding.lm_binary import beside, matches, stamp, write_binary  # noqa: E402
from asr.training.lm.ngram import BOS, EOS, UNK, UNK_ID, BackoffModel, interpolate, perplexity, write_arpa  # noqa: E402
from recipes.native.lm import sentences as in_domain_sentences  # noqa: E402

DEV_SETS = {"speechocean762 dev": "speechocean762/dev.jsonl", "dev-clean-2": "librispeech/dev-clean-2.jsonl"}
WEIGHTS = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]  # the books' share of the mixture, tried on dev perplexity


def log(message: str) -> None:
    print(f"lm: {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def stage_text(data: Path, work: Path) -> None:
    text = work / "text"
    text.mkdir(parents=True, exist_ok=True)
    for part in sorted((data / "books").glob("part-*.txt.xz")):
        out = text / f"books-{part.name.split('.')[0].split('-')[1]}.txt"
        if not out.is_file():
            partial = out.with_suffix(".partial")
            with open(partial, "w", encoding="utf-8") as f:
                for paragraph in book_paragraphs(part):
                    f.writelines(f"{s}\n" for s in book_sentences(paragraph))
            partial.replace(out)
            log(f"{part.name} -> {out}")
    pool = ROOT / "data" / "synthetic" / "train_text.txt"
    if not pool.is_file():
        subprocess.run([sys.executable, "recipes/synthetic/prepare.py", "--text-dir", str(data / "text"), "--out",
                        str(pool.parent), "--text-only"], cwd=ROOT, check=True)
    domain = in_domain_sentences("native_continue", data, pool)
    (text / "domain.txt").write_text("".join(f"{s}\n" for s in domain), encoding="utf-8")
    log(f"in-domain text: {len(domain)} sentences")


def text_files(work: Path) -> list[Path]:
    return sorted((work / "text").glob("books-*.txt")) + [work / "text" / "domain.txt"]


def stage_vocab(data: Path, work: Path, book_word_count: int) -> None:
    listed = (data / "lexicon" / "librispeech-vocab.txt").read_text(encoding="utf-8").split()
    words = {w for w in listed if normalize(w) == w}  # words as said: not DR or ST (DOCTOR, SAINT are listed)
    base = len(words)
    words |= set((work / "text" / "domain.txt").read_text(encoding="utf-8").split())
    domain = len(words) - base
    frequency: Counter = Counter()
    for path in text_files(work)[:-1]:
        with open(path, encoding="utf-8") as f:
            for line in f:
                frequency.update(line.split())
    books = {w for w, c in frequency.items() if c >= book_word_count} - words
    words |= books
    ordered = [BOS, EOS, UNK] + sorted(words - {BOS, EOS, UNK})
    (work / "vocab.txt").write_text("".join(f"{w}\n" for w in ordered), encoding="utf-8")
    log(f"vocabulary: {len(ordered) - 3} words ({base} LibriSpeech, {domain} more from the in-domain text, "
        f"{len(books)} more from the books)")


def read_vocab(work: Path) -> list[str]:
    return (work / "vocab.txt").read_text(encoding="utf-8").split()


def stage_counts(work: Path, order: int) -> None:
    ids = {w: i for i, w in enumerate(read_vocab(work))}
    (work / "counts").mkdir(exist_ok=True)
    for path in text_files(work):
        out = work / "counts" / f"{path.stem}.npz"
        if out.is_file():
            continue
        with open(path, encoding="utf-8") as f:
            stream = kn.flatten([ids.get(w, UNK_ID) for w in line.split()] for line in f)
        counts = kn.count(stream, order)
        np.savez(out, **{f"keys{n}": k for n, (k, _) in enumerate(counts, 1)},
                 **{f"counts{n}": c for n, (_, c) in enumerate(counts, 1)})
        log(f"{path.name}: {len(stream)} tokens, n-grams {[len(k) for k, _ in counts]}")


def load_counts(path: Path, order: int) -> kn.Counts:
    with np.load(path) as z:
        return [(z[f"keys{n}"], z[f"counts{n}"]) for n in range(1, order + 1)]


def dev_text(data: Path) -> dict[str, list[str]]:
    return {name: [s for s in (normalize(u.text) for u in read_manifest(data / rel)) if s]
            for name, rel in DEV_SETS.items()}


def model_of(counts: kn.Counts, words: list[str], min_counts: list[int]) -> BackoffModel:
    model = kn.estimate(counts, words)
    return kn.prune_counts(model, counts, min_counts)


def stage_lm(data: Path, work: Path, order: int, min_counts: list[int], out: Path) -> None:
    words = read_vocab(work)
    dev = dev_text(data)
    report: dict = {"vocabulary": len(words) - 3, "min_counts": min_counts, "models": {}}

    def describe(name: str, model: BackoffModel) -> None:
        scores = {s: dict(zip(("perplexity", "oov_percent"), perplexity(model, text))) for s, text in dev.items()}
        report["models"][name] = {"ngrams": model.sizes(), **scores}
        log(f"{name}: n-grams {model.sizes()}; " + "; ".join(
            f"{s} perplexity {v['perplexity']:.1f}, OOV {v['oov_percent']:.2f}%" for s, v in scores.items()))

    shards = [load_counts(p, order) for p in sorted((work / "counts").glob("books-*.npz"))]
    books = model_of(kn.merge(shards), words, min_counts)
    del shards
    describe("books", books)
    domain = model_of(load_counts(work / "counts" / "domain.npz", order), words, [1] * (order - 1))
    describe("in-domain", domain)
    best = None
    for weight in WEIGHTS:
        mixed = interpolate(books, domain, weight)
        describe(f"mixture {weight:g}", mixed)
        mean = np.mean([np.log(report["models"][f"mixture {weight:g}"][s]["perplexity"]) for s in dev])
        if best is None or mean < best[0]:
            best = (mean, weight, mixed)
    _, weight, mixed = best
    report["chosen_weight"] = weight
    out.parent.mkdir(parents=True, exist_ok=True)
    write_arpa(mixed, out)
    report["out"], report["megabytes"] = str(out), round(out.stat().st_size / 1e6, 1)
    (work / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    log(f"books' share {weight:g} (lowest mean log-perplexity of the dev sets) -> {out} ({report['megabytes']} MB)")


def recipe_parser(doc: str, out: Path, order: int) -> argparse.ArgumentParser:
    """The options of every word-LM recipe (this one, rescore.py): the data, the work folder, the output, the
    order, the vocabulary's rule and the stage to redo from."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--work", type=Path, default=ROOT / "data" / "lm")
    p.add_argument("--out", type=Path, default=out)
    p.add_argument("--order", type=int, default=order)
    p.add_argument("--book-word-count", type=int, default=20, help="a books' word seen this often joins the vocabulary")
    p.add_argument("--from-stage", type=int, default=1, help="redo this stage and the later ones")
    return p


def text_stages(p: argparse.ArgumentParser, a: argparse.Namespace) -> list:
    """Stages 1 and 2 of every word-LM recipe, (run, its output) each, once the data root is checked."""
    if not (a.data_root / "books").is_dir():
        p.error(f"--data-root {a.data_root}: no books/ folder there")
    a.work.mkdir(parents=True, exist_ok=True)
    return [(lambda: stage_text(a.data_root, a.work), a.work / "text" / "domain.txt"),
            (lambda: stage_vocab(a.data_root, a.work, a.book_word_count), a.work / "vocab.txt")]


def main(argv: list[str] | None = None) -> int:
    p = recipe_parser(__doc__, ROOT / "asr" / "pretrained" / "default.arpa.gz", order=3)
    p.add_argument("--min-counts", type=int, nargs="+", default=[2, 3],
                   help="the books' n-grams seen fewer times are unlisted: bigrams, trigrams, ...")
    a = p.parse_args(argv)
    if len(a.min_counts) != a.order - 1:
        p.error(f"--min-counts takes {a.order - 1} values (bigrams .. {a.order}-grams)")
    stages = [*text_stages(p, a),
              (lambda: stage_counts(a.work, a.order), a.work / "counts" / "domain.npz"),
              (lambda: stage_lm(a.data_root, a.work, a.order, a.min_counts, a.out), a.work / "report.json")]
    for number, (run, done) in enumerate(stages, start=1):
        if number >= a.from_stage or not done.exists():
            if number >= a.from_stage and number == 3:
                for stale in (a.work / "counts").glob("*.npz"):
                    stale.unlink()
            run()
    if not matches(beside(a.out), stamp(a.out)):  # 5. binary: KenLM's memory-mapped form, which loads at once
        log(f"-> {write_binary(a.out)} (KenLM's binary form)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
