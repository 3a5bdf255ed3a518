"""Word n-gram back-off models held as numpy arrays: vectorised look-up, renormalising, mixing, ARPA in and out.

A model of order N lists, for each order n = 1..N, a sorted array of n-gram keys with each n-gram's
probability p(w | h) and, for n < N, its back-off weight gamma as a history (1 where it has none). An n-gram
of word ids (w1 .. wn) is one int64 key, BITS bits a word, the oldest word in the highest bits, so the keys of
one history are contiguous and `key >> BITS` is the history, `key & mask(n - 1)` the n-gram without its oldest
word. A reader backs off as ARPA readers (KenLM) do:

    p(w | h) = p_listed(h, w)                   if (h, w) is listed
             = gamma(h) * p(w | h')             otherwise (h' drops the oldest word; gamma 1 for an unlisted h)

Ids 0, 1 and 2 are <s> (listed with probability 0: it is never predicted), </s> and <unk>; every word of the
vocabulary is a listed unigram. Millions of n-grams cost seconds here; the dict-based `asr.training.lm` is for
toy text.
"""
from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asr.decoding.beam import open_arpa

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
BOS_ID, EOS_ID, UNK_ID = 0, 1, 2
BITS = 21  # bits a word: up to 2 M words, three words in an int64 key
MAX_ORDER = 63 // BITS


class ArpaError(ValueError):
    """An ARPA file that cannot be read; the message names the file, the line and the reason."""


def mask(n: int) -> int:
    """The bits of the last `n` words of a key."""
    return (1 << (BITS * n)) - 1


def pack(ids: np.ndarray) -> np.ndarray:
    """(N, n) word ids -> (N,) keys, the first column the oldest word."""
    keys = np.zeros(len(ids), np.int64)
    for column in range(ids.shape[1]):
        keys = (keys << BITS) | ids[:, column].astype(np.int64)
    return keys


def unpack(keys: np.ndarray, n: int) -> np.ndarray:
    """(N,) keys of n-grams -> (N, n) word ids, oldest first."""
    return np.stack([(keys >> (BITS * (n - 1 - j))) & mask(1) for j in range(n)], axis=1)


def group_sums(values: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted `groups` (N,): (the distinct groups (G,), the sum of `values` in each (G,))."""
    if len(groups) == 0:
        return groups, values.astype(np.float64)
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    return groups[starts], np.add.reduceat(values.astype(np.float64), starts)


@dataclass
class Order:
    keys: np.ndarray  # (N,) int64, sorted
    prob: np.ndarray  # (N,) float64: p(w | h), linear
    backoff: np.ndarray  # (N,) float64: gamma of this n-gram as a history (1: none)

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index, found) of each key in this order's listing."""
        index = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        return index, (self.keys[index] == keys) if len(self.keys) else np.zeros(len(keys), bool)


@dataclass
class BackoffModel:
    words: list[str]  # id -> word: <s>, </s>, <unk>, then the vocabulary
    orders: list[Order]  # orders[n - 1]: the listed n-grams

    @property
    def order(self) -> int:
        return len(self.orders)

    def ids(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.words)}

    def word_prob(self, word: str, history: tuple[str, ...] = ()) -> float:
        """p(word | history) by name (one look-up; 0 for a word outside the vocabulary, <unk> being a word of
        its own here); a history word outside the vocabulary is never listed, so the model backs off past it."""
        ids = self.ids()
        if word not in ids:
            return 0.0
        gram = [ids.get(w, mask(1)) for w in history[max(len(history) - self.order + 1, 0):]] + [ids[word]]
        return float(self.prob(pack(np.array([gram], np.int64)), len(gram))[0])

    def prob(self, keys: np.ndarray, n: int) -> np.ndarray:
        """p(w | h) of n-gram keys (N,), backing off through unlisted n-grams; a longer history than the model's
        order is cut to its newest words."""
        if n > self.order:
            keys, n = keys & mask(self.order), self.order
        index, found = self.orders[n - 1].find(keys)
        out = np.zeros(len(keys))
        out[found] = self.orders[n - 1].prob[index[found]]
        missing = ~found
        if n > 1 and missing.any():
            out[missing] = self.backoff(keys[missing] >> BITS, n - 1) * self.prob(keys[missing] & mask(n - 1), n - 1)
        return out

    def backoff(self, keys: np.ndarray, n: int) -> np.ndarray:
        """gamma of n-word histories (N,): 1 for one not listed."""
        index, found = self.orders[n - 1].find(keys)
        return np.where(found, self.orders[n - 1].backoff[index], 1.0)

    def sizes(self) -> list[int]:
        return [len(o.keys) for o in self.orders]

    def renormalise(self, start: int = 2) -> None:
        """Set every history's back-off weight so that p(. | h) sums to one over the vocabulary given its listed
        continuations, orders `start`..N in turn (each needs the lower orders final), in place:
        gamma(h) = (1 - sum of listed p(w | h)) / (1 - sum over the same w of p(w | h'))."""
        for n in range(start, self.order + 1):
            listed = self.orders[n - 1]
            lower = self.prob(listed.keys & mask(n - 1), n - 1)
            histories, listed_mass = group_sums(listed.prob, listed.keys >> BITS)
            _, lower_mass = group_sums(lower, listed.keys >> BITS)
            below = self.orders[n - 2]
            below.backoff = np.ones(len(below.keys))
            index, found = below.find(histories)
            gamma = np.maximum(1 - listed_mass, 0.0) / np.maximum(1 - lower_mass, 1e-12)
            below.backoff[index[found]] = gamma[found]

    def keep(self, n: int, kept: np.ndarray) -> None:
        """Unlist the n-grams of order n >= 2 where `kept` (a mask over its listing) is False (renormalise after)."""
        o = self.orders[n - 1]
        self.orders[n - 1] = Order(o.keys[kept], o.prob[kept], o.backoff[kept])

    def sentence_logprobs(self, sentences: list[list[str]]) -> tuple[np.ndarray, int]:
        """(log10 p of every in-vocabulary word and each </s> given its history, the number of words outside the
        vocabulary); an OOV word is skipped as a prediction and stands as <unk> in later histories (SRILM's
        perplexity convention)."""
        ids, oov, contexts, targets = self.ids(), 0, [], []
        for sentence in sentences:
            tokens = [BOS_ID] + [ids.get(word, UNK_ID) for word in sentence] + [EOS_ID]
            for i in range(1, len(tokens)):
                if tokens[i] == UNK_ID:
                    oov += 1
                    continue
                gram = tokens[max(i - self.order + 1, 0):i + 1]
                contexts.append(len(gram))
                targets.append(gram + [0] * (self.order - len(gram)))
        grams, lengths = np.asarray(targets, np.int64).reshape(-1, self.order), np.asarray(contexts)
        out = np.zeros(len(grams))
        for n in range(1, self.order + 1):
            rows = lengths == n
            out[rows] = self.prob(pack(grams[rows, :n]), n)
        return np.log10(np.maximum(out, 1e-99)), oov


