"""Where a segment ends: the endpoint rules, Kaldi's online endpointer's with the word LM judging the sentence.

A segment is a range of encoder frames; its end is decided frame by frame on the greedy CTC tokens' times (cheap,
and the same whatever the chunk size), the open segment starting at frame `start`:

  1. nothing decoded for `silence_no_speech` s since the segment started         -> end (dropped: no final)
  2. `sentence_end_silence` s of blank since the last token, where the word LM gives the search's best
     hypothesis an end-of-sentence probability of at least 10^`sentence_end_logprob` -> end
  3. `mid_phrase_silence` s of blank since the last token, where it gives less: the speaker is mid-phrase, and
     a pause there is more likely a breath than the end of the turn (with a yes/no verdict this is Kaldi's
     rule 4 too, a long silence ending the segment whatever was said)          -> end
  5. the segment is `max_segment` s long                                         -> end

and no segment shorter than `min_segment` s ends on silence. Rules 2 and 3 ask the search once per pause: at
the frame where rule 2 could first fire, with the search fed exactly up to that frame (`ask(last, frame)`;
`asr.decoding.sentence_end`), so the verdict is a function of the frames alone, like the rest. A search without a
word LM (greedy decoding, a phone model's lexicon search without one) cannot judge: its pauses end after
`no_lm_silence`. A pause ends its segment only if it lasts through the end of the model's lookahead chunk that
holds the rule's frame (`through_chunk`, `heard_by`): the model computes that chunk's frames at once, so the
decision comes no later for it, and speech that resumes within them keeps the segment open (at 0.4 s on 40
speechocean762 train utterances: 41 cuts inside utterances -> 16, WER 11.81 -> 5.51; on 40 of speaker 8226's,
38 -> 26, 8.88 -> 9.31). `EndpointConfig.fixed(S)`, the default at S = 0.4: S seconds of
silence whatever was said, decided at its frame.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from asr.decoding.ctc import Token

NEVER_S = 1e9  # seconds (31 years): a rule that never fires in practice (`EndpointConfig.whole`)


@dataclass
class EndpointConfig:
    """The endpoint rules (seconds; see the module's docstring). The default is one fixed trailing silence of 0.4 s,
    whatever was said; `by_sentence()` (the tools' --sentence-end-silence / --mid-phrase-silence) lets the word LM
    judge instead, and the word LMs read each segment after the words before it. Those rules are not the default: on
    150 utterances of each dev set (`scripts/bench/turns.py --sets dev --limit 150 --rules default sentence
    sentence:alone`, 2026-12-07) they read speechocean762 dev 35.46 (fixed 0.4 s: 35.68; whole utterances 34.59)
    and dev-clean-2 18.28 (17.83; 18.80) at an end of speech -> final 0.10-0.11 s sooner (median; a busy machine);
    each segment on its own they read 36.11 and 18.42. The fixed rule gains nothing from reading across its cuts
    (35.57 and 17.93). Rules 2 and 3 chosen 2026-12-07 on training-side
    data, LibriSpeech speaker 8226 (118 utterances) and 150 of speechocean762 train (`scripts/bench/turns.py --sets
    tune --limit 150`; whole-utterance WER 7.73 / 4.21; a busy machine): the fixed 0.4 s before them read 7.29 / 9.46
    with 129 / 104 cuts inside utterances, end of speech -> final 0.74 / 0.70 s median (p95 0.97 / 0.89); these
    7.29 / 8.41, 176 / 82 cuts, 0.49 / 0.45 s (0.76 / 0.72). Stricter, 10^-1: 7.40 / 6.31 but 0.72 / 0.56 s (p95
    1.32 / 1.28, a tenth of the sentence ends judged mid-phrase); 0.3 s: 7.29 / 6.62 at 0.66 / 0.61 s; 0.4 s for
    both: 7.54 / 6.41 at 0.74 / 0.70 s; mid-phrase 1.0 s cut no fewer than 0.8 (80 utterances each). The n-gram's
    P(</s>) tells a reader's pause from a sentence end only weakly: 0.2 s into the pauses inside 8226's utterances
    its median is 10^-0.97, at their ends 10^-0.87 (speechocean762 train: 10^-1.5 and 10^-0.8)."""

    sentence_end_silence: float = 0.2  # rule 2: blank after the last token that ends a sentence the LM lets end
    mid_phrase_silence: float = 0.8  # rule 3: blank after the last token that ends a segment mid-phrase
    sentence_end_logprob: float = -2.0  # log10 P(</s> | the best hypothesis's words) at or above which it can end
    no_lm_silence: float = 0.4  # blank after the last token that ends a segment where no word LM can judge
    trailing_silence: float | None = 0.4  # one fixed silence instead of rules 2 and 3, whatever was said (None: them)
    through_chunk: bool = False  # a pause must last through the model's lookahead chunk holding its end (`heard_by`)
    min_segment: float = 0.0  # a shorter segment does not end on silence
    max_segment: float = 20.0  # rule 5: a segment this long ends wherever it is
    silence_no_speech: float = 2.4  # rule 1: blank with nothing decoded that ends (and drops) a segment
    words_before: int = 0  # words of the finals before a segment that the word LMs read it after (0: none)
    mid_sentence: float = 0.0  # how likely a segment's closing pause is inside a sentence against at its end: the word
    # LMs weigh the sentence's end by it (`asr.decoding.rescore.Place`; 0: every segment ends a sentence). by_sentence's
    # 16 words and 0.1 chosen 2026-12-07 on 60 utterances each of speechocean762 train and speaker 8226 (fixed 0.4 s
    # rule): each segment on its own 13.78 / 8.08; after the words before it, mid 0: 10.54 / 8.19, 0.1: 9.73 / 8.08,
    # 1 (no end term): 10.27 / 8.31

    @classmethod
    def fixed(cls, trailing_silence: float) -> "EndpointConfig":
        """One trailing silence whatever was said, decided at its frame (the default is `fixed(0.4)`)."""
        return cls(trailing_silence=trailing_silence, through_chunk=False)

    @classmethod
    def by_sentence(cls, **fields) -> "EndpointConfig":
        """Rules 2 and 3: the word LM judges whether the sentence can end; a pause lasts through its lookahead chunk;
        the word LMs read a segment after the 16 words before it and weigh its end (`mid_sentence` 0.1)."""
        return cls(**{"trailing_silence": None, "through_chunk": True, "words_before": 16, "mid_sentence": 0.1,
                      **fields})

    @classmethod
    def whole(cls) -> "EndpointConfig":
        """No endpoint ever fires: the input is one segment, closed at its end (asr.evaluate --whole: the model and
        search on whole utterances, which is not what the tools give for a long one)."""
        return cls(trailing_silence=NEVER_S, min_segment=0.0, max_segment=NEVER_S, silence_no_speech=NEVER_S)

    def validate(self) -> "EndpointConfig":
        names = ["sentence_end_silence", "mid_phrase_silence", "no_lm_silence", "max_segment", "silence_no_speech"]
        for name in names + ["trailing_silence"] * (self.trailing_silence is not None):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name.replace('_', '-')} must be > 0 (got {getattr(self, name)})")
        if self.mid_phrase_silence < self.sentence_end_silence:
            raise ValueError(f"mid-phrase-silence ({self.mid_phrase_silence}) must be at least sentence-end-silence "
                             f"({self.sentence_end_silence})")
        if not self.sentence_end_logprob <= 0:
            raise ValueError(f"sentence-end-logprob is a log10 probability: <= 0 (got {self.sentence_end_logprob})")
        if self.min_segment < 0:
            raise ValueError(f"min-segment must be >= 0 (got {self.min_segment})")
        if self.words_before < 0:
            raise ValueError(f"words-before must be >= 0 (got {self.words_before})")
        if not 0.0 <= self.mid_sentence <= 1.0:
            raise ValueError(f"mid-sentence must be between 0 and 1 (got {self.mid_sentence})")
        return self

    def first_silence(self, judged: bool) -> float:
        """The trailing silence at which a pause may first end the segment: the fixed one, rule 2's where the
        search's word LM judges (`judged`), else `no_lm_silence`."""
        if self.trailing_silence is not None:
            return self.trailing_silence
        return self.sentence_end_silence if judged else self.no_lm_silence

    def silence_for(self, sentence_end: float | None) -> float:
        """The trailing silence that ends the segment, given the word LM's log10 P(</s>) for its best hypothesis
        at the first possible end (None: no LM to ask, or a fixed rule)."""
        if self.trailing_silence is not None:
            return self.trailing_silence
        if sentence_end is None:
            return self.no_lm_silence
        return self.sentence_end_silence if sentence_end >= self.sentence_end_logprob else self.mid_phrase_silence


def frames_of(seconds: float, frame_seconds: float) -> int:
    """A rule's seconds in encoder frames (at least one)."""
    return max(1, round(seconds / frame_seconds))


def deadline(last: int | None, start: int, cfg: EndpointConfig, frame_seconds: float, silence: float) -> int:
    """The frame at which the segment starting at frame `start` ends unless a token comes first, `last` being the
    frame of its last token so far (None: nothing decoded in it yet) and `silence` the trailing silence (s) that
    ends it after that token."""
    longest = start + frames_of(cfg.max_segment, frame_seconds)
    if last is None:
        return min(longest, start + frames_of(cfg.silence_no_speech, frame_seconds))
    after_speech = frames_of(silence, frame_seconds)
    return min(longest, max(start + round(cfg.min_segment / frame_seconds), last + 1 + after_speech))


def heard_by(end: int, last: int | None, start: int, cfg: EndpointConfig, frame_seconds: float,
             lookahead: int) -> int:
    """The frames that must be in, all blank after `last`, for a pause to end its segment at frame `end`: with
    `cfg.through_chunk`, through the end of the model's lookahead chunk (`lookahead` frames, chunks counted from
    the stream's start) that holds the end's frame, which the model computes all at once; else `end`. Rules 1 and 5
    (no speech yet, the longest segment) end at their frame whatever follows."""
    longest = start + frames_of(cfg.max_segment, frame_seconds)
    if last is None or end >= longest or not cfg.through_chunk or lookahead <= 1:
        return end
    return min(-(-end // lookahead) * lookahead, longest)


Ask = Callable[[int, int], float]  # (last token's frame, the frame of its pause's first possible end) -> silence (s)


def end_frame(tokens: list[Token], start: int, frames: int, cfg: EndpointConfig, frame_seconds: float,
              ask: Ask | None = None, lookahead: int = 0) -> int | None:
    """Frame where the segment starting at frame `start` with `tokens` ends, if an endpoint rule fires before
    frame `frames` (frames decoded so far); else None. `ask`: where a word LM judges the pauses, called once a
    pause reaches its first possible end; its answer is the silence that ends that pause (None: no LM judges).
    `lookahead`: the model's lookahead chunk in frames (`heard_by`; 0: none).

    The segment covers frames [start, end); tokens at or after `end` belong to the next one.
    """
    first = cfg.first_silence(ask is not None)
    last: int | None = None
    for token in [*tokens, None]:
        reached = frames if token is None else token.frame  # blank up to here since `last`
        end = deadline(last, start, cfg, frame_seconds, first)
        heard = heard_by(end, last, start, cfg, frame_seconds, lookahead) <= reached
        if heard and last is not None and ask is not None:  # the pause may end here: the LM judges how soon
            end = deadline(last, start, cfg, frame_seconds, ask(last, end))
            heard = heard_by(end, last, start, cfg, frame_seconds, lookahead) <= reached
        if heard:
            return end
        if token is None:
            return None
        last = token.frame
    return None  # not reached: the loop returns at its last item
