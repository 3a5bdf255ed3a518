"""The second pass's neural word LM: trained with torch (asr.training.lm.neural), read with numpy alone
(asr.decoding.neural_lm), the two giving the same scores."""
from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from asr.decoding.neural_lm import BOUNDARY, NeuralLM, NeuralLMError, Pieces
from asr.decoding.prefix_tree import spans, windows
from asr.pretrained import default_rescore_lm_path, read_safetensors
from asr.training.lm.neural import NeuralLMConfig, WordTransformer, export, load_state, train

TINY = NeuralLMConfig(vocab=40, cutoffs=(8, 20), dim=32, layers=2, heads=4, context=8)
WORDS = ["<s>", "<unk>"] + [f"W{i}" for i in range(38)]


def tiny_model(seed: int = 0) -> WordTransformer:
    torch.manual_seed(seed)
    model = WordTransformer(TINY).eval()
    with torch.no_grad():  # weights that float16 holds exactly, so the exported file is the same model
        for p in model.parameters():
            p.copy_((p + 0.05 * torch.randn_like(p)).half().float())
    return model


def whole_sequences(model: WordTransformer, sentences: list[list[int]]) -> np.ndarray:
    """The torch model's scores of the sentences read as the second pass read them before it was pieced: side by
    side, padded, each window of the context whole (the first, then the next context / 2 positions in each)."""
    C, T = model.cfg.context, max(len(s) for s in sentences) + 1
    x, y = np.zeros((len(sentences), T), dtype=np.int64), np.zeros((len(sentences), T), dtype=np.int64)
    for i, s in enumerate(sentences):
        x[i, 1:len(s) + 1], y[i, :len(s)] = s, s
    with torch.no_grad():
        per_word = lambda a, b: model(torch.tensor(x[:, a:b]), torch.tensor(y[:, a:b])).numpy()  # noqa: E731
        parts, done = [per_word(0, min(C, T))], min(C, T)
        while done < T:
            end = min(done + C // 2, T)
            parts.append(per_word(end - C, end)[:, C - (end - done):])
            done = end
    keep = np.arange(T)[None, :] <= np.array([len(s) for s in sentences])[:, None]
    return (np.concatenate(parts, axis=1) * keep).sum(1)


def nbest_like(rng: np.random.Generator, count: int, length: int) -> list[list[int]]:
    """Sentences as a long final's n-best holds them: one word sequence with a few words changed, some cut short."""
    base = rng.integers(2, TINY.vocab, length).tolist()
    out = []
    for _ in range(count):
        s = list(base)
        for at in rng.integers(0, length, rng.integers(0, 4)):
            s[at] = int(rng.integers(2, TINY.vocab))
        out.append(s[: length - int(rng.integers(0, 3))])
    return out


def test_numpy_reads_the_same_scores_as_torch(tmp_path: Path) -> None:
    model = tiny_model()
    export(model, WORDS, tmp_path / "lm.safetensors")
    lm = NeuralLM.load(tmp_path / "lm.safetensors")
    sentences = [[5, 12, 39, 3], [5, 12, 30], [5, 12, 39], [25], [], [2, 3, 4, 5, 6, 7, 30]]  # shared prefixes,
    with torch.no_grad():  # the head's words and both clusters', an empty one, one that fills the context
        expected = [model(torch.tensor([[BOUNDARY, *s]]), torch.tensor([[*s, BOUNDARY]])).sum().item()
                    for s in sentences]
    assert lm.sentence_logprobs(sentences) == pytest.approx(expected, abs=1e-4)  # read as one prefix tree
    assert lm.ids(["W0", "NOPE", "W37"]) == [2, 1, 39]


@pytest.mark.parametrize("pieces", [Pieces(), Pieces(rows=1, keys=1, outputs=1, columns=1),
                                    Pieces(rows=3, keys=20, outputs=5, columns=7)])
def test_long_lists_read_in_pieces_score_as_whole_sequences(tmp_path: Path, pieces: Pieces) -> None:
    model = tiny_model(3)
    export(model, WORDS, tmp_path / "lm.safetensors")
    lm = NeuralLM.load(tmp_path / "lm.safetensors", pieces)
    rng = np.random.default_rng(0)
    for length in (5, 7, 8, 30, 41):  # within the context of 8, at its edge, over it in 4 and 8 windows
        sentences = nbest_like(rng, 12, length) + [[], [9]]
        expected = whole_sequences(model, sentences)
        got = lm.sentence_logprobs(sentences)
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-4)
        assert got.argmax() == expected.argmax()  # the second pass chooses the same hypothesis


