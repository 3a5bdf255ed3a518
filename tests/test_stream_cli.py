"""Endpointing, the shared emission loop and the `asr.stream --file` command line."""
from __future__ import annotations

import io
import json
import re
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from asr import stream
from asr.audio.chunks import rechunk
from asr.decoding.ctc import Token
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import EndpointConfig, Segmenter, emissions, end_frame
from asr.model.recognizer import Recognizer, StreamState
from asr.server.session import AudioBuffer
from asr.text.tokenizer import Tokenizer
from conftest import tone, write

FRAME = 640  # samples per encoder frame (40 ms)
CHAR = {c: i for i, c in enumerate(["<blank>", "<unk>", "|", "'"] + [chr(c) for c in range(65, 91)])}
SLOW = EndpointConfig(trailing_silence=1.2)  # the scripts below are written for 1.2 s of trailing silence


def one_hot(ids: np.ndarray) -> np.ndarray:
    """(T,) token ids -> (T, 30) log-probs that make each frame's id certain."""
    logprobs = np.full((len(ids), len(CHAR)), -20.0, np.float32)
    logprobs[np.arange(len(ids)), ids] = 0.0
    return logprobs


class ScriptedRecognizer(Recognizer):
    """Stands in for a model (Recognizer's own `stream` loop is kept): every 640 samples are one
    frame whose first sample is the token id (0 = blank), made certain in the log-probs. Lets tests
    place tokens exactly."""

    frame_seconds = 0.04
    lookahead_frames = 0  # strictly causal
    tokenizer = Tokenizer("char")

    def __init__(self) -> None:
        self.tail = np.zeros(5 * FRAME, np.float32)  # 5 blank frames = 0.2 s of silence unless a test sets it

    def initial_state(self) -> StreamState:
        return StreamState(pending=np.zeros(0, np.float32), model=None)

    def step(self, samples: np.ndarray, state: StreamState) -> tuple[np.ndarray, StreamState]:
        buffer = np.concatenate([state.pending, samples])
        count = buffer.size // FRAME
        logprobs = one_hot(buffer[:count * FRAME:FRAME].astype(int))
        return logprobs, replace(state, pending=buffer[count * FRAME:], frames=state.frames + count)

    def finish(self, state: StreamState) -> tuple[np.ndarray, StreamState]:
        return self.step(self.tail, state)

    def samples_for_frames(self, frames: int, final: bool = True) -> int:
        return frames * FRAME  # no lookahead: whether the stream ends does not matter


def script(*parts: tuple[str, float]) -> np.ndarray:
    """('HI', 1.0) = the letters of HI (one frame each, '|' for space) then 1.0 s of blank frames."""
    frames = []
    for text, silence in parts:
        frames += [CHAR[c] for c in text.replace(" ", "|")] + [0] * round(silence / 0.04)
    return np.repeat(np.array(frames, dtype=np.float32), FRAME)


def run(wave: np.ndarray, chunk: int = 8000, cfg: EndpointConfig = SLOW) -> list:
    return list(emissions(ScriptedRecognizer(), rechunk([wave], chunk), cfg=cfg))


def finals(emitted: list) -> list[tuple[int, str, float]]:
    return [(e.segment, e.text, round(e.end, 3)) for e in emitted if e.is_final]


def test_end_frame_rules() -> None:
    cfg, fs = SLOW, 0.04
    assert end_frame([], 0, 59, cfg, fs) is None
    assert end_frame([], 10, 100, cfg, fs) == 70  # 2.4 s with nothing decoded
    assert end_frame([Token(5, 3)], 0, 33, cfg, fs) is None
    assert end_frame([Token(5, 3)], 0, 34, cfg, fs) == 34  # 1.2 s after the last token
    assert end_frame([Token(5, 3), Token(6, 40)], 0, 100, cfg, fs) == 34  # the later token opens a new segment
    busy = [Token(5 + i % 2, i * 10) for i in range(60)]  # a token every 0.4 s
    assert end_frame(busy, 0, 600, cfg, fs) == 500  # 20 s maximum
    assert end_frame([Token(5, 3)], 0, 100, EndpointConfig(trailing_silence=0.4), fs) == 14  # the default 0.4 s
    at_least_2s = EndpointConfig(trailing_silence=0.4, min_segment=2.0)
    assert end_frame([Token(5, 3)], 0, 100, at_least_2s, fs) == 50  # not before the segment is 2 s long
    assert end_frame([Token(5, 3), Token(6, 30)], 0, 100, at_least_2s, fs) == 50


