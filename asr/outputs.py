"""Transcript writers: plain text, JSON, SubRip (.srt) and WebVTT (.vtt).

Subtitle cues come from the endpointer's segments, split into cues of at most
`MAX_CUE_WORDS` words using the CTC word times.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from asr.decoding.ctc import Word, word_json

FORMATS = ("txt", "json", "srt", "vtt")
MAX_CUE_WORDS = 12


@dataclass
class Segment:
    start: float  # seconds
    end: float
    text: str  # as shown: cased and punctuated when restored, else the plain words
    words: list[Word] = field(default_factory=list)  # plain words with their times
    plain: str = ""  # the plain upper-case words ("" when `text` is them)


@dataclass
class Transcript:
    """The result for one audio file."""

    audio: str
    text: str
    duration: float  # seconds of audio
    segments: list[Segment] = field(default_factory=list)
    rtf: float = 0.0  # compute time / audio duration

    @property
    def words(self) -> list[Word]:
        return [w for s in self.segments for w in s.words]

    @property
    def plain(self) -> str:
        """The plain upper-case words of the whole transcript."""
        return " ".join(s.plain or s.text for s in self.segments) if self.segments else self.text

    def render(self, fmt: str = "txt") -> str:
        """This transcript in format `fmt` (one of FORMATS: txt, json, srt, vtt)."""
        if fmt not in WRITERS:
            raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
        return WRITERS[fmt](self)


def to_txt(t: Transcript) -> str:
    return t.text + "\n"


def to_json(t: Transcript) -> str:
    """{"audio", "text", "plain", "duration", "words": [{"word", "start", "end", "confidence"}], "rtf"} on one line:
    `text` as shown (restored), `plain` and each word as plain upper-case words."""
    words = [word_json(w) for w in t.words]
    return json.dumps({"audio": t.audio, "text": t.text, "plain": t.plain, "duration": round(t.duration, 3),
                       "words": words, "rtf": round(t.rtf, 4)}) + "\n"


def cues(t: Transcript, max_words: int = MAX_CUE_WORDS) -> list[tuple[float, float, str]]:
    """(start, end, text) subtitle cues: each segment, split every `max_words` words. A restored segment
    has one token per word, so each cue shows its words as restored."""
    out = []
    for segment in t.segments:
        if not segment.words:
            out.append((segment.start, segment.end, segment.text))
            continue
        shown = segment.text.split()
        if len(shown) != len(segment.words):
            shown = [w.word for w in segment.words]
        for i in range(0, len(segment.words), max_words):
            group = segment.words[i:i + max_words]
            out.append((group[0].start, group[-1].end, " ".join(shown[i:i + max_words])))
    return out


def _timestamp(seconds: float, separator: str) -> str:
    ms = max(0, round(seconds * 1000))
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{ms:03d}"


def to_srt(t: Transcript) -> str:
    blocks = [f"{n}\n{_timestamp(a, ',')} --> {_timestamp(b, ',')}\n{text}\n"
              for n, (a, b, text) in enumerate(cues(t), start=1)]
    return "\n".join(blocks)


def to_vtt(t: Transcript) -> str:
    blocks = [f"{_timestamp(a, '.')} --> {_timestamp(b, '.')}\n{text}\n" for a, b, text in cues(t)]
    return "WEBVTT\n\n" + "\n".join(blocks)


WRITERS = {"txt": to_txt, "json": to_json, "srt": to_srt, "vtt": to_vtt}

