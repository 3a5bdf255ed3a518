"""The Python API (`asr.load`): the same results as the command-line tools, from files, arrays and pushed pieces."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

import asr
from asr import stream, transcribe
from asr.audio import AudioError
from asr.audio.resample import resample
from asr.decoding.ctc import Word
from helpers import ROOT
from media_files import encode

EXAMPLE = ROOT / "asr" / "examples" / "synthetic_slt.flac"
SPEECH = ROOT / "asr" / "examples" / "speechocean762_0813_0233.flac"


@pytest.fixture(scope="module")
def model() -> asr.api.Transcriber:
    return asr.load()


def test_a_file_gives_cased_text_with_word_times_as_the_cli(model, capsys) -> None:
    result = model.transcribe(EXAMPLE)
    assert result.text and result.text[0].isupper() and result.text != result.text.upper()  # restored
    assert [w.word for w in result.words] == result.plain.split()
    assert all(isinstance(w, Word) and 0 <= w.start <= w.end <= result.duration for w in result.words)
    assert transcribe.main([str(EXAMPLE), "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["text"] == result.text and printed["plain"] == result.plain
    assert result.render("json") == result.render("json")  # the writers are the CLI's own
    assert json.loads(result.render("json"))["words"] == printed["words"]
    with pytest.raises(ValueError, match="unknown format"):
        result.render("docx")


def test_arrays_at_any_rate_and_channels_give_the_files_text(model, tmp_path) -> None:
    wave, rate = sf.read(EXAMPLE, dtype="float32")
    assert rate == 16000
    expected = model.transcribe(EXAMPLE).text
    assert model.transcribe(wave, sample_rate=rate).text == expected
    pcm = np.round(wave * 32767).astype(np.int16)  # integer PCM is scaled to [-1, 1]
    assert model.transcribe(pcm, sample_rate=rate).text == expected
    stereo = np.stack([wave, wave], axis=1)  # (N, 2): the channels are averaged
    assert model.transcribe(stereo, sample_rate=rate).text == expected
    other_rate = resample(wave, 16000, 22050)  # an array at 22.05 kHz reads as the same file would
    sf.write(tmp_path / "22k.wav", other_rate, 22050, subtype="FLOAT")
    assert model.transcribe(other_rate, sample_rate=22050).text == model.transcribe(tmp_path / "22k.wav").text
    with pytest.raises(ValueError, match=r"\(N,\) or \(N, channels\)"):
        model.transcribe(np.zeros((2, 2, 2), np.float32), sample_rate=rate)
    with pytest.raises(AudioError, match="no such file"):
        model.transcribe(ROOT / "missing.wav")


def test_samples_need_their_rate(model) -> None:
    """An array is only numbers: taken as 16 kHz, 22.05 kHz samples gave wrong text without a word. Its rate
    is a required keyword (a file carries its own)."""
    wave = resample(sf.read(EXAMPLE, dtype="float32")[0], 16000, 22050)
    with pytest.raises(ValueError, match=r"^samples need their rate: transcribe\(samples, sample_rate=\.\.\.\)"):
        model.transcribe(wave)
    with pytest.raises(TypeError, match="sample_rate"):
        model.stream()
    for bad in (0, -16000, 16000.5, float("nan"), True, "16000"):
        with pytest.raises(ValueError, match="sample_rate must be a whole number of Hz > 0"):
            model.transcribe(wave, sample_rate=bad)
        with pytest.raises(ValueError, match="sample_rate must be a whole number of Hz > 0"):
            model.stream(sample_rate=bad)
    with pytest.raises(ValueError, match="a file carries its own rate"):
        model.transcribe(EXAMPLE, sample_rate=22050)
    text = model.transcribe(wave, sample_rate=22050).text
    assert model.transcribe(wave, sample_rate=np.int64(22050)).text == text
    assert model.transcribe(wave, sample_rate=22050.0).text == text


def test_pushed_pieces_of_any_length_give_the_stream_tools_events(model, capsys) -> None:
    assert stream.main(["--file", str(EXAMPLE), "--json"]) == 0
    expected = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    wave, _ = sf.read(EXAMPLE, dtype="float32")
    rng = np.random.default_rng(0)
    for _ in range(2):  # two random cuttings: the events do not depend on how the audio arrives
        live, events, start = model.stream(sample_rate=16000), [], 0
        while start < wave.size:
            size = int(rng.integers(1, 4000))
            events += live.push(wave[start:start + size])
            start += size
        events += live.finish()
        assert [(e["text"], e["is_final"], e["time"]) for e in expected] == \
               [(e.text, e.is_final, round(e.time, 3)) for e in events]
        with pytest.raises(ValueError, match="finished"):
            live.push(wave[:100])


def test_a_live_stream_shows_only_changes_with_times_to_the_millisecond(model) -> None:
    """Silence before, between and after speech: no partial is empty at a segment's start, none repeats the one
    before, and every time the API returns is rounded to the millisecond."""
    wave, _ = sf.read(EXAMPLE, dtype="float32")
    gap = np.zeros(24000, np.float32)
    audio = resample(np.concatenate([gap, wave, gap, wave, gap]), 16000, 44100)
    live = model.stream(sample_rate=44100)
    events = [e for start in range(0, audio.size, 3000) for e in live.push(audio[start:start + 3000])]
    events += live.finish()
    finals = [e for e in events if e.is_final]
    assert len(finals) == 2 and [e.segment for e in finals] == [0, 1]
    shown = {}  # segment -> its text as last shown
    for e in events:
        assert e.text or shown.get(e.segment), e  # a segment's first event says something
        assert e.is_final or e.text != shown.get(e.segment), e  # a partial is a change
        shown[e.segment] = e.text
    times = [t for e in events for t in (e.start, e.time, e.end)] + [t for e in finals for w in e.words
                                                                      for t in (w.start, w.end)]
    assert times and all(t == round(t, 3) for t in times)
    result = model.transcribe(audio, sample_rate=44100)
    times = [result.duration] + [t for s in result.segments for t in (s.start, s.end)] + [
        t for w in result.words for t in (w.start, w.end)]
    assert all(t == round(t, 3) for t in times) and result.segments[1].start == finals[1].start


def test_options_mean_what_the_flags_mean(model) -> None:
    greedy = asr.load(greedy=True, restore=False)
    no_lm = "lexicon" if greedy.recognizer.tokenizer.kind == "phone" else "greedy"  # a phone model: a no-LM search
    assert greedy.decoder.kind == no_lm and greedy.decoder.restorer is None
    assert greedy.transcribe(EXAMPLE).text.isupper()
    listed = asr.load(hotwords=["pemberton 12"])
    assert listed.decoder.biasing is not None and listed.transcribe(EXAMPLE).text
    with pytest.raises(ValueError, match="cannot be combined"):
        asr.load(greedy=True, beam=True)
    with pytest.raises(ValueError, match="hotwords need the beam search"):
        asr.load(greedy=True, hotwords=["pemberton"])
    with pytest.raises(ValueError, match="hotwords:1:"):
        asr.load(hotwords=["3 + 4"])
    with pytest.raises(ValueError, match="chunk_ms must be > 0"):
        model.stream(sample_rate=16000, chunk_ms=0)


def test_import_asr_load_transcribe_an_m4a(model, tmp_path) -> None:
    """The one-liner on a phone's kind of file: AAC in .m4a, read through PyAV."""
    wave, rate = sf.read(EXAMPLE, dtype="float32")
    m4a = encode(wave, rate, tmp_path / "x.m4a")
    result = asr.load().transcribe(str(m4a))
    assert result.text == model.transcribe(EXAMPLE).text  # this example's words survive AAC coding (the accented one's do not)
    assert result.text[0].isupper() and result.text != result.text.upper() and result.text[-1] in ".?!"
    assert [w.word for w in result.words] == result.plain.split() and result.words[-1].end <= result.duration
