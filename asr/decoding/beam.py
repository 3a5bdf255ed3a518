"""CTC beam search with a lexicon and a word n-gram LM (flashlight-text), run incrementally.

The lexicon is every word of the ARPA model spelled in the model's own units (BPE pieces, or
letters followed by the word separator, or a phone model's pronunciations: one trie entry each, all
for the same word), so the search only ever outputs words the LM knows. A phone model's search without
an LM (`arpa=None`) spells every word of its lexicon and scores them all alike.
`WordLM` reads the ARPA file and builds the lexicon trie once; each `BeamSearch` is one segment's
search over it, fed chunk by chunk:

    lm = WordLM(tokenizer, "lm.arpa", BeamConfig())
    search = lm.search(offset=0)
    search.push(logprobs)          # (T, V) log-probs of the next frames
    search.best()                  # a partial result: the best hypothesis's finished words, then
                                   #   the greedy letters of the word still being spoken
    search.final()                 # end of segment: the best complete hypothesis

A segment of a stream is searched from the sentence start, and its final list scored again where it stands in the
stream (`asr.decoding.rescore.Place`): after the words of the finals before it (`before`), its sentence's end weighed
by how likely its closing pause is inside a sentence (`final(mid=...)`).

A character model is trained to put the separator only *between* words, so `final` first feeds
one frame in which the separator is certain: without it no hypothesis could finish its last word,
and the best finished one would often be the one that left that word out.
"""
from __future__ import annotations

import dataclasses
import gzip
import itertools
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from flashlight.lib.text.decoder import CriterionType, LexiconDecoder, LexiconDecoderOptions, SmearingMode, Trie, ZeroLM
from flashlight.lib.text.dictionary import Dictionary

from asr.decoding import lexicon_cache, lm_binary
from asr.decoding.lm_binary import LMError
from asr.decoding.rescore import Place, Rescorer, labels_of, ngram_score
from asr.decoding.biasing import Biasing, BiasingCache
from asr.decoding.ctc import GreedySearch, Token
from asr.decoding.sentence_end import sentence_end
from asr.text.tokenizer import BLANK, Tokenizer

BOS, EOS, UNK = "<s>", "</s>", "<unk>"  # the ARPA format's sentence marks and unknown word
_IMPOSSIBLE = -1.0e4  # a log-probability no path survives (flashlight wants finite scores)
_TRIE_LABELS = 6  # words a trie node can hold (flashlight's kTrieMaxLabel); more would be dropped with a warning


@dataclass
class BeamConfig:
    beam_size: int = 512  # hypotheses kept per frame. With the letter model shipped before and the LM on
    # dev-clean-2's first 300 utterances (2026-12-03, LM weight 1.5, word score 1): 64 52.81, 128 50.94,
    # 256 49.64, 512 48.37, 1024 47.97 %
    lm_weight: float = 2.75  # weight and word score tuned for the bundled CTC-CRF model and LM (2026-12-06, beam
    word_score: float = -1.0  # 512) on LibriSpeech speaker 8226, held out of every training mixture (118 utterances):
    # 9.59% WER; 2.25 / -1 9.61, 3.25 / -1 10.34, 2.75 / 0 10.34 (the CTC phone model before it: 2.25 / -1)
    lexicon_words: int | None = 150000  # the LM's most probable words that the search may output (None: all). With
    # the bundled model and LM (2026-12-06, asr.evaluate): all 206k words dev-clean-2 20.36 / speechocean762 dev
    # 33.90, 150k 20.34 / 33.90, 100k 20.47 on dev-clean-2; the 150k-word trie is a quarter smaller in memory
    beam_threshold: float = 12.0  # drop hypotheses scoring this far below the frame's best. At beam 512 (2026-12-03)
    # 12 and 15 gave the same WER on dev-clean-2's first 300 utterances in half the time; at beam 128 15 and 25 did
    token_beam: int | None = None  # units a hypothesis may extend by at each frame, the acoustically likeliest
    # (None: every unit)

    def validate(self) -> "BeamConfig":
        if self.beam_size < 1:
            raise ValueError(f"beam size must be >= 1 (got {self.beam_size})")
        if self.lexicon_words is not None and self.lexicon_words < 1:
            raise ValueError(f"lexicon words must be >= 1 (got {self.lexicon_words})")
        if self.token_beam is not None and self.token_beam < 1:
            raise ValueError(f"token beam must be >= 1 (got {self.token_beam})")
        if not self.beam_threshold > 0:
            raise ValueError(f"beam threshold must be > 0 (got {self.beam_threshold})")
        return self


