"""The peak memory of the second pass on long finals: the torch-free `asr.transcribe` on ~30 s of continuous speech.

    python scripts/bench/second_pass_memory.py [--seconds 30] [--server] [--checkout DIR] [--out DIR]

Makes a file of continuous speech: LibriSpeech dev-clean-2 utterances of one chapter, each without its pauses
(quiet stretches cut to 100 ms) and joined without any. Then measures the peak RSS (`bench/peak.py`) of
`python -m asr.transcribe --backend onnx` on it with the second pass and without it (--no-rescore), and gives the
segments each made: once as the tools cut it (finals of up to 20 s), once as one segment (--trailing-silence 10
--max-segment 60: one ~100-word final, its 64-best ranked again at once). --checkout runs asr.transcribe from
another copy of the project (one at an older commit: before and after in one run). With --server: the RSS of one
`asr.serve` worker (--workers 1, this checkout's) idle as it starts and idle after it has transcribed the file once
(POST /v1/audio/transcriptions, which loads the second pass's LM). Peak RSS does not depend on the machine's load,
so these figures are valid on a busy machine; no time is measured. Writes OUT/second_pass_memory.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.request import Request, urlopen

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts/ folder: `bench` package

from asr.audio.files import load_audio  # noqa: E402
from bench import peak  # noqa: E402
from bench.server_process import ROOT, ServerUnderTest  # noqa: E402

DEV = ROOT.parent / "shared" / "data" / "librispeech" / "dev-clean-2.jsonl"
CHAPTER = "1272-135031"  # the first chapter of dev-clean-2 (one speaker reading on)


def tightened(wave: np.ndarray, floor_db: float = 30.0, longest: int = 4, frame: int = 400) -> np.ndarray:
    """`wave` without its pauses: 25 ms frames more than `floor_db` below its loudest are quiet; the quiet frames at
    its ends go, and a run of them inside is cut to `longest` frames (100 ms, well under the endpointer's 0.4 s)."""
    frames = wave[: len(wave) // frame * frame].reshape(-1, frame)
    energy = 10 * np.log10((frames ** 2).mean(1) + 1e-12)
    loud = energy > energy.max() - floor_db
    keep, quiet_run = np.zeros(len(frames), bool), 0
    first, last = np.flatnonzero(loud)[[0, -1]]
    for i in range(first, last + 1):
        quiet_run = 0 if loud[i] else quiet_run + 1
        keep[i] = quiet_run <= longest
    return frames[keep].reshape(-1)


def continuous_speech(path: Path, seconds: float) -> tuple[float, str]:
    """Writes at least `seconds` of the chapter's utterances, trimmed and joined, to `path`; (its length, the
    reference words)."""
    rows = [json.loads(line) for line in DEV.read_text().splitlines()]
    rows = [row for row in rows if Path(row["audio"]).name.startswith(CHAPTER)]
    waves, texts = [], []
    for row in rows:
        waves.append(tightened(load_audio(DEV.parent / row["audio"])))
        texts.append(row["text"])
        if sum(map(len, waves)) >= seconds * 16000:
            break
    wave = np.concatenate(waves)
    sf.write(path, wave, 16000)
    return len(wave) / 16000, " ".join(texts)


ONE_FINAL = ("--trailing-silence", "10", "--max-segment", "60")  # the whole file one segment: its longest final


def transcribe_peak(audio: Path, folder: Path, checkout: Path, *options: str) -> dict:
    """Peak RSS (MB) of the torch-free asr.transcribe (of `checkout`) on `audio`, and the segments it printed."""
    report, out = folder / "peak.txt", folder / "out.jsonl"
    with open(out, "w") as stdout:
        subprocess.run(peak.command(report, "asr.transcribe", "--backend", "onnx", "--format", "json", *options,
                                    str(audio)), cwd=checkout, stdout=stdout, stderr=subprocess.DEVNULL, check=True)
    result = json.loads(out.read_text())
    return {"peak_rss_mb": round(peak.read_mb(report), 1), "segments": len(result["segments"]),
            "words": len(result["words"])}


def upload(port: int, audio: Path) -> str:
    """The text of one POST /v1/audio/transcriptions of `audio`."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{audio.name}\"\r\n"
            "Content-Type: audio/wav\r\n\r\n").encode() + audio.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
    request = Request(f"http://127.0.0.1:{port}/v1/audio/transcriptions", body,
                      {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urlopen(request, timeout=600) as response:
        return json.loads(response.read())["text"]


def server_rss(audio: Path) -> dict:
    """RSS (MB) of one asr.serve worker: idle at start, then idle after it has transcribed `audio`."""
    server = ServerUnderTest(["--workers", "1"])
    try:
        started = server.rss_mb()[0]
        upload(server.port, audio)
        return {"idle_rss_mb": started, "after_one_file_rss_mb": server.rss_mb()[0],
                "after_one_file_peak_mb": server.rss_mb("VmHWM")[0]}
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the continuous speech (at least)")
    parser.add_argument("--out", type=Path, help="folder for second_pass_memory.json (default: print only)")
    parser.add_argument("--server", action="store_true", help="also an idle asr.serve worker's RSS")
    parser.add_argument("--checkout", type=Path, default=ROOT,
                        help="run asr.transcribe from this copy of the project (e.g. one at an older commit, to "
                             "compare; default: this one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        audio = folder / "continuous.wav"
        seconds, _ = continuous_speech(audio, args.seconds)
        result = {"audio_s": round(seconds, 2), "chapter": CHAPTER, "checkout": str(args.checkout)}
        for name, endpointing in (("tools' segments", ()), ("one final", ONE_FINAL)):
            result[name] = {"second_pass": transcribe_peak(audio, folder, args.checkout, *endpointing),
                            "first_pass_alone": transcribe_peak(audio, folder, args.checkout, *endpointing,
                                                                "--no-rescore")}
        if args.server:
            result["server_worker"] = server_rss(audio)
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "second_pass_memory.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