def test_segments_close_after_silence_and_at_end() -> None:
    wave = script(("HI", 1.5), ("THERE YOU", 0.3))
    emitted = run(wave)
    assert finals(emitted) == [(0, "HI", 1.28), (1, "THERE YOU", 2.28)]
    assert emitted[-1].is_final and emitted[-1].time == pytest.approx(len(wave) / 16000)  # at the end of the input
    first = next(e for e in emitted if e.segment == 1)
    assert first.start == pytest.approx(1.28)


def test_what_the_tail_flushes_ends_the_last_final() -> None:
    recognizer = ScriptedRecognizer()
    recognizer.tail = script(("S", 0.16))  # a letter the model only emits after the audio has ended
    emitted = list(emissions(recognizer, rechunk([script(("YE", 0.0))], 8000), cfg=SLOW))
    assert finals(emitted) == [(0, "YES", 0.08)]  # the segment ends with the audio, not in the tail
    assert "".join(e.new for e in emitted) == "YES"  # the final's `new` carries what the tail added


def test_finished_segments_never_change_and_new_adds_up() -> None:
    emitted = run(script(("AB", 0.1), (" CD", 1.3), ("EF GH", 2.0), ("IJ", 0.0)), chunk=1000)
    closed: set[int] = set()
    added: dict[int, str] = {}
    for e in emitted:
        assert e.segment not in closed, "an emission changed a finished segment"
        added[e.segment] = added.get(e.segment, "") + e.new
        assert added[e.segment] == e.text
        if e.is_final:
            closed.add(e.segment)
    assert [t for _, t, _ in finals(emitted)] == ["AB CD", "EF GH", "IJ"]


def test_silence_only_gives_no_segment_and_long_speech_is_cut_at_20_s() -> None:
    assert run(script(("", 6.0))) == []  # no final, and no empty partial either
    silence = Segmenter(Decoder(Tokenizer("char")), 0.04, SLOW)
    assert silence.push(one_hot(np.zeros(150, int)), 6.0) == [] and silence.start == 120  # dropped every 2.4 s
    long = run(script(*[("A B", 0.3)] * 60))  # 60 x 0.44 s of continuous speech
    assert [end for _, _, end in finals(long)][0] == pytest.approx(20.0)


def test_segments_do_not_depend_on_chunk_size() -> None:
    wave = script(("HELLO", 1.0), ("WORLD", 1.3), ("AGAIN", 3.0), ("X", 0.1))
    reference = run(wave, 8000)
    for chunk in (640, 1001, 16000, 100000):
        other = run(wave, chunk)
        assert finals(other) == finals(reference)
        assert [e.words for e in other if e.is_final] == [e.words for e in reference if e.is_final]


def test_segmenter_keeps_only_the_open_segment() -> None:
    segmenter = Segmenter(Decoder(Tokenizer("char")), 0.04, SLOW)
    chunk = one_hot(np.array([CHAR["A"]] + [0] * 49))  # one token, then 1.96 s of blank
    for n in range(200):  # 200 segments of one token each, 2 s apart
        segmenter.push(chunk, (n + 1) * 2.0)
    assert len(segmenter.tokens) <= 1 and segmenter.index == 200 and segmenter.search.best() == []


def test_rechunk_gives_exact_sizes_and_limit() -> None:
    pieces = [np.arange(n, dtype=np.float32) for n in (3, 10, 1, 7)]
    chunks = list(rechunk(pieces, 4))
    assert [c.size for c in chunks] == [4, 4, 4, 4, 4, 1]
    assert np.array_equal(np.concatenate(chunks), np.concatenate(pieces))
    assert sum(c.size for c in rechunk(pieces, 4, max_samples=9)) == 9


def buffer_steps(buffer: AudioBuffer, pieces: list[np.ndarray]) -> list[tuple[np.ndarray, bool]]:
    """Every step the server's buffer plans for `pieces` then the end, with no final pending."""
    steps = []
    for piece in [*pieces, None]:
        buffer.push(piece) if piece is not None else buffer.end()
        while (step := buffer.next(None)) is not None:
            steps.append(step)
    return steps


def test_server_audio_buffer_cuts_like_rechunk_and_resamples_the_whole_stream() -> None:
    rng = np.random.default_rng(0)
    pieces = [rng.standard_normal(n).astype(np.float32) for n in (5000, 1, 12345, 777, 9000)]
    buffer = AudioBuffer(8000)
    steps = buffer_steps(buffer, pieces)
    assert [c.size for c, _ in steps] == [c.size for c in rechunk(pieces, 8000)] and all(p for _, p in steps)
    assert np.array_equal(np.concatenate([c for c, _ in steps]), np.concatenate(pieces))
    buffer.end()
    assert buffer.next(None) is None  # nothing is left after the end
    at_8k = AudioBuffer(8000, rate=8000)  # 27123 samples at 8 kHz: 54246 at 16 kHz, in chunks of 8000
    chunks = [c for c, _ in buffer_steps(at_8k, pieces)]
    assert all(c.size == 8000 for c in chunks[:-1]) and 0 < chunks[-1].size <= 8000
    assert abs(sum(c.size for c in chunks) - 2 * sum(p.size for p in pieces)) <= 2


