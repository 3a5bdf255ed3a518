"""Hotword biasing of the lexicon beam search: the user's words become possible outputs and are favoured.

A `Biasing` is built once per hotword list (`WordLM.biasing.get(hotwords)`, cached):

- words outside the search's lexicon are added to a copy of its trie, spelled with the model's units
  and labelled past the LM's dictionary; the word LM scores them as its unknown word;
- `HotwordLM`, a flashlight LM in front of the KenLM model, adds each listed word's boost when the
  word continues a listed phrase, and takes an unfinished phrase's bonus back when the phrase breaks
  off (or the segment ends), so only whole phrases keep their bonus.

A HotwordLM state stands for a whole word history, as flashlight's KenLM states do, so the search
merges the same hypotheses with a list as without one (an empty list changes nothing).
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol

from flashlight.lib.text.decoder import LM, LMState

from asr.decoding.hotwords import Hotword
from asr.text.tokenizer import Tokenizer

if TYPE_CHECKING:
    from flashlight.lib.text.decoder import Dictionary, Trie

CACHED_LISTS = 4  # hotword lists whose tries stay built (a server's connections often share one)


class Weighted(Protocol):
    """The one search setting a hotword list reads (of `asr.decoding.beam.BeamConfig`)."""

    lm_weight: float  # the word LM's weight in the search score


class LexiconLM(Protocol):
    """What a hotword list is compiled against: `asr.decoding.beam.WordLM` (which holds a `BiasingCache`, so
    this module names only what it reads of one)."""

    lm: LM  # the KenLM model
    unk: int  # its unknown word's index
    cfg: Weighted
    words: Dictionary  # the LM's words -> indices
    units: Dictionary  # the model's units -> ids
    tokenizer: Tokenizer
    trie: Trie  # the lexicon's

    def build_trie(self, extra: list[tuple[list[int], int, float]]) -> Trie:
        """The lexicon trie plus `extra` entries (unit ids, word label, score)."""


class PhraseNode:
    """A position in the phrase trie: the words of a listed phrase matched so far."""

    __slots__ = ("children", "boost", "end", "pending")

    def __init__(self):
        self.children: dict[int, PhraseNode] = {}
        self.boost = 0.0  # earned on entering this node
        self.end = False  # a listed phrase ends here
        self.pending = 0.0  # bonus earned since the last finished phrase on the path (taken back on a break)


class Biasing:
    """One hotword list, compiled for one `WordLM`: its trie, its phrase trie and its word labels."""

    def __init__(self, lm: LexiconLM, hotwords: list[Hotword]):
        self.ken, self.unk = lm.lm, lm.unk
        if lm.cfg.lm_weight <= 0:
            raise ValueError("hotwords need a word LM weight > 0 (--lm-weight)")
        self.scale = 1.0 / (lm.cfg.lm_weight * math.log(10))  # search score (ln) -> the LM's log10, pre-weight
        self.base = lm.unk + 1  # labels from here on are words the LM does not know
        labels: dict[str, int] = {}
        extra: list[tuple[list[int], int, float]] = []
        unk_score = lm.lm.score(lm.lm.start(False), lm.unk)[1]
        for hotword in hotwords:
            for word in hotword.words:
                if word in labels:
                    continue
                if lm.words.contains(word):
                    labels[word] = lm.words.get_index(word)
                else:
                    labels[word] = self.base + len(extra)
                    spelling = [lm.units.get_index(unit) for unit in lm.tokenizer.spell(word)]
                    extra.append((spelling, labels[word], unk_score + hotword.boost * self.scale))
        self.added = [word for word, label in labels.items() if label >= self.base]  # new to the lexicon
        self.listed = frozenset(labels)  # every word of the list's phrases
        self.trie: Trie = lm.build_trie(extra) if extra else lm.trie
        self.root = PhraseNode()
        for hotword in hotwords:
            node = self.root
            for word in hotword.words:
                label = labels[word]
                node = node.children.setdefault(label, PhraseNode())
                node.boost = max(node.boost, hotword.boost)
            node.end = True
        self._set_pending(self.root, 0.0)

    def _set_pending(self, node: PhraseNode, pending: float) -> None:
        """Each node's unfinished bonus: the boosts on its path since the last phrase end before it."""
        node.pending = 0.0 if node.end else pending
        for child in node.children.values():
            self._set_pending(child, node.pending + child.boost)

    def step(self, node: PhraseNode, label: int) -> tuple[float, PhraseNode]:
        """The bonus for word `label` after `node`, and the node after it."""
        bonus = 0.0
        child = node.children.get(label)
        if child is None and node is not self.root:  # the phrase broke off: take its unfinished bonus back
            bonus, child = -node.pending, self.root.children.get(label)
        if child is None:
            return bonus, self.root
        return bonus + child.boost, (self.root if child.end and not child.children else child)

    def new_lm(self) -> "HotwordLM":
        return HotwordLM(self)


class HotwordLM(LM):
    """The KenLM model plus the hotword bonuses, for one segment's search (its states live as long as it).

    Like flashlight's own KenLM wrapper, a state is the child of the state before it for one label, so a
    state stands for a whole word history and the search merges exactly the hypotheses it merges
    without a list: an empty list decodes exactly as no list."""

    def __init__(self, biasing: Biasing):
        LM.__init__(self)
        self.b = biasing
        self.root = LMState()
        self.keys: dict[tuple[int, int], LMState] = {}  # (parent's number, label) -> state
        self.info: dict[LMState, tuple] = {}  # state -> (KenLM state, phrase node, its number)

    def _state(self, parent: int, label: int, ken_state, node: PhraseNode) -> LMState:
        state = self.keys.get((parent, label))
        if state is None:
            number = len(self.keys)
            state = self.root.child(number)
            self.keys[(parent, label)] = state
            self.info[state] = (ken_state, node, number)
        return state

    def start(self, start_with_nothing: bool) -> LMState:
        return self._state(-1, int(start_with_nothing), self.b.ken.start(start_with_nothing), self.b.root)

    def score(self, state: LMState, label: int) -> tuple[LMState, float]:
        ken_state, node, number = self.info[state]
        ken_state, score = self.b.ken.score(ken_state, label if label < self.b.base else self.b.unk)
        bonus, node = self.b.step(node, label)
        return self._state(number, label, ken_state, node), score + bonus * self.b.scale

    def finish(self, state: LMState) -> tuple[LMState, float]:
        ken_state, node, number = self.info[state]
        ken_state, score = self.b.ken.finish(ken_state)
        return self._state(number, -1, ken_state, self.b.root), score - node.pending * self.b.scale


class BiasingCache:
    """A `WordLM`'s compiled hotword lists, the most recently used `CACHED_LISTS` of them."""

    def __init__(self, lm: LexiconLM):
        self.lm = lm
        self.lists: OrderedDict[tuple[Hotword, ...], Biasing] = OrderedDict()

    def get(self, hotwords: list[Hotword]) -> Biasing:
        key = tuple(hotwords)
        if key in self.lists:
            self.lists.move_to_end(key)
        else:
            self.lists[key] = Biasing(self.lm, hotwords)
            while len(self.lists) > CACHED_LISTS:
                self.lists.popitem(last=False)
        return self.lists[key]
