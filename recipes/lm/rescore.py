"""Build a 4-gram for the second pass (`--rescore-lm data/lm/rescore/4gram.klm`) in one resumable command.

    python recipes/lm/rescore.py [--data-root ../shared/data] [--work data/lm] [--out data/lm/rescore/4gram.klm]
                                 [--order 4] [--prune 0 1 1 1] [--from-stage N]

1. text: the books and the in-domain text as normalised sentences, one a line: `recipes/lm/build.py`'s stage 1,
   shared with it (`<work>/text`; nothing of a dev set);
2. vocab: the first pass's vocabulary rule, `recipes/lm/build.py`'s stage 2 (`<work>/vocab.txt`);
3. lm: KenLM's lmplz over all of that text at once: an interpolated modified Kneser-Ney 4-gram over the vocabulary,
   n-grams seen once unlisted above the unigrams (--prune 0 1 1 1), written to `<work>/rescore/4gram.arpa.gz`;
4. binary: KenLM's binary trie of it, probabilities and back-offs quantised to 8 bits (`asr.decoding.lm_binary`),
   written to --out.

The first pass keeps its pruned trigram, which the search queries at every frame; this LM scores only each final's
n-best (`asr.decoding.rescore`), so it can be larger. The bundled second pass is a neural word LM instead
(`recipes/lm/neural.py`; both compared in `recipes/lm/README.md`). lmplz and build_binary come from `scripts/build_kenlm.sh`
(scripts/setup.sh runs it). A stage whose output exists is skipped (--from-stage N redoes N and later).
"""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.decoding.lm_binary import find_tool, write_binary  # noqa: E402
from recipes.lm.build import recipe_parser, text_files, text_stages  # noqa: E402


def log(message: str) -> None:
    print(f"rescore lm: {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def stage_lm(work: Path, order: int, prune: list[int], arpa: Path) -> None:
    """lmplz over every text file, streamed in; its ARPA gzip-compressed under a temporary name first, its report in
    lmplz.log beside it."""
    lmplz = find_tool("lmplz")
    if lmplz is None:
        sys.exit("rescore lm: error: KenLM's lmplz is not installed (bash scripts/build_kenlm.sh builds it)")
    arpa.parent.mkdir(parents=True, exist_ok=True)
    partial = arpa.with_suffix(".partial")
    command = [str(lmplz), "-o", str(order), "-S", "25%", "-T", str(arpa.parent), "--prune", *map(str, prune),
               "--limit_vocab_file", str(work / "vocab.txt"), "--discount_fallback"]
    report = arpa.parent / "lmplz.log"  # its counts, discounts and the binary's size at each setting
    with gzip.open(partial, "wb", compresslevel=1) as out, open(report, "wb") as err:
        run = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        feeder = _feed(run.stdin, text_files(work))
        shutil.copyfileobj(run.stdout, out, 1 << 20)
        feeder.join()
        if run.wait() != 0:
            sys.exit(f"rescore lm: error: lmplz failed ({report})")
    partial.replace(arpa)
    log(f"{arpa}: {arpa.stat().st_size / 1e6:.1f} MB")


def _feed(stdin, paths: list[Path]):
    """A thread that writes the text files into lmplz's standard input, then closes it (lmplz writes its ARPA only
    once it has read everything, so reading its output in this thread's caller cannot block it)."""
    import threading  # noqa: PLC0415

    def feed() -> None:
        with stdin:
            for path in paths:
                with open(path, "rb") as f:
                    shutil.copyfileobj(f, stdin, 1 << 20)

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    p = recipe_parser(__doc__, ROOT / "data" / "lm" / "rescore" / "4gram.klm", order=4)
    p.add_argument("--prune", type=int, nargs="+", default=[0, 1, 1, 1],
                   help="per order, n-grams seen this many times or fewer are unlisted (lmplz --prune)")
    a = p.parse_args(argv)
    if len(a.prune) != a.order:
        p.error(f"--prune takes {a.order} values (unigrams .. {a.order}-grams)")
    arpa = a.work / "rescore" / f"{a.order}gram.arpa.gz"
    stages = [*text_stages(p, a),
              (lambda: stage_lm(a.work, a.order, a.prune, arpa), arpa),
              (lambda: log(f"-> {write_binary(arpa, a.out, find_tool(), quantized=True)}"), a.out)]
    for number, (run, done) in enumerate(stages, start=1):
        if number >= a.from_stage or not done.exists():
            run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
