"""Turn-taking: end of speech -> final, the endpointer's WER beside whole utterances, and cuts inside a sentence,
for several endpoint rules in one run (a developer bench).

    python scripts/bench/turns.py [--limit 150] [--sets dev|tune] [--rules default sentence lm=0.2,0.8,-1.5]
                                  [--model M] [--json OUT]

Each utterance of speechocean762 dev and LibriSpeech dev-clean-2 (`--limit N`: N spread evenly over each; `--sets
tune`: LibriSpeech speaker 8226 and speechocean762 train, the training-side data the rules' defaults were chosen on)
is played as a live stream with its own pauses, then 3 s of faint noise, through the tools' emission loop
(`asr.decoding.endpoint.emissions`: 500 ms chunks, early steps, the word-LM search and its second pass, plain words,
1 thread), under each rule: `fixed=S`
(`EndpointConfig.fixed(S)`: S seconds of silence whatever was said), `default` (`EndpointConfig()`, the tools' rule:
fixed=0.4), `sentence` (`EndpointConfig.by_sentence()`: the word LM judges), `lm=SHORT,LONG,LOGPROB` (that with
those three fields); each followed by `:alone` decodes every segment as a sentence of its own (`words_before=0`,
`mid_sentence=0`) instead of after the words of the finals before it, its end weighed. Per set and rule it prints:

- end of speech -> final: from the end of the utterance's last word to its final's emission (stream time plus
  compute), median and p95, and the medians of its parts: the rule (the segment's end after the word's), the
  chunk (the step that brings the final out after the segment's end: a frame is computed once the model's 480 ms
  lookahead chunk holding it has arrived) and the compute; and the utterances the endpointer never closed;
- WER of the finals, joined, beside the same utterances decoded whole (one search over each: `asr.evaluate --whole`);
- cuts: finals that end before the utterance does, and of those the ones inside a sentence, where the bundled
  restorer reading the reference puts no sentence end after the word the cut follows (the references carry no
  punctuation; each speechocean762 utterance is one sentence, a LibriSpeech one may hold several).

Delays are stream time plus this machine's compute: measured on a busy machine, only their rule and chunk parts
(a function of the audio) carry over.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the `bench` package

import jiwer  # noqa: E402
import numpy as np  # noqa: E402

from asr.audio import SAMPLE_RATE  # noqa: E402
from asr.audio.chunks import rechunk  # noqa: E402
from asr.audio.files import load_audio  # noqa: E402
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.corpus.scoring import Score, score  # noqa: E402
from asr.decoding.decoder import Decoder  # noqa: E402
from asr.decoding.endpoint import EndpointConfig, Emission, emissions  # noqa: E402
from asr.model.recognizer import Recognizer  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402
from asr.text.restore.labels import ENDS  # noqa: E402
from asr.text.restore.restorer import Restorer, load_restorer  # noqa: E402
from bench.data import SETS, SHARED, Clip, EvalSet  # noqa: E402
from bench.ours import PAD_S, percentiles, recognize  # noqa: E402

CHUNK = 8000  # 500 ms at 16 kHz, as the tools step
DEV = ("speechocean762-dev", "librispeech-dev-clean-2")
TUNE = [EvalSet("librispeech-8226", SHARED / "librispeech" / "train-clean-100-4spk.jsonl",
                note="LibriSpeech speaker 8226, held out of every training mixture"),
        EvalSet("speechocean762-train", SHARED / "speechocean762" / "train.jsonl", note="seen in training")]


def rule(spec: str) -> EndpointConfig:
    """fixed=S, default, sentence, or lm=SHORT,LONG,LOGPROB, each optionally followed by :alone -> its EndpointConfig
    (ValueError with the reason)."""
    spec, alone = spec.removesuffix(":alone"), spec.endswith(":alone")
    cfg = _rule(spec)
    return replace(cfg, words_before=0, mid_sentence=0.0) if alone else cfg


def _rule(spec: str) -> EndpointConfig:
    name, _, value = spec.partition("=")
    if name == "default" and not value:
        return EndpointConfig()
    if name == "sentence" and not value:
        return EndpointConfig.by_sentence()
    if name == "fixed":
        return EndpointConfig.fixed(float(value)).validate()
    if name == "lm" and len(parts := value.split(",")) == 3:
        short, long, logprob = map(float, parts)
        return EndpointConfig.by_sentence(sentence_end_silence=short, mid_phrase_silence=long,
                                          sentence_end_logprob=logprob).validate()
    raise ValueError(f"a rule is fixed=S, default, sentence or lm=SHORT,LONG,LOGPROB, then :alone or not "
                     f"(got {spec!r})")


@dataclass
class Tally:
    """One rule's figures over one set."""

    delays: list[float] = field(default_factory=list)  # end of speech -> final, s
    parts: dict[str, list[float]] = field(default_factory=lambda: {"rule": [], "chunk": [], "compute": []})
    not_endpointed: int = 0
    words: Score = field(default_factory=Score)
    cuts: int = 0  # finals ending before their utterance does
    inside: int | None = 0  # ... of which inside a sentence (None: not told, without the restorer)

    def row(self) -> dict:
        delay = percentiles(self.delays)
        return {"n": delay["n"], "median_s": delay["median"], "p95_s": delay["p95"],
                **{f"{part}_median_s": float(np.median(v)) if v else 0.0 for part, v in self.parts.items()},
                "not_endpointed": self.not_endpointed, "wer": 100 * self.words.rate(), "cuts": self.cuts,
                "cuts_inside_sentence": self.inside}