def arpa_words(arpa: Path) -> list[str]:
    """The unigram words of an ARPA file, most probable first, without <s>, </s> and <unk>; LMError if
    it is not ARPA."""
    words, logprobs, section = [], [], None
    try:
        with open_arpa(arpa) as f:
            for number, line in enumerate(f, start=1):
                line = line.strip()
                if section is None and line and line != "\\data\\":
                    raise LMError(f"{arpa}: not an ARPA language model (line {number} is not '\\data\\')")
                if line.startswith("\\"):
                    if section == "\\1-grams:":
                        break
                    section = line
                elif section == "\\1-grams:" and line:
                    fields = line.split()
                    if len(fields) < 2:
                        raise LMError(f"{arpa}: malformed unigram on line {number}")
                    if fields[1] not in (BOS, EOS, UNK):
                        words.append(fields[1])
                        logprobs.append(_log_prob(fields[0], arpa, number))
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError):
        raise LMError(f"{arpa}: not an ARPA language model (not UTF-8 text, or a broken .gz)") from None
    if not words:
        raise LMError(f"{arpa}: not an ARPA language model (no unigrams)")
    return [words[i] for i in np.argsort(-np.asarray(logprobs), kind="stable")]


def open_arpa(path: Path):
    """An ARPA file's text for reading, gzip-compressed where its name ends in .gz (as KenLM reads it)."""
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def _log_prob(text: str, arpa: Path, number: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise LMError(f"{arpa}: malformed unigram probability on line {number}") from None


@dataclass
class Entries:
    """The lexicon trie's words, packed (lists of lists cost ~250 bytes a word, 50 MB for 200k words): entry i
    spells word `labels[i]` as units[offsets[i]:offsets[i + 1]], scored `scores[i]` (its log10 p after <s>, which
    the trie smears towards the root); iterating gives (unit ids, label, score). `kept[i]`: whether the lexicon
    trie holds entry i (`WordLM.build_trie` leaves some homophones out)."""

    units: np.ndarray  # (U,) int32
    offsets: np.ndarray  # (N + 1,) int64
    labels: np.ndarray  # (N,) int32
    scores: np.ndarray  # (N,) float32
    kept: np.ndarray  # (N,) bool

    def __len__(self) -> int:
        return len(self.labels)

    def __iter__(self):
        return self.rows()

    def rows(self, only_kept: bool = False, chunk: int = 4096):
        """(unit ids, label, score) of every entry (or only the kept ones), a chunk's arrays made Python lists at a
        time (the whole lexicon's would hold ~35 MB more at once)."""
        for start in range(0, len(self), chunk):
            stop = min(start + chunk, len(self))
            offsets = (self.offsets[start:stop + 1] - self.offsets[start]).tolist()
            units = self.units[self.offsets[start]:self.offsets[stop]].tolist()
            kept = self.kept[start:stop].tolist()
            for i, (label, score) in enumerate(zip(self.labels[start:stop].tolist(), self.scores[start:stop].tolist())):
                if kept[i] or not only_kept:
                    yield units[offsets[i]:offsets[i + 1]], label, score


def phone_words(tokenizer: Tokenizer, words: list[str] | None, most: int | None) -> list[str]:
    """The words a phone model's search spells: the LM's (None: every word of its lexicon), the G2P's
    pronunciations of those the lexicon lacks made in batches first."""
    if tokenizer.lexicon is None:
        raise LMError("a phone model's search needs its pronunciation lexicon (Tokenizer.with_lexicon)")
    if words is None:
        return tokenizer.lexicon.words()
    tokenizer.lexicon.fill(words[:most])
    return words


class WordLM:
    """An ARPA word LM with its lexicon trie in the tokenizer's units; shared by any number of searches.
    `arpa=None` (phone models only): no LM, every word of the tokenizer's lexicon equally likely."""

    def __init__(self, tokenizer: Tokenizer, arpa: str | Path | None, cfg: BeamConfig = BeamConfig()):
        self.tokenizer, self.cfg, self.path = tokenizer, cfg.validate(), None if arpa is None else Path(arpa)
        if self.path is not None and not self.path.is_file():
            raise LMError(f"{self.path}: no such language model file")
        if self.path is None and tokenizer.kind != "phone":
            raise LMError("a search without a word LM needs a phone model (greedy decoding spells words itself)")
        units = tokenizer.units()
        self.units, self.units_list = Dictionary(units), units
        separator = tokenizer.word_separator()
        # BPE marks word starts inside its pieces and has no separator unit: <unk> (never emitted) stands in.
        self.silence = units.index(separator) if separator else 1
        self.end_frame = None  # (1, V): the word separator, certain (character models only)
        if separator:
            self.end_frame = np.full((1, len(units)), _IMPOSSIBLE, np.float32)
            self.end_frame[0, self.silence] = 0.0
        self._cache = self._cache_file()
        self._stamp = lm_binary.stamp(self.path) if self._cache and self.path else ""
        stored = lexicon_cache.load(self._cache, self._stamp) if self._cache else None
        if stored is not None:
            names, arrays = stored
            self._entries: Entries | None = Entries(**arrays)
        else:
            names, self._entries = self._spell_words(tokenizer, cfg)
        self.words = Dictionary(names)  # word -> label, in the order spelled (<unk> last)
        self.lm = lm_binary.open_kenlm(self.path, self.words) if self.path else ZeroLM()
        if stored is None:
            self._score(self._entries, len(names))
            if self._cache is not None:
                try:
                    lexicon_cache.save(self._cache, self._stamp, names, vars(self._entries))
                    stored = True
                except OSError:  # an unwritable cache: the next load spells the words again
                    pass
        del names  # 206k strings: the Dictionary holds the words now
        self.trie = self.build_trie([])
        if stored is not None:  # in the cache: read again only for a hotword list's trie (`entries`), 13 MB less
            self._entries = None
        self.unk = self.words.get_index(UNK)
        self.biasing = BiasingCache(self)  # hotword lists -> their Biasing (asr.decoding.biasing)
        token_beam = min(cfg.token_beam or len(units), len(units))
        self.options = LexiconDecoderOptions(
            beam_size=cfg.beam_size, beam_size_token=token_beam, beam_threshold=cfg.beam_threshold, lm_weight=cfg.lm_weight,
            word_score=cfg.word_score, unk_score=float("-inf"), sil_score=0.0, log_add=False,
            criterion_type=CriterionType.CTC)

    @property
    def entries(self) -> Entries:
        """The lexicon trie's entries: kept where they are not cached, else read from the cache when asked for."""
        if self._entries is not None:
            return self._entries
        stored = lexicon_cache.load(self._cache, self._stamp)
        if stored is not None:
            return Entries(**stored[1])
        # the cache was removed or replaced: the lexicon's own words spelled again (the same labels)
        names, entries = self._spell([self.words.get_entry(i) for i in range(self.unk)], None)
        self._score(entries, len(names))
        self._entries = entries
        return entries

    def _score(self, entries: Entries, words: int) -> None:
        """Fill in each entry's score (its word's log10 p after <s>) and whether the lexicon trie keeps it."""
        start = self.lm.start(False)
        scores = np.fromiter((self.lm.score(start, word)[1] for word in range(words)), np.float32, words)
        entries.scores = scores[entries.labels]
        entries.kept = np.fromiter((kept for *_, kept in self._admitted([], entries)), bool, len(entries))

    def _cache_file(self) -> Path | None:
        """Where this LM's lexicon is cached (`asr.decoding.lexicon_cache`): for a tokenizer loaded from bytes, with a
        large LM (not a small one: well under a second) or none (a phone model's whole lexicon, seconds to spell, as
        its bytes hold it: not after an LM's words were filled in)."""
        if self.tokenizer.fingerprint is None or (self.path and self.path.stat().st_size < lm_binary.CONVERT_FROM):
            return None
        if self.path is None and not self.tokenizer.lexicon_as_loaded():
            return None
        return lexicon_cache.key_path(self.tokenizer.fingerprint, self.path, self.path and self.cfg.lexicon_words)

    def _spell_words(self, tokenizer: Tokenizer, cfg: BeamConfig) -> tuple[list[str], Entries]:
        """The lexicon's words (the LM's, most probable first, as far as the tokenizer spells them; <unk> last) and
        their trie entries, unscored."""
        words = arpa_words(self.path) if self.path else None
        most = cfg.lexicon_words if words else None  # without an LM: the whole lexicon
        words = phone_words(tokenizer, words, most) if tokenizer.kind == "phone" else words
        return self._spell(words, most)

    def _spell(self, words: list[str], most: int | None) -> tuple[list[str], Entries]:
        """The first `most` of `words` the tokenizer spells, then <unk>, and their trie entries, unscored."""
        tokenizer = self.tokenizer
        unit_ids = {unit: self.units.get_index(unit) for unit in self.units_list}
        spelled, offsets, labels = array("i"), array("q", [0]), array("i")  # grown entry by entry, no list per word
        names: list[str] = []
        for word in words:  # most probable first; spelled as far as the lexicon goes
            if most is not None and len(names) >= most:
                break
            if spellings := [s for s in tokenizer.pronunciations(word) if s]:  # several for a phone model's word
                for spelling in spellings:
                    spelled.extend(unit_ids[unit] for unit in spelling)
                    offsets.append(len(spelled))
                    labels.append(len(names))
                names.append(word)
        spelled.append(unit_ids[UNK])
        offsets.append(len(spelled))
        labels.append(len(names))
        names.append(UNK)
        return names, Entries(np.frombuffer(spelled, np.int32), np.frombuffer(offsets, np.int64),
                              np.frombuffer(labels, np.int32), np.zeros(len(labels), np.float32),
                              np.ones(len(labels), bool))

    def build_trie(self, extra: list[tuple[list[int], int, float]]) -> Trie:
        """The lexicon trie: every lexicon word, plus `extra` entries (unit ids, word label, score). A phone model's
        spelling holds at most flashlight's 6 words (homophones): `extra`'s first, then the LM's likeliest; a word
        spelled like one already there and scored alike at a sentence's start (two rare words the LM backs off
        for; without an LM, every homophone) is left out, as the search could tell the two apart only by float
        rounding, which batching changes (the first stays: the LM's likelier, or the lexicon's earlier). Letters
        spell each word apart."""
        trie = Trie(len(self.units_list), self.silence)
        if extra:
            for unit_ids, index, score, admitted in self._admitted(extra):
                if admitted:
                    trie.insert(unit_ids, index, score)
        else:  # the lexicon alone: the entries it keeps are known (and cached with them)
            for unit_ids, index, score in self._entries.rows(only_kept=True):
                trie.insert(unit_ids, index, score)
        trie.smear(SmearingMode.MAX)
        return trie

    def _admitted(self, extra: list[tuple[list[int], int, float]], lexicon: Entries | None = None):
        """(unit ids, label, score, whether the trie takes it) for `extra`'s entries, then the lexicon's (`lexicon`,
        else `entries`): the rule of `build_trie`."""
        held = {}  # spelling -> the scores of its words so far
        phones = self.tokenizer.kind == "phone"
        lexicon = self.entries if lexicon is None else lexicon
        entries = itertools.chain(((*entry, True) for entry in extra), ((*entry, False) for entry in lexicon))
        for unit_ids, index, score, is_extra in entries:
            if phones:
                key = bytes(unit_ids)  # phone ids < 256: a key of 40 bytes, not a tuple's 100
                scores = held.get(key, ())
                if len(scores) >= _TRIE_LABELS or (not is_extra and score in scores):
                    yield unit_ids, index, score, False
                    continue
                held[key] = (*scores, score)
            yield unit_ids, index, score, True

    @classmethod
    def shared(cls, tokenizer: Tokenizer, arpa: str | Path | None, cfg: BeamConfig = BeamConfig()) -> "WordLM":
        """The WordLM of these units, file (as it is now) and settings, loaded once per process: a 200k-word LM
        and its trie take seconds and hundreds of MB, so every decoder of a process that asks for the same one
        (a server worker's sessions, a second `asr.load()`) shares it. The last two loaded stay."""
        path = None if arpa is None else Path(arpa)
        stat = path.stat() if path is not None and path.is_file() else None
        key = (id(tokenizer) if tokenizer.kind == "phone" else tuple(tokenizer.units()), tokenizer.word_separator(),
               path and str(path.resolve()), stat and (stat.st_size, stat.st_mtime_ns), dataclasses.astuple(cfg))
        if key not in _SHARED:
            _SHARED[key] = cls(tokenizer, path, cfg)
            while len(_SHARED) > 2:
                _SHARED.pop(next(iter(_SHARED)))
        return _SHARED[key]

    def search(self, offset: int = 0, biasing: "Biasing | None" = None,
               rescorer: Rescorer | None = None, before: list[str] | tuple[str, ...] = ()) -> "BeamSearch":
        """A new search for a segment that starts at encoder frame `offset`, favouring `biasing`'s
        hotwords if given, its final ranked again by `rescorer` if given (`asr.decoding.rescore`) and scored after
        the words `before` it in its stream."""
        return BeamSearch(self, offset, biasing, rescorer, self.labels(before))

    def labels(self, words: list[str] | tuple[str, ...]) -> tuple[int, ...]:
        """The LM's labels of words (<unk>'s for a word it lacks)."""
        return tuple(self.words.get_index(word) if self.words.contains(word) else self.unk for word in words)


_SHARED: dict[tuple, WordLM] = {}  # WordLM.shared's: insertion order, oldest first


class BeamSearch:
    """One segment's incremental lexicon beam search; tokens carry absolute frames (offset + t)."""

    def __init__(self, lm: WordLM, offset: int = 0, biasing: "Biasing | None" = None,
                 rescorer: Rescorer | None = None, before: tuple[int, ...] = ()):
        self.lm, self.offset, self.frames, self.before = lm, offset, 0, before  # `before`: labels said before it
        trie, word_lm = (lm.trie, lm.lm) if biasing is None else (biasing.trie, biasing.new_lm())
        self.trie, self.word_lm = trie, word_lm  # flashlight holds them by reference only: this keeps them alive
        self.added = biasing.added if biasing is not None else []  # hotwords new to the lexicon: labels unk + 1 on
        self.decoder = LexiconDecoder(lm.options, trie, word_lm, lm.silence, BLANK, lm.unk, [], False)
        self.decoder.decode_begin()
        self.greedy = GreedySearch(offset)  # the letters after the search's last finished word
        self.heard: list[np.ndarray] = []  # the frames pushed (`sentence_end` searches its last ones again)
        self.done: list[Token] | None = None
        self.ranked: list = []  # after `final`: (score, flashlight's hypothesis), best first
        # the second pass ranks finals again, except a hotword list's: its words and bonuses are the first pass's
        self.rescorer = rescorer if biasing is None else None
        self.biased = biasing is not None

    def push(self, logprobs: np.ndarray) -> None:
        """Feed (T, V) log-probs of the next frames."""
        if self.done is not None:
            raise RuntimeError("push after final")
        logprobs = np.ascontiguousarray(logprobs, dtype=np.float32)
        self.greedy.push(logprobs)
        if logprobs.shape[0]:
            self.heard.append(logprobs)
            self.decoder.decode_step(logprobs.ctypes.data, logprobs.shape[0], logprobs.shape[1])
            self.frames += logprobs.shape[0]

    def best(self) -> list[Token]:
        """A partial result: the words of the best hypothesis up to its last finished word (flashlight
        reports a hypothesis only up to there), then the greedy tokens of the frames after it."""
        if self.done is not None:
            return self.done
        if self.frames == 0:
            return []
        best = self.decoder.get_best_hypothesis()
        path = best.tokens  # steps 0 .. L-1 = frames up to L-2
        words = self._tokens(path, best.words)
        after = self.offset + len(path) - 1
        return words + [t for t in self.greedy.tokens if t.frame >= after]

    def sentence_end(self) -> float | None:
        """log10 P(</s> | the best hypothesis so far) by the word LM, None without one (`asr.decoding.sentence_end`)."""
        return None if self.lm.path is None else sentence_end(self)

    def final(self, mid: float = 0.0) -> list[Token]:
        """End of segment: the best hypothesis that ends on a whole word, scored where the segment stands in its
        stream (after the words before it; `mid`: how likely its closing pause is inside a sentence, 0 at the stream's
        end) and by the second pass's score where the LM has one (`asr.decoding.rescore`). Later calls return the
        same."""
        if self.done is None:
            if self.frames == 0:
                self.done = []
            else:
                if self.lm.end_frame is not None:
                    self.decoder.decode_step(self.lm.end_frame.ctypes.data, 1, self.lm.end_frame.shape[1])
                self.decoder.decode_end()
                self.ranked = self._rank(self.decoder.get_all_final_hypothesis(), Place(self.before, mid))
                best = self.ranked[0][1] if self.ranked else None
                self.done = self._tokens(best.tokens, best.words) if best is not None else []
        return self.done

    def _rank(self, hypotheses: list, place: Place) -> list[tuple[float, object]]:
        """flashlight's final hypotheses (best first) -> (score, hypothesis), best first: the second pass's ranking,
        else the search's own score, the first-pass LM's part of either scored in `place` (a hotword list's search
        keeps its own: its LM adds the list's bonuses)."""
        if not hypotheses:
            return []
        if place.alone or self.biased or self.lm.path is None:  # no LM: nothing to score in place
            return self.rescorer.rank(hypotheses) if self.rescorer else [(h.score, h) for h in hypotheses]
        kept = hypotheses[: self.rescorer.cfg.nbest] if self.rescorer else hypotheses
        words = [labels_of(h) for h in kept]
        scores = {labels: ngram_score(self.lm.lm, self.lm.unk, labels, place) for labels in set(words)}  # each once
        first = [scores[labels] for labels in words]
        if self.rescorer:
            return self.rescorer.rank(kept, place, first)
        weight = self.lm.cfg.lm_weight
        return sorted(((h.score + weight * (lm - h.lmScore), h) for h, lm in zip(kept, first)), key=lambda p: -p[0])

    def alternatives(self, most: int = 32) -> list[tuple[float, list[Token]]]:
        """After `final`: the `most` best final hypotheses as (score, tokens), best first."""
        return [(score, self._tokens(h.tokens, h.words)) for score, h in self.ranked[:most]]

    def _tokens(self, path: list[int], labels: list[int] | None = None) -> list[Token]:
        """flashlight's path (a unit per step; step 0 is a boundary before frame 0) -> CTC tokens at
        their first frame, blanks and repeats removed; the appended separator frame maps to the last
        real frame. A phone model's tokens carry the words its search put on the path's `labels` (a word
        index per step, -1 where none), each on the last token at or before the word's step."""
        units = np.asarray(path, dtype=np.int64)
        before = np.concatenate([[BLANK], units[:-1]])
        steps = np.flatnonzero((units != BLANK) & (units != before) & (units >= 0))
        frames = self.offset + np.minimum(np.maximum(steps - 1, 0), self.frames - 1)
        tokens = [Token(unit, frame) for unit, frame in zip(units[steps].tolist(), frames.tolist())]
        if self.lm.tokenizer.kind == "phone" and labels is not None and tokens:
            for step, label in enumerate(labels):
                if label >= 0:
                    word = self.lm.words.get_entry(label) if label <= self.lm.unk else self.added[label - self.lm.unk - 1]
                    tokens[max(int(np.searchsorted(steps, step, side="right")) - 1, 0)].word = word
        return tokens