def perplexity(model: BackoffModel, sentences: list[str]) -> tuple[float, float]:
    """(perplexity over in-vocabulary words and sentence ends, OOV rate %) of normalised sentences."""
    split = [s.split() for s in sentences]
    logprobs, oov = model.sentence_logprobs(split)
    words = sum(len(s) for s in split)
    return float(10 ** (-logprobs.mean())), 100.0 * oov / max(words, 1)


def interpolate(a: BackoffModel, b: BackoffModel, weight: float) -> BackoffModel:
    """weight * a + (1 - weight) * b over the union of both vocabularies (a word one model does not know has
    probability 0 there), listing every n-gram either lists with exactly the mixture's probability and every
    history with the back-off weight that makes it a distribution again (SRILM's `ngram -mix-lm`, static)."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the interpolation weight must be in [0, 1] (got {weight})")
    ids = a.ids()
    words = list(a.words) + [w for w in b.words if w not in ids]
    union = {word: i for i, word in enumerate(words)}
    b_to_union = np.array([union[w] for w in b.words], np.int64)
    order = max(a.order, b.order)
    listed = []
    for n in range(1, order + 1):
        keys = [a.orders[n - 1].keys] if n <= a.order else []
        if n <= b.order:
            keys.append(pack(b_to_union[unpack(b.orders[n - 1].keys, n)]))
        listed.append(np.unique(np.concatenate(keys)))
    listed[0] = np.arange(len(words), dtype=np.int64)
    mixed = BackoffModel(words, [Order(k, np.zeros(len(k)), np.ones(len(k))) for k in listed])
    union_to_b = np.full(len(words), len(b.words), np.int64)  # a word b lacks: an id b never lists
    union_to_b[b_to_union] = np.arange(len(b.words))
    for n, keys in enumerate(listed, start=1):
        mixed.orders[n - 1].prob = (weight * _prob_in(a, keys, n, len(a.words))
                                    + (1 - weight) * _prob_in(b, pack(union_to_b[unpack(keys, n)]), n, len(b.words)))
    mixed.renormalise()
    return mixed


def _prob_in(model: BackoffModel, keys: np.ndarray, n: int, size: int) -> np.ndarray:
    """p(w | h) in `model` of keys in its own ids, where an id >= size is a word it does not know: p = 0 as the
    predicted word; in a history it is never listed, so the model backs off past it."""
    p = model.prob(keys, n)
    p[(keys & mask(1)) >= size] = 0.0
    return p


def write_arpa(model: BackoffModel, out: str | Path) -> None:
    """`model` as an ARPA file (gzip-compressed when `out` ends in .gz), written whole, then renamed into place."""
    out = Path(out)
    partial = out.with_name(f".{out.name}.partial")
    if out.suffix == ".gz":
        with open(partial, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as f:
            with io.TextIOWrapper(f, encoding="utf-8", newline="\n") as text:
                write_arpa_text(model, text)
    else:
        with open(partial, "w", encoding="utf-8", newline="\n") as text:
            write_arpa_text(model, text)
    partial.replace(out)


def arpa_text(model: BackoffModel) -> str:
    """`model` as ARPA text."""
    text = io.StringIO()
    write_arpa_text(model, text)
    return text.getvalue()


def write_arpa_text(model: BackoffModel, text) -> None:
    """`model` in ARPA form onto the text stream `text`: log10 probabilities and back-off weights, a weight
    only where it is not 1."""
    words = np.array(model.words, dtype=object)
    text.write("\\data\\\n" + "".join(f"ngram {n}={size}\n" for n, size in enumerate(model.sizes(), 1)))
    for n, o in enumerate(model.orders, start=1):
        text.write(f"\n\\{n}-grams:\n")
        grams = [" ".join(row) for row in words[unpack(o.keys, n)]]
        logp = np.where(o.prob > 0, np.log10(np.maximum(o.prob, 1e-300)), -99.0).tolist()
        if n < model.order:
            bows = np.log10(np.maximum(o.backoff, 1e-300)).tolist()
            text.writelines(f"{p:.6f}\t{g}\t{w:.6f}\n" if w != 0.0 else f"{p:.6f}\t{g}\n"
                            for p, g, w in zip(logp, grams, bows))
        else:
            text.writelines(f"{p:.6f}\t{g}\n" for p, g in zip(logp, grams))
    text.write("\n\\end\\\n")


def read_arpa(path: str | Path) -> BackoffModel:
    """The model in an ARPA file (.gz too); ArpaError for one that is not ARPA or has no <unk>."""
    path = Path(path)
    ids: dict[str, int] = {BOS: BOS_ID, EOS: EOS_ID, UNK: UNK_ID}
    rows: list[list] = []  # per order: [keys list, logp list, bow list]
    order, number = 0, 0
    try:
        with open_arpa(path) as f:
            for number, line in enumerate(f, start=1):
                fields = line.split()
                if not fields or fields[0] in ("\\data\\", "\\end\\", "ngram"):
                    continue
                if fields[0].startswith("\\") and fields[0].endswith("-grams:"):
                    order = int(fields[0][1:].split("-")[0])
                    rows.append([[], [], []])
                    continue
                if order == 0 or len(fields) not in (order + 1, order + 2):
                    raise ArpaError(f"{path}:{number}: not an ARPA n-gram line of order {order}")
                key = 0
                for word in fields[1:order + 1]:
                    key = (key << BITS) | ids.setdefault(word, len(ids))
                rows[-1][0].append(key)
                rows[-1][1].append(float(fields[0]))
                rows[-1][2].append(float(fields[order + 1]) if len(fields) == order + 2 else 0.0)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as err:
        raise ArpaError(f"{path}: cannot read it as an ARPA file ({getattr(err, 'strerror', None) or err})") from None
    except ArpaError:
        raise
    except ValueError:
        raise ArpaError(f"{path}:{number}: malformed number") from None
    if order == 0 or UNK_ID not in set(rows[0][0]):
        raise ArpaError(f"{path}: not an ARPA model with <unk> (no unigrams, or no <unk> among them)")
    if len(ids) > mask(1) or len(rows) > MAX_ORDER:
        raise ArpaError(f"{path}: over {mask(1)} words or over order {MAX_ORDER}")
    for mark in {BOS_ID, EOS_ID} - set(rows[0][0]):  # a model without sentence marks: never predicted
        rows[0][0].append(mark)
        rows[0][1].append(-99.0)
        rows[0][2].append(0.0)
    orders = []
    for n, (keys, logp, bows) in enumerate(rows, start=1):
        keys_a = np.asarray(keys, np.int64)
        sort = np.argsort(keys_a, kind="stable")
        prob = np.where(np.asarray(logp) <= -99, 0.0, 10.0 ** np.asarray(logp))
        orders.append(Order(keys_a[sort], prob[sort], (10.0 ** np.asarray(bows))[sort]))
    words = [""] * len(ids)
    for word, i in ids.items():
        words[i] = word
    if len(orders[0].keys) != len(words):
        raise ArpaError(f"{path}: a word of its n-grams is not among its unigrams")
    return BackoffModel(words, orders)