def sentence_ends(restorer: Restorer, ref: list[str]) -> set[int]:
    """The reference positions (words before) at which a sentence ends, as the restorer punctuates it."""
    if not ref:
        return {0}
    _, marks = restorer.labels(ref)
    return {i + 1 for i, mark in enumerate(marks) if mark in ENDS} | {len(ref)}


def ref_position(ref: str, hyp: str, k: int) -> int:
    """The reference words before the cut that follows the first `k` words of `hyp`, by their alignment (words
    the hypothesis left out right at the cut count as after it)."""
    if not ref or not hyp:
        return 0
    position = 0
    for chunk in jiwer.process_words(ref, hyp).alignments[0]:
        if chunk.hyp_start_idx >= k:
            break
        if chunk.hyp_end_idx <= k or chunk.type == "delete":  # wholly before the cut
            position = chunk.ref_end_idx
        else:  # the cut falls inside this chunk
            return chunk.ref_start_idx + (k - chunk.hyp_start_idx if chunk.type != "insert" else 0)
    return position


def tally_clip(tally: Tally, clip: Clip, finals: list[Emission], total_s: float, restorer: Restorer | None) -> None:
    """One stream's finals into `tally`: its delay and parts, its words, its cuts."""
    ref = normalize(clip.text)
    texts = [normalize(e.text) for e in finals]
    tally.words.add(score(ref, " ".join(texts))[0])
    timed = [e for e in finals if e.words]
    if timed and timed[-1].time < total_s:  # the endpointer closed it (not the end of the input)
        last = timed[-1]
        rule_s, chunk_s, compute_s = last.end - last.words[-1].end, last.time - last.end, last.compute_ms / 1000
        tally.delays.append(rule_s + chunk_s + compute_s)
        for part, value in zip(("rule", "chunk", "compute"), (rule_s, chunk_s, compute_s)):
            tally.parts[part].append(value)
    elif timed:
        tally.not_endpointed += 1
    hyp, counts = " ".join(texts), np.cumsum([len(t.split()) for t in texts])
    ends = sentence_ends(restorer, ref.split()) if restorer is not None else set()
    for k in counts[:-1]:
        tally.cuts += 1
        if restorer is not None:
            tally.inside += ref_position(ref, hyp, int(k)) not in ends


