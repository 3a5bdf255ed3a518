"""Interpolated modified Kneser-Ney n-gram estimation (Chen & Goodman, 1998) over counts held as numpy arrays.

Counting: each sentence is `<s> w1 .. wk </s>` in word ids; an n-gram never spans two sentences. Counts of a
large corpus are taken shard by shard (`count`) and summed (`merge`), so memory follows the number of distinct
n-grams, not the corpus.

Estimation, order n with adjusted counts a(h, w) (raw counts at the top order and for n-grams that start with
<s>; below the top, the number of distinct words seen before the n-gram, its continuation count):

    p(w | h) = (a(h, w) - D(a)) / a(h) + gamma(h) * p(w | h'),   gamma(h) = (D1 N1(h) + D2 N2(h) + D3 N3+(h)) / a(h)

a(h) the sum over w, Nk(h) the number of w with a(h, w) = k (3+: at least 3), h' the history without its
oldest word, D1, D2, D3 from the order's counts of counts: Y = n1 / (n1 + 2 n2), Dk = k - (k + 1) Y n(k+1) / nk (one
discount Y for all where the counts are too few: `discounts`).
Unigrams interpolate with the uniform distribution over the vocabulary (every word but <s>), so a word of the
vocabulary never seen in the text still has a probability. Listed as ARPA (`asr.training.lm.ngram`), each
n-gram carries this interpolated probability and each history gamma(h) as its back-off weight.

`prune_counts` unlists n-grams seen fewer than a cut-off (and any with <unk>, which the search never outputs)
and renormalises the back-off weights, so every history is still a distribution.
"""
from __future__ import annotations

import numpy as np

from asr.training.lm.ngram import BITS, BOS_ID, EOS_ID, UNK_ID, BackoffModel, Order, group_sums, mask

Counts = list[tuple[np.ndarray, np.ndarray]]  # per order n (index n - 1): (sorted keys, counts)


def flatten(sentences: list[list[int]]) -> np.ndarray:
    """Id sentences -> one stream `<s> ids </s> <s> ids </s> ...` (int64)."""
    stream: list[int] = []
    for ids in sentences:
        stream.append(BOS_ID)
        stream.extend(ids)
        stream.append(EOS_ID)
    return np.asarray(stream, np.int64)


def count(stream: np.ndarray, order: int) -> Counts:
    """The n-gram counts (n = 1..order) of a stream of `flatten`ed sentences; <s> is not counted as a unigram."""
    counts = []
    for n in range(1, order + 1):
        width = len(stream) - n + 1
        if width <= 0:
            counts.append((np.zeros(0, np.int64), np.zeros(0, np.int64)))
            continue
        keys = np.zeros(width, np.int64)
        valid = np.ones(width, bool)
        for j in range(n):
            column = stream[j:j + width]
            keys = (keys << BITS) | column
            if j < n - 1:
                valid &= column != EOS_ID  # nothing follows </s> within a sentence
            if j > 0:
                valid &= column != BOS_ID  # nothing precedes <s>
        if n == 1:
            valid &= stream != BOS_ID
        counts.append(tuple(np.unique(keys[valid], return_counts=True)))
    return counts


def merge(shards: list[Counts]) -> Counts:
    """The sum of several shards' counts."""
    merged = []
    for n in range(len(shards[0])):
        keys = np.concatenate([shard[n][0] for shard in shards])
        values = np.concatenate([shard[n][1] for shard in shards])
        order = np.argsort(keys, kind="stable")
        unique, sums = group_sums(values[order], keys[order])
        merged.append((unique, sums.astype(np.int64)))
    return merged


def discounts(adjusted: np.ndarray) -> np.ndarray:
    """[0, D1, D2, D3] from the counts of counts n1..n4 of one order's adjusted counts. Where one of them is 0 or a
    Dk falls outside (0, k) (small text: a user's few sentences), one discount for all, Y = n1 / (n1 + 2 n2), as
    original Kneser-Ney, kept within [0.1, 0.9]."""
    n = [int(np.count_nonzero(adjusted == k)) for k in range(1, 5)]
    y = n[0] / (n[0] + 2 * n[1]) if n[0] + 2 * n[1] else 0.5
    if all(n):
        d = [k - (k + 1) * y * n[k] / n[k - 1] for k in range(1, 4)]
        if all(0 < dk < k for k, dk in enumerate(d, start=1)):
            return np.array([0.0, *d])
    return np.array([0.0] + [min(max(y, 0.1), 0.9)] * 3)


