"""Where the CPU goes in the per-file and the batched transcription paths, and how fast the encoder runs in each.

    python scripts/bench/split.py [--manifest ../shared/data/speechocean762/dev.jsonl] [--limit 500]
                                  [--greedy] [--repeats 2]

One process, one thread, the model loaded once: the manifest's first `--limit` files through the per-file path
(`Transcriber.transcribe`, 2 s steps, what `--batch-seconds 0` runs) and through the batched one
(`transcribe_batched` with the default batch, decoding inline as a `--jobs` worker does), each timed in CPU
seconds of this process and split into

  encoder    the backend's step (`step_many`: the model graph over padded rows)
  features   log-mel frames (`stream_fbank`)
  search     the CTC search fed window by window (greedy, or beam + word LM)
  finals     each segment's final: words, confidences, alternatives, the restorer (`Decoder.finish`)
  the rest   reading and decoding the audio, endpointing, batching, Python between them

The encoder's arithmetic comes from torch's FLOP counter over the model's step, so its rate (GFLOP per
CPU-second) can be set against the machine's float32 matmul rate (bench/quiet.py). The last line is the
speed-up two ideal one-core workers would give over the per-file path: what `--jobs 2` can reach on 2 cores
before process start and model loading, which both paths pay once. Prints; writes nothing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts/ folder: `bench` package

import asr.model.recognizer  # noqa: E402
from asr.api import Transcriber, load  # noqa: E402
from asr.batch.padded import DEFAULT_BATCH_SECONDS, transcribe_batched  # noqa: E402
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.decoding.decoder import Decoder  # noqa: E402
from bench import quiet  # noqa: E402
from bench.ours import cpu_timed  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT.parent / "shared" / "data" / "speechocean762" / "dev.jsonl"
PARTS = ("encoder", "features", "search", "finals")


def split(model: Transcriber, run: Callable[[], list[str]]) -> tuple[dict[str, float], list[str]]:
    """`run()` -> (CPU seconds: its total and each of PARTS, the rest; the texts it returned)."""
    spent = dict.fromkeys(PARTS, 0.0)
    search = type(model.decoder.search())
    with cpu_timed(type(model.recognizer.model), "step_many", spent, "encoder"), \
            cpu_timed(asr.model.recognizer, "stream_fbank", spent, "features"), \
            cpu_timed(search, "push", spent, "search"), cpu_timed(Decoder, "finish", spent, "finals"):
        began = time.process_time()
        texts = run()
        spent["total"] = time.process_time() - began
    spent["the rest"] = spent["total"] - sum(spent[p] for p in PARTS)
    return spent, texts


def encoder_gflop(audio_seconds: float) -> float:
    """GFLOP of the model's arithmetic (matrix products, convolutions, attention) for `audio_seconds` of
    audio, counted by torch over 4 s steps with a full cache (the bundled model's torch weights)."""
    import torch  # noqa: PLC0415
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415

    from asr.model.loader import load_model  # noqa: PLC0415
    encoder = load_model()[0].eval()
    step, state = 400, encoder.initial_state(1)
    with torch.no_grad():
        for _ in range(3):  # fill the cache
            _, state = encoder.step(torch.zeros(1, step, encoder.cfg.n_mels), state)
        with FlopCounterMode(display=False) as counter:
            encoder.step(torch.zeros(1, step, encoder.cfg.n_mels), state)
    return counter.get_total_flops() / (step / 100) * audio_seconds / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=DEV, help="utterances (default: speechocean762 dev)")
    parser.add_argument("--limit", type=int, default=500, help="its first N files (default 500)")
    parser.add_argument("--greedy", action="store_true", help="greedy CTC instead of the beam search + word LM")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each path; the fastest counts (default 2)")
    args = parser.parse_args(argv)
    if not args.manifest.is_file():
        parser.error(f"{args.manifest}: no such manifest")
    rows = read_manifest(args.manifest)[:args.limit]
    files = [str(Path(r.audio).resolve()) for r in rows]
    seconds = [r.duration for r in rows]
    audio = sum(s or 0.0 for s in seconds)
    model = load(greedy=args.greedy, beam=not args.greedy)
    print(f"split: {len(files)} files, {audio / 60:.1f} min of audio, {model.decoder.kind}, "
          f"load {quiet.load_now()}, {quiet.machine()}")
    paths = {"per-file": lambda: [model.transcribe(f).text for f in files],
             "batched": lambda: [t.text for _, t in transcribe_batched(model, files, DEFAULT_BATCH_SECONDS,
                                                                       seconds=seconds, decode_thread=False)]}
    best: dict[str, dict[str, float]] = {}
    texts: dict[str, list[str]] = {}
    for _ in range(args.repeats):
        for name, run in paths.items():
            spent, texts[name] = split(model, run)
            if name not in best or spent["total"] < best[name]["total"]:
                best[name] = spent
    gflop = encoder_gflop(audio)
    print(f"{'CPU-s':10}" + "".join(f"{p:>10}" for p in (*PARTS, "the rest", "total")) + f"{'encoder GFLOP/s':>17}")
    for name, spent in best.items():
        print(f"{name:10}" + "".join(f"{spent[p]:10.2f}" for p in (*PARTS, "the rest", "total"))
              + f"{gflop / spent['encoder']:17.0f}")
    differ = sum(a != b for a, b in zip(texts["per-file"], texts["batched"]))
    print(f"encoder: {gflop:.0f} GFLOP for this audio; texts differing: {differ} of {len(files)}")
    print(f"two ideal one-core workers: per-file total / (batched total / 2) = "
          f"{best['per-file']['total'] / (best['batched']['total'] / 2):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