def test_a_segment_is_read_after_the_words_before_it_its_end_apart(tmp_path: Path) -> None:
    """A segment in place (asr.decoding.rescore.Place) scores what its words add to the stream's words before it:
    the same as the whole read from the boundary, less the words before; the end after them apart."""
    model = tiny_model(2)
    export(model, WORDS, tmp_path / "lm.safetensors")
    lm = NeuralLM.load(tmp_path / "lm.safetensors")
    before, sentences = [7, 15, 3], [[5, 12, 39], [5, 12], [30], []]  # the whole of the longest fills the context

    def per_word(words: list[int]) -> np.ndarray:
        with torch.no_grad():
            return model(torch.tensor([[BOUNDARY, *words]]), torch.tensor([[*words, BOUNDARY]])).numpy()[0]

    words, ends = lm.word_and_end_logprobs(sentences, before)
    assert words == pytest.approx([per_word(before + s)[len(before):-1].sum() for s in sentences], abs=1e-4)
    assert ends == pytest.approx([per_word(before + s)[-1] for s in sentences], abs=1e-4)
    assert lm.sentence_logprobs(sentences, before) == pytest.approx(words + ends)
    assert lm.word_and_end_logprobs([[]])[0].tolist() == [0.0]  # no words: the end alone


def test_windows_are_laid_out_for_the_longest_sentence() -> None:
    assert spans(5, 8) == [(0, 5, 0)]
    assert spans(21, 8) == [(0, 8, 0), (4, 12, 8), (8, 16, 12), (12, 20, 16), (13, 21, 20)]
    trees = list(windows([[5, 6, 7], [5, 6, 8, 9, 10, 11, 12, 13, 14, 15]], 8))  # 11 positions: 2 windows
    assert [len(t.tokens) for t in trees] == [3 + 1 + 5, 8]  # the shared <s> 5 6 once; the short one all in the first
    assert trees[0].ancestors(np.array([3, 8])).tolist() == [[3, 2, 1, 0, -1, -1, -1, -1],  # 7, 6, 5, <s>
                                                             [8, 7, 6, 5, 4, 2, 1, 0]]  # 12 ... 8, 6, 5, <s>
    assert sorted(set(trees[1].owners.tolist())) == [1]


def test_each_next_word_distribution_sums_to_one(tmp_path: Path) -> None:
    export(tiny_model(1), WORDS, tmp_path / "lm.safetensors")
    lm = NeuralLM.load(tmp_path / "lm.safetensors", Pieces(columns=5))  # the normaliser summed over 5 at a time
    window = next(windows([[7, 15, 33]], TINY.context))
    states = lm._states(window)
    for node in range(len(window.tokens)):  # after <s>, <s> 7, <s> 7 15, <s> 7 15 33: every word
        logprobs = lm._output(states, np.full(TINY.vocab, node), np.arange(TINY.vocab))
        assert np.exp(logprobs.astype(np.float64)).sum() == pytest.approx(1.0, abs=1e-4)


