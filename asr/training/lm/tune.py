"""Choose the word LM's weight and per-word score on a validation set (grid search).

    python -m asr.training.lm.tune --manifest DEV.jsonl [--model PATH] [--lm LM.arpa [LM2.arpa ...]]
                             [--lm-weights 0.5 1 1.5] [--word-scores -1 0 1] [--beam-size 128] [--limit N]
                             [--rescore LM4 --rescore-weights .. --rescore-first-weights .. --rescore-word-scores ..]

The acoustic model runs once per utterance; each grid point (LM file x weight x word score) only
re-runs the beam search over the saved log-probs. Prints WER/CER per point and, last, the best point as
`best: --lm LM --lm-weight W --word-score S WER=<pct> CER=<pct>`. With --rescore, the second pass's weights
(`asr.decoding.rescore`) are tuned too, at the best first-pass point: its n-best lists are kept once and ranked
again for each grid point, and the best is printed as `best second pass: --rescore-weight ...`.
Tune on held-out speech that no model or LM was trained on (a held-out speaker), never on a test set; then pass
the chosen values to asr.stream/transcribe/evaluate, or make them the defaults in `asr.decoding.beam.BeamConfig`
and `asr.decoding.rescore.RescoreConfig` when they belong to the bundled model and LMs.
"""
from __future__ import annotations

import sys
from itertools import product
from pathlib import Path

import numpy as np

from asr import cli
from asr.audio import AudioError, interrupt
from asr.audio.files import load_audio
from asr.corpus.manifest import ManifestError, read_manifest
from asr.corpus.scoring import Score, score
from asr.decoding.beam import BeamConfig, LMError, WordLM
from asr.decoding.decoder import Decoder
from asr.decoding.rescore import RescoreConfig, Rescorer
from asr.model.errors import ModelError
from asr.pretrained import default_lm_path
from asr.text.normalize import normalize


def grid_search(logprobs: list, refs: list[str], tokenizer, lm: str, weights: list[float], scores: list[float],
                beam_size: int, lexicon_words: int | None = BeamConfig().lexicon_words) -> list[tuple[float, float, Score, Score]]:
    """(lm_weight, word_score, word score, char score) for every grid point."""
    rows = []
    for weight, word_score in product(weights, scores):
        cfg = BeamConfig(beam_size, weight, word_score, lexicon_words=lexicon_words)
        decoder = Decoder(tokenizer, WordLM(tokenizer, lm, cfg))
        scored = [score(ref, normalize(decoder.text(decoder.decode(lp)))) for lp, ref in zip(logprobs, refs)]
        words, chars = Score.total(w for w, _, _ in scored), Score.total(c for _, c, _ in scored)
        rows.append((weight, word_score, words, chars))
        print(f"lm_weight={weight:g} word_score={word_score:g} WER={words.rate() * 100:.2f} "
              f"CER={chars.rate() * 100:.2f}", flush=True)
    return rows


def rescore_grid(logprobs: list, refs: list[str], tokenizer, lm: str, cfg: BeamConfig, second: str,
                 weights: list[float], first_weights: list[float], scores: list[float],
                 nbest: int) -> list[tuple[float, float, float, Score, Score]]:
    """(weight, first_weight, word_score, word score, char score) of the second pass for every grid point, over the
    n-best lists the first pass at `cfg` leaves (each hypothesis's acoustic and LM scores, its words, and the larger
    LM's score of them, taken once)."""
    word_lm = WordLM(tokenizer, lm, cfg)
    rescorer = Rescorer(word_lm.words, RescoreConfig(second, nbest=nbest))  # its LM's scores only
    decoder = Decoder(tokenizer, word_lm)  # the first pass: its finals ranked by flashlight's own score
    lists = []  # per utterance: (acoustic, first LM, second LM, words, text) of each hypothesis
    for lp in logprobs:
        search = decoder.search()
        search.push(lp)
        search.final()
        hypotheses = [hyp for _, hyp in search.ranked[:nbest]]
        lists.append([(hyp.emittingModelScore, hyp.lmScore, second, len(labels), decoder.text(tokens))
                      for hyp, (labels, second), (_, tokens) in zip(hypotheses, rescorer.scored(hypotheses),
                                                                    search.alternatives(nbest))])
    grid = []
    for weight, first_weight, word_score in product(weights, first_weights, scores):
        texts = [max(rows, key=lambda r: r[0] + first_weight * r[1] + weight * r[2] + word_score * r[3])[4]
                 if rows else "" for rows in lists]
        scored = [score(ref, normalize(text)) for text, ref in zip(texts, refs)]
        words, chars = Score.total(w for w, _, _ in scored), Score.total(c for _, c, _ in scored)
        grid.append((weight, first_weight, word_score, words, chars))
        print(f"rescore_weight={weight:g} rescore_first_weight={first_weight:g} rescore_word_score={word_score:g} "
              f"WER={words.rate() * 100:.2f} CER={chars.rate() * 100:.2f}", flush=True)
    return grid


