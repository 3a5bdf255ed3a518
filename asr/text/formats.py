"""Transcript writers: plain text, JSON, SubRip (.srt) and WebVTT (.vtt).

Subtitle cues (`cues`) follow the endpointer's segments and the restorer's sentences, as subtitle guides ask (the
BBC's and Netflix's: at most two lines of 37-42 characters, shown 5/6 s to 7 s): each segment's shown tokens,
timed by their words, are cut into cues of at most two lines of MAX_LINE_CHARS and MAX_CUE_SECONDS, by the fewest
cues that cut at sentence ends, else at a comma, with one sentence a cue where it fits and a cue shorter than
MIN_CUE_SECONDS joined to its neighbour. A cue is never a single short word (SHORT_WORD characters or fewer): a
segment that is one ("The", "Yes.") is cut together with the segments beside it, its word going with the
nearer where both would take it, so a cue then spans two segments. A cue still shorter than MIN_CUE_SECONDS
is shown that long where the next cue leaves room; a single short word alone stays only where no neighbour is
within MAX_CUE_SECONDS of it.
"""
from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from asr.decoding.ctc import Word, word_json
from asr.text.normalize import normalize

FORMATS = ("txt", "json", "srt", "vtt")
MAX_LINE_CHARS = 42  # characters a subtitle line
MAX_LINES = 2
MIN_CUE_SECONDS = 1.0
MAX_CUE_SECONDS = 7.0
SHORT_WORD = 6  # letters: a cue of one word this short is not shown alone
_SENTENCE_END = re.compile(r"[.?!][\"')\]]*$")
_CLAUSE_END = re.compile(r"[,;:][\"')\]]*$")
_BREAK_BEFORE = frozenset("and but or so because that which who when where while if then".split())


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
    """{"audio", "text", "plain", "duration", "words": [{"word", "start", "end", "confidence"}], "segments": [{"start",
    "end", "text", "words"}], "rtf"} on one line: `text` as shown (restored), `plain` and each word as plain
    upper-case words; `segments` are the finals (the endpointer's segments), each with its own words."""
    segments = [{"start": round(s.start, 3), "end": round(s.end, 3), "text": s.text,
                 "words": [word_json(w) for w in s.words]} for s in t.segments]
    return json.dumps({"audio": t.audio, "text": t.text, "plain": t.plain, "duration": round(t.duration, 3),
                       "words": [word_json(w) for w in t.words], "segments": segments, "rtf": round(t.rtf, 4)}) + "\n"


Timed = tuple[float, float, str]  # (start, end, text): a token, or a cue


def cues(t: Transcript) -> list[Timed]:
    """(start, end, text) subtitle cues of the transcript, `text` in one or two lines (see the module's docstring)."""
    out: list[Timed] = []
    for group in _groups(t.segments):
        if not group[0][1]:  # a segment without word times: one cue
            segment = group[0][0]
            out.append((segment.start, segment.end, _lines(segment.text.split())))
            continue
        tokens = [token for _, timed in group for token in timed]
        starts = set(itertools.accumulate(len(timed) for _, timed in group[:-1]))
        out += [(tokens[i][0], tokens[j - 1][1], _lines([tok for _, _, tok in tokens[i:j]]))
                for i, j in _split(tokens, starts)]
    return _lengthened(out)


def _lone(tokens: list[Timed]) -> bool:
    """Whether tokens are a single short word (a cue of them alone is not shown)."""
    return len(tokens) == 1 and len(re.sub(r"[^\w']", "", tokens[0][2])) <= SHORT_WORD


def _groups(segments: list[Segment]) -> list[list[tuple[Segment, list[Timed]]]]:
    """The segments with their timed tokens, in runs that are cut into cues together: a segment that is a single
    short word joins the timed segments beside it (within MAX_CUE_SECONDS); every other segment is a run alone."""
    groups: list[list[tuple[Segment, list[Timed]]]] = []
    previous: list[Timed] = []
    for segment in segments:
        timed = _timed_tokens(segment)
        near = groups and previous and timed and timed[0][0] - previous[-1][1] <= MAX_CUE_SECONDS
        if near and (_lone(timed) or _lone(previous)):
            groups[-1].append((segment, timed))
        else:
            groups.append([(segment, timed)])
        previous = timed
    return groups