def test_the_weights_are_a_memory_map_of_the_file_in_their_stored_dtype(tmp_path: Path) -> None:
    export(tiny_model(), WORDS, tmp_path / "lm.safetensors")
    mapped, meta = read_safetensors(tmp_path / "lm.safetensors", mapped=True)
    copied, _ = read_safetensors(tmp_path / "lm.safetensors")
    weight = mapped["output.head.weight"]
    assert weight.dtype == np.float16 and not weight.flags.writeable  # as stored, shared, read-only
    assert copied["output.head.weight"].dtype == np.float32 and copied["output.head.weight"].flags.writeable
    assert all(np.array_equal(mapped[name].astype(np.float32), copied[name]) for name in copied)
    assert NeuralLM.load(tmp_path / "lm.safetensors").w["blocks.0.qkv.weight"].dtype == np.float16
    data = bytearray((tmp_path / "lm.safetensors").read_bytes())
    (tmp_path / "cut.safetensors").write_bytes(data[:-100])  # a file cut short: its last tensor runs past the end
    with pytest.raises(NeuralLMError, match="does not match its shape"):
        NeuralLM.load(tmp_path / "cut.safetensors")


def test_a_long_final_costs_one_windows_memory() -> None:
    lm = NeuralLM.load(default_rescore_lm_path())
    rng = np.random.default_rng(0)

    def peak_mb(length: int) -> float:
        base = rng.integers(2, 32768, length).tolist()
        sentences = [[*base[:at], int(rng.integers(2, 32768)), *base[at + 1:]] for at in rng.integers(0, length, 16)]
        tracemalloc.start()
        lm.sentence_logprobs(sentences)
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        return peak

    short, long = peak_mb(100), peak_mb(400)  # one window; seven windows
    assert long < 1.5 * short and long < 16  # (read whole, 212 MB for 16 x 300 words)


def test_a_file_that_is_not_a_neural_lm_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NeuralLMError, match="no such"):
        NeuralLM.load(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"junk")
    with pytest.raises(NeuralLMError, match="not a safetensors file"):
        NeuralLM.load(tmp_path / "junk.safetensors")


def ids_of(sentences: list[list[int]], repeat: int) -> np.ndarray:
    return np.array([i for _ in range(repeat) for s in sentences for i in (BOUNDARY, *s)] + [BOUNDARY] * 10,
                    dtype=np.uint16)


def test_training_learns_and_a_run_resumes_from_its_state(tmp_path: Path) -> None:
    ids = ids_of([[2, 3, 4], [5, 6]], 200)
    dev = {"dev": ["W0 W1 W2", "W3 W4"]}
    kwargs = dict(minutes=5, save_minutes=5, batch=8, threads=1, dev=dev, log=lambda _: None,
                  config={"cutoffs": (8, 20), "dim": 32, "layers": 1, "heads": 4, "context": 8})
    train(ids, WORDS, tmp_path / "state", steps=60, **kwargs)
    rows = [json.loads(line) for line in (tmp_path / "state" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [60]
    assert rows[0]["dev ppl"] < 3  # the two sentences, nearly learnt
    model, record = load_state(tmp_path / "state")
    assert record["step"] == 60 and model.cfg.layers == 1
    train(ids, WORDS, tmp_path / "state", steps=None, **kwargs)  # the run's own schedule: it has ended
    assert len((tmp_path / "state" / "log.jsonl").read_text().splitlines()) == 1
    train(ids, WORDS, tmp_path / "state", steps=70, **kwargs)  # a longer schedule: it goes on from step 60
    rows = [json.loads(line) for line in (tmp_path / "state" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [60, 70]
    assert load_state(tmp_path / "state")[1]["schedule"]["steps"] == 70


def test_the_tools_check_a_neural_lm_file_before_loading_anything(tmp_path: Path) -> None:
    import argparse

    from asr.cli import checks

    (tmp_path / "other.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")  # a header, no format
    with pytest.raises(checks.InputError, match="not an asr neural word LM"):
        checks.decoding(argparse.Namespace(rescore_lm=str(tmp_path / "other.safetensors")))
    export(tiny_model(), WORDS, tmp_path / "lm.safetensors")
    checks.decoding(argparse.Namespace(rescore_lm=str(tmp_path / "lm.safetensors")))  # passes
