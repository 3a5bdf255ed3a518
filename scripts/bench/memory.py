"""Peak memory of one long stream, run in a fresh process so its peak RSS is its own.

    python scripts/bench/memory.py --minutes 60 [--model PATH] [--lm bundled|none|LM.arpa] [--chunk-ms 500]

Makes `--minutes` of audio by cycling through real speechocean762 dev utterances (generated on
the fly, so the audio itself takes no memory), feeds it in 500 ms chunks through the streaming
emission loop (asr.decoding.endpoint.emissions, which calls Recognizer.step), and prints one JSON line:
RSS after loading the model, the peak (VmHWM: ru_maxrss would carry the starting process's peak
across exec), RSS samples along the way, and the chunk compute times early and late in the stream
(latency must not grow either).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts/ folder: `bench` package

from asr.audio import SAMPLE_RATE  # noqa: E402
from asr.decoding.decoder import Decoder  # noqa: E402
from asr.decoding.endpoint import emissions  # noqa: E402
from asr.model.recognizer import Recognizer  # noqa: E402
from bench.data import SETS, Clip, EvalSet, load_set, looped_chunks  # noqa: E402
from bench.ours import percentiles  # noqa: E402
from bench.server_process import proc_rss_mb  # noqa: E402


def source_clips(count: int, manifest: Path | None = None) -> list[Clip]:
    """Real utterances to loop (from `manifest`, else the first default set that is here);
    a tone-and-noise stand-in if there are none."""
    for eval_set in [EvalSet(manifest.stem, manifest)] if manifest else SETS:
        clips, _ = load_set(eval_set, count)
        if clips:
            return clips
    t = np.arange(SAMPLE_RATE * 2) / SAMPLE_RATE
    noise = np.random.default_rng(0).standard_normal(t.size)
    return [Clip("tone", "", (0.3 * np.sin(2 * np.pi * 440 * t) + 0.01 * noise).astype(np.float32))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--model", help="model file; default: the bundled model (decoded with its word LM)")
    parser.add_argument("--lm", help="the search's word LM: 'bundled', 'none' (greedy; a phone model's lexicon search) "
                                     "or an ARPA file (default: bundled with the bundled model, none with --model)")
    parser.add_argument("--chunk-ms", type=float, default=500.0)
    parser.add_argument("--clips", type=int, default=40, help="distinct utterances to cycle through")
    parser.add_argument("--source", type=Path, help="manifest of the utterances to loop (default: the dev set)")
    args = parser.parse_args(argv)
    recognizer = Recognizer.load(args.model, threads=1)
    lm = args.lm or ("bundled" if args.model is None else "none")
    decoder = Decoder.load(recognizer.tokenizer, None if lm == "none" else lm)
    clips = source_clips(args.clips, args.source)
    chunk = round(args.chunk_ms * SAMPLE_RATE / 1000)
    for _ in emissions(recognizer, looped_chunks(clips, 5.0, chunk), decoder):  # warm-up
        pass
    start_mb = proc_rss_mb(os.getpid())
    total_chunks = -(-round(args.minutes * 60 * SAMPLE_RATE) // chunk)
    marks = {max(1, round(total_chunks * f / 10)) for f in range(1, 11)}
    samples, times, seen, finals = [], [], 0, 0

    def counted(chunks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        nonlocal seen
        for piece in chunks:
            yield piece
            seen += 1
            if seen in marks:
                samples.append({"minutes": seen * chunk / SAMPLE_RATE / 60, "rss_mb": proc_rss_mb(os.getpid())})

    began = time.perf_counter()
    last_chunk = -1
    for emission in emissions(recognizer, counted(looped_chunks(clips, args.minutes * 60, chunk)), decoder):
        finals += emission.is_final
        if not emission.is_final and seen != last_chunk:  # a chunk that changed the text: its partial has its compute
            times.append(emission.compute_ms)
            last_chunk = seen
    wall = time.perf_counter() - began
    tenth = max(1, len(times) // 10)
    print(json.dumps({
        "minutes": args.minutes, "start_rss_mb": start_mb, "vmhwm_mb": proc_rss_mb(os.getpid(), "VmHWM"),
        "rss_samples": samples,
        "wall_s": wall, "rtf": wall / (args.minutes * 60), "finals": finals,
        "chunk_ms_first_10pct": percentiles(times[:tenth]), "chunk_ms_last_10pct": percentiles(times[-tenth:])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
