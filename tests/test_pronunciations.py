"""Training a phone model on the pronunciation it aligns best (tokenizer.pronunciations=aligned)."""
import math

import pytest
import torch

from asr.text.lexicon import Lexicon
from asr.text.tokenizer import Tokenizer
from asr.training.acoustic import module
from asr.training.acoustic.data import collate
from asr.training.acoustic.pronunciations import choose, targets_and_alternatives
from asr.training.acoustic.train import train
from helpers import SPEECHOCEAN, small_manifest
from test_phones import phone_config, small_lexicon

LEXICON = Lexicon({"THE": [("DH", "AH"), ("DH", "IY")], "CAT": [("K", "AE", "T")],
                   "TO": [("T", "UW"), ("T", "IH"), ("T", "AH")]})


@pytest.fixture(params=[True, False], ids=["boundary", "no-boundary"])
def tokenizer(request) -> Tokenizer:
    return Tokenizer("phone", word_boundary=request.param).with_lexicon(LEXICON)


def names(tokenizer: Tokenizer, ids) -> str:
    return " ".join(tokenizer.units()[i] for i in ids)


def test_the_targets_are_encode_and_the_alternatives_their_words_other_spellings(tokenizer):
    targets, alternatives = targets_and_alternatives(tokenizer, "THE CAT TO THE")
    assert targets == tokenizer.encode("THE CAT TO THE")
    bar = " |" if tokenizer.word_boundary else ""
    assert [(names(tokenizer, targets[s:e]), [names(tokenizer, o) for o in others])
            for s, e, others in alternatives.words] == [
        (f"DH AH{bar}", [f"DH IY{bar}"]), (f"T UW{bar}", [f"T IH{bar}", f"T AH{bar}"]),
        ("DH AH", ["DH IY"])]  # the last word, like encode's, without the boundary unit


def frames(tokenizer: Tokenizer, said: str) -> torch.Tensor:
    """Log-probs (T, V) of CTC frames saying the unit names in `said`, each followed by a blank."""
    index = {u: i for i, u in enumerate(tokenizer.units())}
    rows = []
    for unit in said.split():
        for i in (index[unit], 0):
            row = torch.full((tokenizer.vocab_size,), 0.01)
            row[i] = 1.0
            rows.append(row / row.sum())
    return torch.stack(rows).log()


def test_each_word_takes_the_spelling_the_frames_say(tokenizer):
    bar = " |" if tokenizer.word_boundary else ""
    texts, said = ["THE CAT TO THE", "CAT THE"], [f"DH IY{bar} K AE T{bar} T AH{bar} DH AH", f"K AE T{bar} DH IY"]
    items = []
    for text, heard in zip(texts, said):
        targets, alternatives = targets_and_alternatives(tokenizer, text)
        items.append((frames(tokenizer, heard), torch.tensor(targets), alternatives))
    batch = collate(items)
    logprobs = torch.nn.utils.rnn.pad_sequence([item[0] for item in items], batch_first=True)
    out_lens = torch.tensor([len(item[0]) for item in items])
    targets, lens = choose(logprobs, out_lens, batch["targets"], batch["target_lens"], batch["alternatives"])
    assert [names(tokenizer, targets[b, :lens[b]].tolist()) for b in range(2)] == [heard for heard in said]


def test_a_spelling_too_long_for_the_frames_is_never_chosen():
    tokenizer = Tokenizer("phone", word_boundary=False).with_lexicon(
        Lexicon({"AN": [("AH", "N"), ("AE", "AE", "AE", "AE", "N")]}))
    targets, alternatives = targets_and_alternatives(tokenizer, "AN")
    logprobs = torch.full((1, 3, tokenizer.vocab_size), math.log(1 / tokenizer.vocab_size))  # 3 frames: 5 cannot fit
    chosen, lens = choose(logprobs, torch.tensor([3]), torch.tensor([targets]), torch.tensor([2]), [alternatives])
    assert names(tokenizer, chosen[0, :lens[0]].tolist()) == "AH N"


def test_an_utterance_without_alternatives_keeps_its_targets(tokenizer):
    targets, alternatives = targets_and_alternatives(tokenizer, "CAT")
    t, lens = torch.tensor([targets]), torch.tensor([len(targets)])
    chosen, chosen_lens = choose(frames(tokenizer, "K AE T")[None], torch.tensor([6]), t, lens, [alternatives])
    assert chosen is t and chosen_lens is lens


@pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")
def test_a_toy_phone_model_trains_on_aligned_pronunciations(tmp_path, monkeypatch):
    manifest = small_manifest(tmp_path, 8)  # the small lexicon gives "A" two pronunciations
    calls = []

    def counted(*args):
        calls.append(sum(len(a.words) for a in args[-1]))
        return choose(*args)
    monkeypatch.setattr(module, "choose", counted)
    cfg = phone_config(tmp_path / "run", manifest, small_lexicon(tmp_path), "trainer.max_steps=3",
                       "tokenizer.pronunciations=aligned")
    assert train(cfg).exists()
    assert len(calls) == 3 and all(words > 0 for words in calls)  # every training step chose, among several words
    with pytest.raises(ValueError, match="tokenizer.pronunciations='best'"):
        train(phone_config(tmp_path / "bad", manifest, small_lexicon(tmp_path), "tokenizer.pronunciations=best"))
