"""The Python API: load a model once, then transcribe files and arrays, or stream live audio.

    import asr
    model = asr.load()                          # the bundled model, word-LM beam search, cased finals
    result = model.transcribe("talk.m4a")       # a file (anything ffmpeg reads), or samples (N,) / (N, C)
    model.transcribe(samples, sample_rate=22050)  # samples need their rate (a file carries its own)
    result.text                                 # "The water was cold."
    result.words                                # [Word(word='THE', start=0.48, end=0.6), ...]
    result.render("srt")                        # also "txt", "json", "vtt"

    stream = model.stream(sample_rate=48000)    # live audio, pushed as it arrives (any piece lengths)
    for event in stream.push(samples): ...      # partials and finals (`asr.decoding.endpoint.Emission`)
    for event in stream.finish(): ...           # the last final

Every command-line tool loads its model and decoder through `load_recognizer` and `load_decoder`
here, so `asr.load(...)`'s options mean what the flags of the same names mean.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from asr.audio import SAMPLE_RATE
from asr.audio.chunks import rechunk
from asr.audio.files import read_blocks
from asr.audio.resample import StreamingResampler, resample
from asr.decoding.beam import BeamConfig
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import Emission, EndpointConfig, Stream, emissions, ms
from asr.decoding.hotwords import parse_hotwords, read_hotwords
from asr.decoding.rescore import RescoreConfig
from asr.model.folder import folder_lm
from asr.model.recognizer import Recognizer
from asr.text.formats import Segment, Transcript
from asr.text.restore.restorer import load_restorer

Audio = str | Path | np.ndarray


def load_recognizer(model: str | Path | None = None, backend: str | None = None, threads: int = 1,
                    int8: bool = False, device: str | None = None) -> Recognizer:
    """The acoustic model: a .safetensors file (torch) or an exported ONNX folder, else the bundled one
    (on onnx where onnxruntime is installed). `int8`: the ONNX export's int8 graph; `device`: cpu, cuda,
    cuda:N or auto (a GPU needs torch: `asr.model.device`). Raises ModelError, or ValueError (DeviceError
    among them) for options that do not go together."""
    if int8 and backend == "torch":
        raise ValueError("int8 is a graph of the ONNX export: it needs the onnx backend, not torch")
    if int8 and model and (Path(model).is_file() or Path(model).suffix == ".safetensors"):
        raise ValueError(f"the int8 graph comes from an ONNX export folder, and {model} is a file")
    return Recognizer.load(model, "onnx" if int8 else backend, threads, int8=int8, device=device)


def is_bundled(model: str | Path | None) -> bool:
    """Whether `model` names the bundled model: None, or its shipped ONNX export (a folder or a graph in it)."""
    if model is None:
        return True
    from asr.model.onnx_backend import default_onnx_dir  # imports numpy only (onnxruntime when a graph loads)
    folder, bundled = Path(model), default_onnx_dir()
    folder = folder.parent if folder.suffix == ".onnx" else folder
    return bundled is not None and folder.resolve() == bundled.resolve()


def word_lm(bundled: bool, greedy: bool, beam: bool, lm: str | Path | None,
            own_lm: Path | None = None) -> Path | str | None:
    """The word LM a decoder searches with: `lm`, "bundled", or None (greedy CTC). The bundled model searches
    with the bundled LM unless `greedy`, and a model folder with its own LM (`own_lm`: `asr.model.folder`)
    with that one; another model of your own decodes greedily unless `beam` or `lm` asks."""
    if greedy or not (beam or lm or bundled or own_lm):
        return None
    return Path(lm) if lm else own_lm or "bundled"


def load_decoder(recognizer: Recognizer, bundled: bool = True, greedy: bool = False, beam: bool = False,
                 lm: str | Path | None = None, beam_config: BeamConfig | None = None,
                 hotwords: str | Path | Sequence[str] | None = None, restore: bool = True,
                 restorer: str | Path | None = None, hotword_min_confidence: float = 0.0,
                 written: bool = True, own_lm: Path | None = None, rescore: RescoreConfig | None = None,
                 model: str | Path | None = None) -> Decoder:
    """The decoder: greedy CTC, or the lexicon beam search with a word LM, as `word_lm` decides. `hotwords`: a
    hotword file, or its lines, to favour (needs the search); a final in which a listed word's confidence is
    below `hotword_min_confidence` is decoded again without the list. `restore`: cased, punctuated finals
    (the bundled restorer, or `restorer`: .onnx, or .safetensors with torch); `written`: with numbers, money,
    times and dates in figures ("$25 at 3:30"); `own_lm`: the model folder's word LM (see `word_lm`); `rescore`:
    the second pass over each final's n-best (`asr.decoding.rescore`; by default the one that goes with the word LM
    for `model`, the acoustic model decoded: `paired_second_pass`). Raises
    LMError, HotwordError, RestorerError or ValueError, each one line."""
    if greedy and (beam or lm):
        raise ValueError("greedy decoding cannot be combined with beam or lm")
    use_lm = word_lm(bundled, greedy, beam, lm, own_lm)
    if hotwords and use_lm is None:
        raise ValueError("hotwords need the beam search with a word LM (not greedy; with a model of your own, "
                         "ask for beam or an lm)")
    if isinstance(hotwords, (str, Path)):
        words = read_hotwords(hotwords, recognizer.tokenizer)  # HotwordError: FILE:LINE: reason
    else:
        words = parse_hotwords(list(hotwords), "hotwords", recognizer.tokenizer) if hotwords else None
    if not restore:
        restore_with = None
    elif restorer:
        restore_with = load_restorer("onnx" if Path(restorer).suffix == ".onnx" else "torch", Path(restorer))
    else:
        restore_with = "bundled"
    decoder = Decoder.load(recognizer.tokenizer, use_lm, beam_config or BeamConfig(), restore_with,
                           hotword_min_confidence, written, rescore or RescoreConfig(), model=model)
    return decoder.with_hotwords(words) if words else decoder


def load(model: str | Path | None = None, *, backend: str | None = None, int8: bool = False, threads: int = 1,
         greedy: bool = False, beam: bool = False, lm: str | Path | None = None,
         beam_config: BeamConfig | None = None, hotwords: str | Path | Sequence[str] | None = None,
         hotword_min_confidence: float = 0.0, restore: bool = True, restorer: str | Path | None = None,
         written: bool = True, endpoint: EndpointConfig | None = None,
         device: str | None = None, rescore: RescoreConfig | None = None) -> "Transcriber":
    """A model ready to transcribe: `model` and `device` as in `load_recognizer` (None: the bundled one, on the
    CPU), the decoding as in `load_decoder`, and where segments end (`endpoint`,
    `asr.decoding.endpoint.EndpointConfig`)."""
    recognizer = load_recognizer(model, backend, threads, int8, device)
    decoder = load_decoder(recognizer, is_bundled(model), greedy, beam, lm, beam_config, hotwords, restore, restorer,
                           hotword_min_confidence, written, own_lm=folder_lm(model), rescore=rescore, model=model)
    return Transcriber(recognizer, decoder, (endpoint or EndpointConfig()).validate())


class LiveStream:
    """A live stream at any sample rate: `push` pieces of any length, then `finish`; each returns the
    emissions that became due (`asr.decoding.endpoint.Stream` after resampling to 16 kHz)."""

    def __init__(self, stream: Stream, sample_rate: int = SAMPLE_RATE):
        self.stream = stream
        self.resampler = StreamingResampler(sample_rate) if sample_rate != SAMPLE_RATE else None

    def push(self, samples: np.ndarray) -> list[Emission]:
        samples = _mono(samples)
        return self.stream.push(self.resampler.push(samples) if self.resampler else samples)

    def finish(self) -> list[Emission]:
        return (self.stream.push(self.resampler.flush()) if self.resampler else []) + self.stream.finish()


class Transcriber:
    """The acoustic model, decoder and endpointing of `load`, used by every entry point alike."""

    def __init__(self, recognizer: Recognizer, decoder: Decoder, endpoint: EndpointConfig | None = None):
        self.recognizer, self.decoder, self.endpoint = recognizer, decoder, endpoint or EndpointConfig()

    def stream(self, *, sample_rate: int, chunk_ms: float = 500.0) -> LiveStream:
        """A live stream of audio at `sample_rate` Hz (required: samples do not say their rate), pushed in pieces
        of any length and stepped in chunks of `chunk_ms` (a partial after each that changed the text; times to the
        millisecond); the emissions are those of `asr.stream` for the same audio and chunk size."""
        return LiveStream(Stream(self.recognizer, self.decoder, self.endpoint, chunk_samples=chunk_samples(chunk_ms)),
                          _rate(sample_rate))

    def emissions(self, chunks: Iterable[np.ndarray]) -> Iterator[Emission]:
        """16 kHz chunks (each a chunk boundary, as `asr.stream` cuts them) -> partials and finals."""
        return emissions(self.recognizer, chunks, self.decoder, self.endpoint)

    def transcribe(self, audio: Audio, *, sample_rate: int | None = None, chunk_ms: float = 2000.0,
                   progress: Callable[[float], None] | None = None) -> Transcript:
        """A file (a path; "-" reads standard input) or samples (N,) or (N, C) at `sample_rate` Hz (required
        with samples, which do not say their rate; a file carries its own) -> its Transcript: `text` (cased and
        punctuated unless loaded with restore=False), `words` with their times, `segments`. `chunk_ms` changes
        only the speed; `progress` is called with the seconds of each chunk. Raises AudioError (file + reason)
        for audio that cannot be read, ValueError for samples without their rate."""
        if isinstance(audio, (str, Path)):
            if sample_rate is not None:
                raise ValueError(f"{audio}: a file carries its own rate: give sample_rate only with samples")
            name, pieces = str(audio), read_blocks(audio)
        else:
            if sample_rate is None:
                raise ValueError("samples need their rate: transcribe(samples, sample_rate=...) (16000 for the "
                                 "model's own; other rates are resampled)")
            name, pieces = "<array>", iter([resample(_mono(audio), _rate(sample_rate))])
        heard = 0

        def counted(chunks: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
            nonlocal heard
            for chunk in chunks:
                heard += chunk.size
                if progress:
                    progress(chunk.size / SAMPLE_RATE)
                yield chunk

        began = time.perf_counter()
        finals = [e for e in self.emissions(counted(rechunk(pieces, chunk_samples(chunk_ms)))) if e.is_final]
        segments = [Segment(e.start, e.end, e.text, e.words, e.plain or "") for e in finals]
        duration = heard / SAMPLE_RATE
        rtf = (time.perf_counter() - began) / duration if duration else 0.0
        return Transcript(name, " ".join(s.text for s in segments), ms(duration), segments, rtf)


def chunk_samples(chunk_ms: float) -> int:
    """16 kHz samples in `chunk_ms` milliseconds (at least one)."""
    if not chunk_ms > 0:
        raise ValueError(f"chunk_ms must be > 0 (got {chunk_ms})")
    return max(1, round(chunk_ms * SAMPLE_RATE / 1000))


def _rate(sample_rate: object) -> int:
    """A sample rate as given by a caller -> int Hz; ValueError for anything but a whole number > 0."""
    whole = isinstance(sample_rate, (int, np.integer)) or (
        isinstance(sample_rate, (float, np.floating)) and float(sample_rate).is_integer())
    if whole and not isinstance(sample_rate, bool) and sample_rate > 0:
        return int(sample_rate)
    raise ValueError(f"sample_rate must be a whole number of Hz > 0 (got {sample_rate!r})")


def _mono(samples: np.ndarray) -> np.ndarray:
    """(N,) or (N, C) samples, float or integer PCM -> (N,) float32 in [-1, 1], channels averaged."""
    samples = np.asarray(samples)
    if np.issubdtype(samples.dtype, np.integer):
        samples = samples / float(np.iinfo(samples.dtype).max + 1)
    samples = samples.astype(np.float32, copy=False)
    if samples.ndim == 2:
        return samples.mean(axis=1)
    if samples.ndim != 1:
        raise ValueError(f"audio samples must be (N,) or (N, channels), not {samples.shape}")
    return samples
