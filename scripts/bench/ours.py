"""Measurements of our recognizer beside its accuracy (which `bench.accuracy` scores as asr.evaluate does): word and
endpointing delays, the compute of a stream's chunks, and speed."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from asr.audio import SAMPLE_RATE
from asr.audio.chunks import rechunk
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import EndpointConfig, emissions
from asr.model.recognizer import Recognizer

from bench.data import Clip


@contextmanager
def cpu_timed(owner: Any, name: str, spent: dict[str, float], part: str) -> Iterator[None]:
    """While the block runs, every call of `owner.name` (a module's function, a class's or an object's method)
    adds its CPU seconds (this process, all threads) to spent[part]; the original is put back after."""
    original, own = getattr(owner, name), name in vars(owner)

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[part] += time.process_time() - began

    setattr(owner, name, timed)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, original)
        else:  # an object's method, found on its class: the object's own attribute goes again
            delattr(owner, name)


def percentiles(values: list[float]) -> dict:
    """median, p95 and max of a list (zeros for an empty one)."""
    if not values:
        return {"n": 0, "median": 0.0, "p95": 0.0, "max": 0.0}
    return {"n": len(values), "median": float(np.median(values)), "p95": float(np.percentile(values, 95)),
            "max": float(np.max(values))}


def recognize(recognizer: Recognizer, wave: np.ndarray, decoder: Decoder) -> str:
    """The plain text of one waveform decoded whole: the whole-utterance forward, then one search over all of it
    (no endpoint cuts, no restoration: the speed section's whole-utterance decode, not what asr.transcribe prints
    for a long utterance; asr.evaluate scores that, and `bench.accuracy` with it)."""
    return decoder.text(decoder.decode(recognizer.offline_logprobs(wave)))


def stream_clip(recognizer: Recognizer, decoder: Decoder, wave: np.ndarray,
                chunk: int) -> tuple[str, list[float], list[float]]:
    """Stream one waveform as asr.stream does: (final text, per-chunk compute ms, per-word delay s).

    A chunk's compute is the model's step plus the decoder's: feeding the search and reading the
    partial. A word's delay is the time from its end in the audio (its last token's frame, from the
    word times) until it is on screen: the end of the chunk whose step produced that frame, as a live
    microphone would deliver it, plus that step's compute time."""
    frames_after, ready_s, times, search = [], [], [], decoder.search()
    for step in recognizer.stream(rechunk([wave], chunk)):
        began = time.perf_counter()
        search.push(step.logprobs)
        if not step.tail:
            decoder.text(search.best())
        compute_ms = step.compute_ms + (time.perf_counter() - began) * 1000
        frames_after.append(step.state.frames)
        ready_s.append(step.heard / SAMPLE_RATE + compute_ms / 1000)  # the tail: when the audio ended
        if not step.tail:
            times.append(compute_ms)
    tokens, duration = search.final(), wave.size / SAMPLE_RATE
    fs = recognizer.frame_seconds
    delays = []
    for word in decoder.words(tokens, fs):
        last_frame = round(word.end / fs) - 1
        k = next(i for i, frames in enumerate(frames_after) if frames > last_frame)
        delays.append(ready_s[k] - min(word.end, duration))  # a word the tail flushed ended with the audio
    return decoder.text(tokens), times, delays


PAD_S = 3.0  # faint noise after each utterance for the endpointer to fire in


def endpoint_stats(delays: list[float], not_fired: int) -> dict:
    return {**percentiles(delays), "not_endpointed": not_fired, "pad_s": PAD_S}


def endpoint_delays(recognizer: Recognizer, decoder: Decoder, clips: list[Clip], chunk: int,
                    pad_s: float = PAD_S, cfg: EndpointConfig | None = None) -> tuple[list[float], int]:
    """End of speech -> final result through the real emission loop (asr.decoding.endpoint.emissions).

    Each clip is followed by `pad_s` of faint noise, as a live stream would continue; the delay is
    from the end of the segment's last word (word times) to the moment its final emission is
    ready (the chunk's delivery time plus its compute, model and decoder together, as asr.stream
    runs). Returns the delays (s) and the number of
    utterances whose last segment was only closed by the end of the input (the endpointer never fired).
    `cfg`: the endpointing (default: the tools' `EndpointConfig()`)."""
    rng = np.random.default_rng(0)
    delays, not_fired = [], 0
    for clip in clips:
        pad = (1e-3 * rng.standard_normal(round(pad_s * SAMPLE_RATE))).astype(np.float32)
        wave = np.concatenate([clip.wave, pad])
        total = wave.size / SAMPLE_RATE
        finals = [e for e in emissions(recognizer, rechunk([wave], chunk), decoder, cfg) if e.is_final and e.words]
        if not finals:
            continue
        last = finals[-1]
        if last.compute_ms == 0.0 and last.time >= total:
            not_fired += 1
            continue
        delays.append(last.time + last.compute_ms / 1000 - last.words[-1].end)
    return delays, not_fired


def thread_rtf(recognizer: Recognizer, decoder: Decoder, clips: list[Clip], chunk: int, threads: list[int]) -> list[dict]:
    """Real-time factor of streaming and of whole-utterance decoding with each torch thread count."""
    import torch  # noqa: PLC0415 (this module also runs where torch is not installed)

    rows, saved = [], torch.get_num_threads()
    audio = sum(c.seconds for c in clips)
    for n in threads:
        torch.set_num_threads(n)
        stream_clip(recognizer, decoder, clips[0].wave, chunk)  # warm-up for this thread count
        began = time.perf_counter()
        for clip in clips:
            stream_clip(recognizer, decoder, clip.wave, chunk)
        streaming = time.perf_counter() - began
        began = time.perf_counter()
        for clip in clips:
            recognize(recognizer, clip.wave, decoder)
        offline = time.perf_counter() - began
        rows.append({"threads": n, "audio_s": audio, "streaming_rtf": streaming / audio, "offline_rtf": offline / audio})
    torch.set_num_threads(saved)
    return rows


def batch_throughput(model: Path | None, manifest: Path, audio_s: float, files: int, threads: int) -> dict:
    """Wall time of the batch CLI (`python -m asr.transcribe MANIFEST`) in a fresh process, model load included."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    args = [sys.executable, "-m", "asr.transcribe", str(manifest)] + (["--model", str(model)] if model else [])
    began = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return {"files": files, "audio_s": audio_s, "wall_s": wall, "threads": threads,
            "files_per_s": files / wall, "audio_s_per_s": audio_s / wall}