def adjusted_counts(counts: Counts) -> list[np.ndarray]:
    """Per order, the counts KN estimates from: raw at the top order and for n-grams starting with <s>, else
    the number of distinct words seen before the n-gram."""
    order = len(counts)
    adjusted = [counts[-1][1]]
    for n in range(order - 1, 0, -1):
        keys, raw = counts[n - 1]
        above = counts[n][0] & mask(n)  # the (n+1)-grams without their first word, one per distinct left word
        distinct, continuations = np.unique(above, return_counts=True)
        index = np.minimum(np.searchsorted(distinct, keys), max(len(distinct) - 1, 0))
        found = distinct[index] == keys if len(distinct) else np.zeros(len(keys), bool)
        value = np.where(found, continuations[index], 0)
        starts_bos = (keys >> (BITS * (n - 1))) == BOS_ID
        adjusted.insert(0, np.where(starts_bos, raw, value))
    return adjusted


def estimate(counts: Counts, words: list[str]) -> BackoffModel:
    """The interpolated modified Kneser-Ney model of `counts` over the vocabulary `words` (id -> word)."""
    vocabulary_size = len(words)
    adjusted = adjusted_counts(counts)
    order = len(counts)
    ids = np.arange(vocabulary_size, dtype=np.int64)
    unigram = np.zeros(vocabulary_size)
    keys, a = counts[0][0], adjusted[0]
    unigram[keys] = a
    model = BackoffModel(list(words), [Order(ids, np.zeros(vocabulary_size), np.ones(vocabulary_size))])
    d = discounts(a)
    predicted = vocabulary_size - 1  # every word but <s>
    total = unigram.sum()
    gamma = (d[np.minimum(unigram, 3).astype(int)] * (unigram > 0)).sum() / total if total else 1.0
    prob = np.maximum(unigram - d[np.minimum(unigram, 3).astype(int)], 0) / max(total, 1) + gamma / predicted
    prob[BOS_ID] = 0.0
    model.orders[0].prob = prob
    for n in range(2, order + 1):
        keys, a = counts[n - 1][0], adjusted[n - 1].astype(np.float64)
        d = discounts(a)
        discount = d[np.minimum(a, 3).astype(int)]
        histories = keys >> BITS
        _, history_total = group_sums(a, histories)
        _, history_discount = group_sums(discount, histories)
        first = np.flatnonzero(np.r_[True, histories[1:] != histories[:-1]])
        spread = np.repeat(np.arange(len(first)), np.diff(np.r_[first, len(keys)]))  # n-gram -> its history
        gamma = history_discount / history_total
        lower = model.prob(keys & mask(n - 1), n - 1)
        prob = (a - discount) / history_total[spread] + gamma[spread] * lower
        below = model.orders[n - 2]
        index, found = below.find(histories[first])
        below.backoff[index[found]] = gamma[found]
        model.orders.append(Order(keys, prob, np.ones(len(keys))))
    return model


def prune_counts(model: BackoffModel, counts: Counts, min_counts: list[int]) -> BackoffModel:
    """Unlist the n-grams (n >= 2) seen fewer than min_counts[n - 2] times and those with <unk>; keep every
    prefix and suffix of an n-gram still listed (an ARPA reader needs them); renormalise. In place."""
    for n in range(model.order, 1, -1):
        keys, raw = counts[n - 1]
        assert np.array_equal(keys, model.orders[n - 1].keys), "prune the counts' own model, before any other"
        kept = raw >= min_counts[n - 2]
        for j in range(n):
            kept &= ((keys >> (BITS * j)) & mask(1)) != UNK_ID
        if n < model.order:  # the histories and lower n-grams of what the order above kept
            above = model.orders[n].keys
            needed = np.union1d(above >> BITS, above & mask(n))
            kept |= np.isin(keys, needed)
        model.keep(n, kept)
    model.renormalise()
    return model