def _timed_tokens(segment: Segment) -> list[Timed]:
    """The segment's shown tokens (restored: one a word; in the written form "$25" stands for TWENTY FIVE
    DOLLARS), each timed by the plain words it was made from: the tokens' normalised words matched to the
    words (difflib), an unmatched run shared out in proportion, a token with no word of its own at the end of
    the one before."""
    shown, words = segment.text.split(), segment.words
    if not words or not shown:
        return []
    if len(shown) == len(words):
        return [(w.start, w.end, token) for w, token in zip(words, shown)]
    keys = [(i, key) for i, token in enumerate(shown) for key in normalize(token).split()]
    times: list[list[float]] = [[] for _ in shown]
    matcher = SequenceMatcher(None, [key for _, key in keys], [w.word for w in words], autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op not in ("equal", "replace"):
            continue
        for k in range(a2 - a1):  # the k-th key of the run covers its share of the words
            first = b1 + k * (b2 - b1) // (a2 - a1)
            last = max(first, b1 + math.ceil((k + 1) * (b2 - b1) / (a2 - a1)) - 1)
            times[keys[a1 + k][0]] += [words[first].start, words[last].end]
    out, at = [], segment.start
    for token, found in zip(shown, times):
        start, end = (min(found), max(found)) if found else (at, at)
        out.append((max(start, at) if out else start, end, token))
        at = max(at, end)
    return out


def _split(tokens: list[Timed], starts: set[int] = frozenset()) -> list[tuple[int, int]]:
    """[first, end) token ranges of the cues of one run of segments (`starts`: the tokens that begin a segment,
    but the first): the cheapest cut (`_cost`) into cues that fit."""
    n = len(tokens)
    best, back = [0.0] + [math.inf] * n, [0] * (n + 1)
    for end in range(1, n + 1):
        for first in range(end - 1, -1, -1):
            if first < end - 1 and not _fits(tokens, first, end):
                break  # an earlier start only makes the cue longer
            cost = best[first] + _cost(tokens, first, end, n, starts)
            if cost < best[end]:
                best[end], back[end] = cost, first
    ranges, end = [], n
    while end:
        ranges.append((back[end], end))
        end = back[end]
    return ranges[::-1]


def _fits(tokens: list[Timed], first: int, end: int) -> bool:
    """Whether tokens [first, end) make one cue: at most MAX_CUE_SECONDS, and MAX_LINES lines of MAX_LINE_CHARS."""
    if tokens[end - 1][1] - tokens[first][0] > MAX_CUE_SECONDS:
        return False
    texts = [tok for _, _, tok in tokens[first:end]]
    return len(" ".join(texts)) <= MAX_LINE_CHARS or _break(texts) is not None


def _cost(tokens: list[Timed], first: int, end: int, n: int, starts: set[int] = frozenset()) -> float:
    """A cue of tokens [first, end) in a run of n: one for the cue, more where it cuts inside a sentence (less at
    a comma or before "and", "but"...; none at a segment's end), holds the end of one sentence and the start of
    another, spans two segments (the more, the longer the silence between), is shorter than MIN_CUE_SECONDS, is
    a single short word (much more), or is long (so that a sentence cut in two is cut near its middle)."""
    texts = [tok for _, _, tok in tokens[first:end]]
    cost = 1.0
    if end < n and end not in starts:
        cost += 0.0 if _SENTENCE_END.search(texts[-1]) else 0.5 if _CLAUSE_END.search(texts[-1]) else \
            0.7 if tokens[end][2].lower() in _BREAK_BEFORE else 1.0
    cost += 1.2 * sum(1 for text in texts[:-1] if _SENTENCE_END.search(text))
    cost += sum(1.2 + 0.5 * (tokens[k][0] - tokens[k - 1][1]) for k in starts if first < k < end)
    if tokens[end - 1][1] - tokens[first][0] < MIN_CUE_SECONDS:
        cost += 2.0
    if _lone(tokens[first:end]):
        cost += 20.0
    return cost + 0.5 * (len(" ".join(texts)) / (MAX_LINES * MAX_LINE_CHARS)) ** 2


def _break(texts: list[str]) -> int | None:
    """Where a cue's tokens are best cut into two lines of at most MAX_LINE_CHARS (the index of the second
    line's first token): the most even lines, after a comma or before "and", "but"... where that costs
    little, the lower line the longer of two; None where no cut fits."""
    best, where = math.inf, None
    for k in range(1, len(texts)):
        top, bottom = len(" ".join(texts[:k])), len(" ".join(texts[k:]))
        if max(top, bottom) > MAX_LINE_CHARS:
            continue
        natural = _CLAUSE_END.search(texts[k - 1]) or _SENTENCE_END.search(texts[k - 1]) or \
            texts[k].lower() in _BREAK_BEFORE
        score = max(top, bottom) - (6 if natural else 0) + (0.1 if top > bottom else 0)
        if score < best:
            best, where = score, k
    return where


def _lines(texts: list[str]) -> str:
    """A cue's tokens as its text: one line if it fits, else two (`_break`; a cue too long for two lines, a
    single long token's, is cut at its middle word)."""
    text = " ".join(texts)
    if len(text) <= MAX_LINE_CHARS or len(texts) < 2:
        return text
    k = _break(texts) or len(texts) // 2
    return " ".join(texts[:k]) + "\n" + " ".join(texts[k:])


def _lengthened(out: list[Timed]) -> list[Timed]:
    """Cues shorter than MIN_CUE_SECONDS shown that long where the cues around them leave room: on past their
    end up to the next cue, then from earlier, after the previous one."""
    done: list[Timed] = []
    for k, (start, end, text) in enumerate(out):
        if end - start < MIN_CUE_SECONDS:
            later = out[k + 1][0] if k + 1 < len(out) else math.inf
            end = max(end, min(start + MIN_CUE_SECONDS, later))
            earlier = done[-1][1] if done else 0.0
            start = min(start, max(earlier, end - MIN_CUE_SECONDS))
        done.append((start, end, text))
    return done


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