def cached_logprobs(cache: Path | None, compute) -> list[np.ndarray]:
    """The (T, V) log-probs saved in `cache`, else `compute()` (saved there when a path is given)."""
    if cache is not None and cache.is_file():
        with np.load(cache) as saved:
            return [saved[f"u{i}"] for i in range(len(saved.files))]
    logprobs = compute()
    if cache is not None:
        np.savez(cache, **{f"u{i}": lp for i, lp in enumerate(logprobs)})
    return logprobs


@interrupt.handled("training.lm.tune")
def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.training.lm.tune", __doc__)
    cli.add_manifest_args(parser)
    parser.add_argument("--lm", nargs="+", help="ARPA word LM(s) to compare; default: the bundled one")
    parser.add_argument("--lm-weights", type=cli.finite_float, nargs="+", default=[0.5, 1.0, 1.5])
    parser.add_argument("--word-scores", type=cli.finite_float, nargs="+", default=[-1.0, 0.0, 1.0])
    parser.add_argument("--beam-size", type=cli.positive_int, default=BeamConfig().beam_size)
    parser.add_argument("--lexicon-words", type=cli.positive_int, default=BeamConfig().lexicon_words,
                        help="the LM's most probable words the search may output (default: %(default)s; all if unset)")
    parser.add_argument("--rescore", metavar="LM", help="also tune the second pass with this LM (n-gram or neural), at the best "
                        "first-pass point")
    parser.add_argument("--rescore-weights", type=cli.finite_float, nargs="+", default=[0.5, 1.0, 1.5])
    parser.add_argument("--rescore-first-weights", type=cli.finite_float, nargs="+", default=[0.0, 0.5, 1.0])
    parser.add_argument("--rescore-word-scores", type=cli.finite_float, nargs="+", default=[-1.0, 0.0, 1.0])
    parser.add_argument("--nbest", type=cli.positive_int, default=RescoreConfig().nbest)
    parser.add_argument("--cache", type=Path, help="keep the acoustic log-probs in this .npz file and reuse them "
                        "when it exists (the same model, manifest, split and --limit)")
    args = parser.parse_args(argv)
    lms = args.lm or [path for path in [default_lm_path()] if path]
    rows = []
    try:
        if not lms:
            raise FileNotFoundError("no word LM is bundled; give one with --lm PATH")
        for lm in lms + ([args.rescore] if args.rescore else []):  # before the acoustic forward, which takes minutes
            if not Path(lm).is_file():
                raise FileNotFoundError(f"{lm}: no such LM file")
        skipped = cli.skipping(args)
        utterances = read_manifest(args.manifest, args.split, skipped=skipped)[: args.limit]
        cli.note_skipped("training.lm.tune", args.manifest, skipped)
        recognizer = cli.load_recognizer(args)
        logprobs = cached_logprobs(args.cache, lambda: [recognizer.offline_logprobs(load_audio(u.audio))
                                                        for u in utterances])
        refs = [normalize(u.text) for u in utterances]
        for lm in lms:
            if len(lms) > 1:
                print(f"lm={lm}", flush=True)
            rows += [(str(lm), *row) for row in grid_search(logprobs, refs, recognizer.tokenizer, str(lm),
                                                            args.lm_weights, args.word_scores, args.beam_size,
                                                            args.lexicon_words)]
        lm, weight, word_score, words, chars = min(rows, key=lambda r: (r[3].rate(), r[4].rate()))
        print(f"best: --lm {lm} --lm-weight {weight:g} --word-score {word_score:g} WER={words.rate() * 100:.2f} "
              f"CER={chars.rate() * 100:.2f} utts={len(logprobs)}", flush=True)
        if args.rescore:
            cfg = BeamConfig(args.beam_size, weight, word_score, lexicon_words=args.lexicon_words)
            grid = rescore_grid(logprobs, refs, recognizer.tokenizer, lm, cfg, args.rescore, args.rescore_weights,
                                args.rescore_first_weights, args.rescore_word_scores, args.nbest)
            *best, words, chars = min(grid, key=lambda r: (r[3].rate(), r[4].rate()))
            print(f"best second pass: --rescore-lm {args.rescore} --rescore-weight {best[0]:g} "
                  f"--rescore-first-weight {best[1]:g} --rescore-word-score {best[2]:g} WER={words.rate() * 100:.2f} "
                  f"CER={chars.rate() * 100:.2f} utts={len(logprobs)}")
    except (ManifestError, ModelError, AudioError, LMError, FileNotFoundError) as err:
        cli.error("training.lm.tune", err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
