"""The OpenAI endpoint's response formats for a Transcript: json, text, srt, vtt and verbose_json."""
from __future__ import annotations

import math
import zlib

from aiohttp import web

from asr.decoding.ctc import Word
from asr.text.formats import Transcript

FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
GRANULARITIES = ("segment", "word")


def render(t: Transcript, response_format: str, granularities: list[str]) -> web.Response:
    """The transcript in `response_format`; `granularities`: verbose_json's (default: segments only)."""
    usage = {"type": "duration", "seconds": round(t.duration, 3)}
    if response_format == "json":
        return web.json_response({"text": t.text, "usage": usage})
    if response_format == "verbose_json":
        return web.json_response(verbose(t, granularities or ["segment"]) | {"usage": usage})
    fmt, kind = {"text": ("txt", "text/plain"), "srt": ("srt", "text/plain"), "vtt": ("vtt", "text/vtt")}[response_format]
    return web.Response(text=t.render(fmt), content_type=kind, charset="utf-8")


def verbose(t: Transcript, granularities: list[str]) -> dict:
    """verbose_json: the text, its duration and language, and `segments` and/or `words` with their times.
    A segment's avg_logprob is the mean log confidence of its words; its words are shown as in its text
    (restored) where it has one token per word, else as the plain words."""
    out: dict = {"task": "transcribe", "language": "english", "duration": round(t.duration, 3), "text": t.text}
    if "segment" in granularities:
        out["segments"] = [{
            "id": i, "seek": 0, "start": round(s.start, 3), "end": round(s.end, 3), "text": s.text, "tokens": [],
            "temperature": 0.0, "avg_logprob": _avg_logprob(s.words), "no_speech_prob": 0.0,
            "compression_ratio": round(len(s.text.encode()) / max(1, len(zlib.compress(s.text.encode()))), 3),
        } for i, s in enumerate(t.segments)]
    if "word" in granularities:
        out["words"] = []
        for s in t.segments:
            shown = s.text.split()
            shown = shown if len(shown) == len(s.words) else [w.word for w in s.words]
            out["words"] += [{"word": text, "start": round(w.start, 3), "end": round(w.end, 3)}
                             | ({} if w.confidence is None else {"confidence": round(w.confidence, 3)})
                             for text, w in zip(shown, s.words)]
    return out


def _avg_logprob(words: list[Word]) -> float:
    scores = [math.log(max(w.confidence, 1e-6)) for w in words if w.confidence is not None]
    return round(sum(scores) / len(scores), 4) if scores else 0.0
