"""How the second pass's neural LM reads an n-best list: in windows of its context, each window a prefix tree.

An n-best list's sentences share most of their words, so each distinct prefix is read once: a node of the tree
is one word at one position, attending to itself and the nodes before it on its path (its ancestors), which is
what it would see in its own sentence. A sentence longer than the context is read in overlapping windows, each
word predicted from up to `context - 1` words before it: the first window holds positions 0 .. context-1, each
later one the next context / 2 positions, read after the context / 2 before them. The windows are laid out for
the list's longest sentence (every sentence is cut at the same positions), as when the list was read side by
side, padded; each window is its own tree, and `windows` makes them one at a time, so what a list costs to read
is bounded by one window's tree (the sentences times the context), however long its sentences are.

A segment of a stream is read after the words the stream said before it (`before`: read, not scored, shared by
every sentence of the list); each sentence's end is its own edge (`Window.ending`), which `asr.decoding.rescore`
weighs apart.

    for window in windows(sentences, context=128):    # each: nodes (tokens, positions, parents) and the edges
        ...                                           # (node, next word) whose log-probs the sentences sum
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

BOUNDARY = 0  # the sentence boundary's id: read before the first word, predicted after the last


@dataclass
class Window:
    """One window's prefix tree. Nodes, parents first: `tokens` (the word read there), `positions` (in the
    window, 0 at its start) and `parents` (-1 at a root); `edges`: (node, next word) pairs whose log-probs are
    wanted, each once; `uses` and `owners`: each sentence's edges, edge `uses[i]` counting for sentence
    `owners[i]`, and `ending[i]` whether it is the sentence's end (the boundary after its last word)."""

    tokens: np.ndarray
    positions: np.ndarray
    parents: np.ndarray
    edge_nodes: np.ndarray
    edge_nexts: np.ndarray
    uses: np.ndarray
    owners: np.ndarray
    ending: np.ndarray

    def ancestors(self, nodes: np.ndarray) -> np.ndarray:
        """(B,) nodes -> (B, depth) each node, then its parent, its parent's parent ... to its root, -1 past it."""
        parents = np.append(self.parents, -1)  # index -1 (past a root) stays -1
        columns, current = [nodes], nodes
        while True:
            current = parents[current]
            if (current < 0).all():
                return np.stack(columns, axis=1)
            columns.append(current)


def spans(length: int, context: int) -> list[tuple[int, int, int]]:
    """The windows (start, end, first position scored) over `length` positions: one where it fits the context,
    else the first whole and each later one scoring the context / 2 positions after the last scored."""
    if length <= context:
        return [(0, length, 0)]
    out, done = [(0, context, 0)], context
    while done < length:
        end = min(done + context // 2, length)
        out.append((end - context, end, done))
        done = end
    return out


def windows(sentences: list[list[int]], context: int, before: list[int] | tuple[int, ...] = ()) -> Iterator[Window]:
    """The windows of word-id sentences, each read from BOUNDARY and the words `before` it, and ended by BOUNDARY;
    one prefix tree each."""
    length = len(before) + max(len(s) for s in sentences) + 1
    for start, end, first in spans(length, context):
        yield _tree([[*before, *s] for s in sentences], start, end, max(first, len(before)))


def _tree(sentences: list[list[int]], start: int, end: int, first: int) -> Window:
    """The prefix tree of the sentences' positions start .. end-1 (those from `first` scored)."""
    node: dict[tuple[int, int], int] = {}  # (parent, word) -> node
    tokens, positions, parents = [], [], []
    edge: dict[tuple[int, int], int] = {}  # (node, next word) -> edge
    uses, owners, ending = [], [], []
    for owner, sentence in enumerate(sentences):
        x, y = [BOUNDARY, *sentence], [*sentence, BOUNDARY]
        last = min(end, len(x))
        if last <= first:  # a sentence that ended before this window scores nothing in it
            continue
        here = -1
        for t in range(start, last):
            key = (here, x[t])
            if key not in node:
                node[key] = len(tokens)
                tokens.append(x[t]), positions.append(t - start), parents.append(here)
            here = node[key]
            if t >= first:
                uses.append(edge.setdefault((here, y[t]), len(edge)))
                owners.append(owner), ending.append(t == len(x) - 1)
    pairs = np.array(list(edge), dtype=np.int64).reshape(-1, 2)
    return Window(np.array(tokens, dtype=np.int64), np.array(positions, dtype=np.int64),
                  np.array(parents, dtype=np.int64), pairs[:, 0], pairs[:, 1],
                  np.array(uses, dtype=np.int64), np.array(owners, dtype=np.int64), np.array(ending, dtype=bool))
