"""End of speech -> final for two models in one run, at one or more trailing silences (a developer bench).

    python scripts/bench/finals.py [--model M] [--baseline M2 --baseline-lm LM2 --baseline-lm-weight W2
                                   --baseline-word-score S2]
                                   [--trailing-silence 0.4 0.3] [--limit 30] [--rescore-off-too]

Streams the first --limit utterances of speechocean762 dev and LibriSpeech dev-clean-2, each followed by 3 s of
faint noise, through the tools' emission loop in 500 ms chunks (the word-LM search, endpointing, 1 thread), as
`scripts/benchmark.py` measures its end of speech -> final (bench.ours.endpoint_delays), and prints per model and
rule (the tools' rules, as the word LM judges, or each --trailing-silence fixed: `EndpointConfig.fixed`): the delay
from the last word's end to its final (median, p95) and how many utterances the endpointer closed (the others ended
only with the input); `scripts/bench/turns.py` adds the WER and the cuts. A
model with lookahead computes a chunk's frames only once the whole chunk has arrived, so its endpoints wait for
the end of the chunk that holds them: this puts the cost of that wait beside a model that has none.
M: a .safetensors file or an exported ONNX folder (default: the bundled model, with the bundled LM and weight).
--rescore-off-too also measures each model without its second pass (`--no-rescore`), right after it with it.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the `bench` package

from asr.decoding.beam import BeamConfig  # noqa: E402
from asr.decoding.decoder import Decoder  # noqa: E402
from asr.decoding.endpoint import EndpointConfig  # noqa: E402
from asr.decoding.rescore import RescoreConfig  # noqa: E402
from asr.model.recognizer import Recognizer  # noqa: E402
from bench.data import SETS, load_set  # noqa: E402
from bench.ours import endpoint_delays, endpoint_stats  # noqa: E402

CHUNK = 8000  # 500 ms at 16 kHz, as the tools step
SET_NAMES = ("speechocean762-dev", "librispeech-dev-clean-2")


def finals_row(recognizer: Recognizer, decoder: Decoder, clips: list, trailing_silence: float | None) -> dict:
    """End of speech -> final as the benchmark reports it (`endpoint_stats`: n endpointed, median, p95, max in s,
    not_endpointed), with a fixed trailing silence (`EndpointConfig.fixed`) or, for None, the tools' rules."""
    cfg = EndpointConfig() if trailing_silence is None else EndpointConfig.fixed(trailing_silence)
    return endpoint_stats(*endpoint_delays(recognizer, decoder, clips, CHUNK, cfg=cfg))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/bench/finals.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="the model measured first (default: the bundled one)")
    p.add_argument("--baseline", help="a second model, measured the same way right after")
    p.add_argument("--baseline-lm", help="the second model's word LM (default: the bundled one)")
    p.add_argument("--baseline-lm-weight", type=float, default=BeamConfig().lm_weight)
    p.add_argument("--baseline-word-score", type=float, default=BeamConfig().word_score)
    p.add_argument("--trailing-silence", type=float, nargs="+", default=[None],
                   help="fixed trailing silences (default: the tools' rule, a fixed 0.4 s; scripts/bench/turns.py "
                        "compares it with the word LM's judgement)")
    p.add_argument("--limit", type=int, default=30, help="utterances per set")
    p.add_argument("--rescore-off-too", action="store_true", help="each model also without its second pass")
    args = p.parse_args(argv)
    clips = [clip for s in SETS if s.name in SET_NAMES for clip in load_set(s, args.limit)[0]]
    if not clips:
        p.error(f"none of {', '.join(SET_NAMES)} is there (../shared/data)")
    models = [(args.model or "bundled", args.model, "bundled", BeamConfig())]
    if args.baseline:
        models.append((args.baseline, args.baseline, args.baseline_lm or "bundled",
                       BeamConfig(lm_weight=args.baseline_lm_weight, word_score=args.baseline_word_score)))
    print(f"| model | trailing silence (s) | end of speech -> final median / p95 (s) | endpointed / not "
          f"({len(clips)} utterances) |\n|---|---:|---|---|")
    passes = [("", RescoreConfig())] + ([(", --no-rescore", RescoreConfig(lm=None))] if args.rescore_off_too else [])
    for name, path, lm, beam in models:
        recognizer = Recognizer.load(path, threads=1)
        for label, rescore in passes:
            decoder = Decoder.load(recognizer.tokenizer, lm, beam, restorer=None, rescore=rescore)
            for silence in args.trailing_silence:
                row = finals_row(recognizer, decoder, clips, silence)
                shown = "the tools' rule" if silence is None else f"{silence:g}"
                print(f"| {name}{label} | {shown} | {row['median']:.2f} / {row['p95']:.2f} | "
                      f"{row['n']} / {row['not_endpointed']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