def test_line_display_redraws_on_a_tty_and_prints_finals_otherwise() -> None:
    emitted = run(script(("HI", 1.5), ("YO", 0.0)))
    tty, plain = io.StringIO(), io.StringIO()
    for e in emitted:
        stream.LineDisplay(tty, True).show(e)
        stream.LineDisplay(plain, False).show(e)
    assert plain.getvalue() == "HI\nYO\n"
    assert tty.getvalue().count("\r\033[K") == len(emitted) and tty.getvalue().endswith("\r\033[KYO\n")


def test_stream_file_json_and_compare_offline(model_path: Path, tmp_path: Path, capsys) -> None:
    audio = write(tmp_path / "a.wav", tone(1.7))
    assert stream.main(["--file", str(audio), "--model", str(model_path), "--json", "--compare-offline", "--plain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"max_abs_diff=\S+ token_mismatches=0", lines[-1])
    objects = [json.loads(line) for line in lines[:-1]]
    keys = {"segment", "start", "time", "text", "keep", "new", "is_final", "compute_ms"}
    assert all(set(o) == keys | ({"words"} if o["is_final"] else set()) for o in objects)
    for final in (o for o in objects if o["is_final"]):  # a final's plain words, with times and confidences
        assert [w["word"] for w in final["words"]] == final["text"].split()
        assert all(0 <= w["confidence"] <= 1 and w["start"] < w["end"] for w in final["words"])
    partials = [o for o in objects if not o["is_final"]]  # at the ends of chunks, where the text changed
    assert partials and {p["time"] for p in partials} <= {0.5, 1.0, 1.5, 1.7}
    assert all(a["text"] != b["text"] for a, b in zip(partials, partials[1:]) if a["segment"] == b["segment"])


def test_stream_file_plain_lines_match_json_finals(model_path: Path, speech_wav: Path, capsys) -> None:
    args = ["--file", str(speech_wav), "--model", str(model_path)]
    assert stream.main(args + ["--json"]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert stream.main(args) == 0
    assert capsys.readouterr().out.splitlines() == [o["text"] for o in objects if o["is_final"]]


def test_realtime_paces_each_chunk_like_a_microphone(model_path: Path, tmp_path: Path, capsys) -> None:
    audio = write(tmp_path / "b.wav", np.zeros(32000, dtype=np.float32))
    began = time.monotonic()
    assert stream.main(["--file", str(audio), "--model", str(model_path), "--realtime", "--json", "--greedy"]) == 0
    partials = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert time.monotonic() - began >= 1.95
    assert {p["time"] for p in partials if not p["is_final"]} <= {0.5, 1.0, 1.5, 2.0}  # chunk ends only


def test_realtime_releases_chunks_at_their_time(monkeypatch) -> None:
    """--realtime paces the 500 ms chunks themselves, not the file reader's 4 s blocks."""
    released = []
    monkeypatch.setattr(stream.time, "monotonic", lambda: 0.0)  # a clock that stands still: sleeps add up
    monkeypatch.setattr(stream.time, "sleep", lambda s: released.append(round(s, 3)))
    list(stream.paced(rechunk([np.zeros(65536, np.float32)], 8000)))
    assert released[:3] == [0.5, 1.0, 1.5] and len(released) == 9


def test_stream_errors_are_one_line(model_path: Path, tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing.wav"
    assert stream.main(["--file", str(missing), "--model", str(model_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"asr.stream: error: {missing}: no such file"
    with pytest.raises(SystemExit) as exit_info:
        stream.main(["--file", str(missing), "--chunk-ms", "0"])
    assert exit_info.value.code == 2


def test_recognizer_stream_ends_with_the_tail() -> None:
    """`Recognizer.stream`, the loop under every entry point: one step per chunk, then the tail."""
    recognizer, wave = ScriptedRecognizer(), script(("HI YO", 0.2))
    recognizer.tail = script(("U", 0.1))  # a tail that emits a letter shows where it lands
    steps = list(recognizer.stream(rechunk([wave], 3000)))
    assert [s.tail for s in steps] == [False] * (len(steps) - 1) + [True]
    assert [s.heard for s in steps] == [min(3000 * (i + 1), wave.size) for i in range(len(steps) - 1)] + [wave.size]
    decoder = Decoder(recognizer.tokenizer)
    assert decoder.text(decoder.decode(np.concatenate([s.logprobs for s in steps]))) == "HI YOU"
