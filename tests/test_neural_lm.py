"""The second pass's neural word LM: trained with torch (asr.training.neural_lm), read with numpy alone
(asr.decoding.neural_lm), the two giving the same scores."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from asr.decoding.neural_lm import BOUNDARY, NeuralLM, NeuralLMError
from asr.training.neural_lm import NeuralLMConfig, WordTransformer, export, load_state, train

TINY = NeuralLMConfig(vocab=40, cutoffs=(8, 20), dim=32, layers=2, heads=4, context=8)
WORDS = ["<s>", "<unk>"] + [f"W{i}" for i in range(38)]


def tiny_model(seed: int = 0) -> WordTransformer:
    torch.manual_seed(seed)
    model = WordTransformer(TINY).eval()
    with torch.no_grad():  # weights that float16 holds exactly, so the exported file is the same model
        for p in model.parameters():
            p.copy_((p + 0.05 * torch.randn_like(p)).half().float())
    return model


def test_numpy_reads_the_same_scores_as_torch(tmp_path: Path) -> None:
    model = tiny_model()
    export(model, WORDS, tmp_path / "lm.safetensors")
    lm = NeuralLM.load(tmp_path / "lm.safetensors")
    sentences = [[5, 12, 39, 3], [5, 12, 30], [5, 12, 39], [25], [], [2, 3, 4, 5, 6, 7, 30]]  # shared prefixes,
    with torch.no_grad():  # the head's words and both clusters', an empty one, one that fills the context
        expected = [model(torch.tensor([[BOUNDARY, *s]]), torch.tensor([[*s, BOUNDARY]])).sum().item()
                    for s in sentences]
    assert lm.sentence_logprobs(sentences) == pytest.approx(expected, abs=1e-4)  # read as one prefix tree
    assert lm._padded(sentences) == pytest.approx(expected, abs=1e-4)  # read side by side
    assert lm.ids(["W0", "NOPE"]) == [2, 1]


def test_each_next_word_distribution_sums_to_one(tmp_path: Path) -> None:
    export(tiny_model(1), WORDS, tmp_path / "lm.safetensors")
    lm = NeuralLM.load(tmp_path / "lm.safetensors")
    x = np.tile([[BOUNDARY, 7, 15, 33]], (TINY.vocab, 1))  # one history, every word after it
    y = np.tile(np.arange(TINY.vocab)[:, None], (1, 4))
    assert np.exp(lm._logprobs(x, y)).sum(0) == pytest.approx(np.ones(4), abs=1e-4)


def test_a_sentence_longer_than_the_context_is_read_in_windows(tmp_path: Path) -> None:
    export(tiny_model(2), WORDS, tmp_path / "lm.safetensors")
    lm = NeuralLM.load(tmp_path / "lm.safetensors")
    long = list(range(2, 22))  # 20 words, context 8
    x, y = np.array([[BOUNDARY, *long]]), np.array([[*long, BOUNDARY]])
    per_word = lm._logprobs(x, y)
    assert per_word.shape == (1, 21) and np.isfinite(per_word).all()
    assert per_word[0, :8] == pytest.approx(lm._logprobs(x[:, :8], y[:, :8])[0])  # the first window alone
    assert lm.sentence_logprobs([long])[0] == pytest.approx(per_word.sum())


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