def run(recognizer: Recognizer, decoder: Decoder, clips: list[Clip], rules: dict[str, EndpointConfig],
        restorer: Restorer | None) -> dict[str, dict]:
    """Every rule over `clips`, and the whole-utterance WER under the name "whole"."""
    rng = np.random.default_rng(0)
    tallies = {name: Tally(inside=None if restorer is None else 0) for name in rules}
    whole = Score()
    for clip in clips:
        whole.add(score(normalize(clip.text), normalize(recognize(recognizer, clip.wave, decoder)))[0])
        pad = (1e-3 * rng.standard_normal(round(PAD_S * SAMPLE_RATE))).astype(np.float32)
        wave = np.concatenate([clip.wave, pad])
        for name, cfg in rules.items():
            finals = [e for e in emissions(recognizer, rechunk([wave], CHUNK), decoder, cfg) if e.is_final]
            tally_clip(tallies[name], clip, finals, wave.size / SAMPLE_RATE, restorer)
    return {"whole": {"wer": 100 * whole.rate()}, **{name: t.row() for name, t in tallies.items()}}


def table(results: dict[str, dict[str, dict]], counts: dict[str, int]) -> str:
    lines = ["| set | rule | end of speech -> final median / p95 (s) | parts: rule / chunk / compute (median, s) | "
             "not endpointed | WER (whole) | cuts (inside a sentence) |", "|---|---|---|---|---:|---|---|"]
    for set_name, rows in results.items():
        whole = rows["whole"]["wer"]
        for name, r in rows.items():
            if name == "whole":
                continue
            lines.append(f"| {set_name} ({counts[set_name]}) | {name} | {r['median_s']:.2f} / {r['p95_s']:.2f} | "
                         f"{r['rule_median_s']:.2f} / {r['chunk_median_s']:.2f} / {r['compute_median_s']:.3f} | "
                         f"{r['not_endpointed']} | {r['wer']:.2f} ({whole:.2f}) | "
                         f"{r['cuts']} ({'-' if r['cuts_inside_sentence'] is None else r['cuts_inside_sentence']}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/bench/turns.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="the acoustic model (default: the bundled one, with the bundled LM)")
    p.add_argument("--sets", choices=("dev", "tune"), default="dev",
                   help="dev: speechocean762 dev and dev-clean-2; tune: speaker 8226 and speechocean762 train")
    p.add_argument("--rules", nargs="+", default=["default", "sentence"],
                   help="fixed=S, default, sentence, lm=SHORT,LONG,LOGPROB (default: default sentence)")
    p.add_argument("--limit", type=int, help="utterances per set, spread evenly over it (default: all)")
    p.add_argument("--no-restorer", action="store_true", help="count cuts without telling where a sentence ends")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    try:
        rules = {spec: rule(spec) for spec in args.rules}
    except ValueError as err:
        p.error(str(err))
    recognizer = Recognizer.load(args.model, threads=1)
    decoder = Decoder.load(recognizer.tokenizer, "bundled", restorer=None)
    restorer = None if args.no_restorer else load_restorer()
    results, counts = {}, {}
    for eval_set in [s for s in SETS if s.name in DEV] if args.sets == "dev" else TUNE:
        clips = clips_of(eval_set, args.limit)
        if not clips:
            print(f"turns: {eval_set.name}: not there ({eval_set.manifest}), skipped", file=sys.stderr)
            continue
        results[eval_set.name], counts[eval_set.name] = run(recognizer, decoder, clips, rules, restorer), len(clips)
        print(f"turns: {eval_set.name} done", file=sys.stderr, flush=True)
    if not results:
        p.error("none of the sets is there (../shared/data)")
    print(table(results, counts))
    if args.json:
        args.json.write_text(json.dumps({"limit": args.limit, "counts": counts, "results": results}, indent=1) + "\n")
    return 0


def clips_of(eval_set: EvalSet, limit: int | None) -> list[Clip]:
    """`limit` utterances spread evenly over the set (every k-th; None: all); speaker 8226's alone in its manifest."""
    utterances = read_manifest(eval_set.manifest, eval_set.split) if eval_set.manifest.is_file() else []
    if eval_set.name == "librispeech-8226":
        utterances = [u for u in utterances if u.speaker == "8226"]
    if limit is not None:
        utterances = utterances[::max(1, len(utterances) // limit)][:limit]
    return [Clip(str(u.audio.relative_to(eval_set.manifest.parent)), u.text, load_audio(u.audio)) for u in utterances]


if __name__ == "__main__":
    sys.exit(main())
