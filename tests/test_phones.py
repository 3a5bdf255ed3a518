"""Phone-CTC models: training targets through the lexicon (a toy run), and decoding phones to words through it."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import jiwer
import pytest
import torch
from hydra import compose, initialize_config_dir

from asr.audio.files import load_audio
from asr.decoding.beam import BeamConfig, LMError, WordLM
from asr.decoding.decoder import Decoder
from asr.decoding.hotwords import parse_hotwords
from asr.model.export import export_onnx
from asr.model.loader import load_model
from asr.model.recognizer import Recognizer
from asr.model.torch_backend import load_torch
from asr.training.acoustic import carry
from asr.text.g2p import load_g2p
from asr.text.lexicon import Lexicon
from asr.text.normalize import normalize
from asr.text.tokenizer import Tokenizer
from asr.training.lm.build import build_arpa
from asr.training.acoustic.data import load_sources
from asr.training.acoustic.train import new_module, train
from helpers import CONF, ROOT, SPEECHOCEAN, emissions, small_manifest, tiny_encoder

needs_data = pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")


def phone_config(run_dir: Path, manifest: Path, lexicon: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", [
            "model=tiny", "attention=w16_h4", "tokenizer.kind=phone", f"tokenizer.lexicon={lexicon}",
            f"run_dir={run_dir}", "data.num_workers=0", f"data.train=[{{manifest: {manifest}}}]",
            f"data.valid=[{{manifest: {manifest}}}]", "data.max_batch_seconds=1000", "trainer.accelerator=cpu",
            "trainer.devices=1", "threads=1", "trainer.enable_progress_bar=false", "data.augment.speeds=[1.0]",
            "data.augment.noise_prob=0", *overrides])


def small_lexicon(tmp_path: Path) -> Path:
    """Some of the manifest's words; the bundled G2P spells the others."""
    lexicon = Lexicon({"BUT": [("B", "AH", "T")], "THEY": [("DH", "EY",)], "GOOD": [("G", "UH", "D")],
                       "IT'S": [("IH", "T", "S")], "A": [("AH",), ("EY",)]})
    return lexicon.save(tmp_path / "lexicon.txt")


@needs_data
def test_a_toy_phone_model_trains_and_records_its_units(tmp_path):
    manifest = small_manifest(tmp_path, 8)
    cfg = phone_config(tmp_path / "run", manifest, small_lexicon(tmp_path), "trainer.max_steps=3",
                       "trainer.check_val_every_n_epoch=1")
    path = train(cfg)
    encoder, tokenizer, _ = load_model(path)
    assert tokenizer.kind == "phone" and tokenizer.word_boundary and tokenizer.units()[2] == "|"
    assert encoder.cfg.vocab_size == tokenizer.vocab_size == 42
    metrics = (tmp_path / "run" / "logs" / "version_0" / "metrics.csv").read_text()
    assert "val_wer" in metrics  # with phones: the phone error rate of the greedy phones


@needs_data
def test_phone_targets_come_from_the_lexicon_then_the_g2p(tmp_path):
    manifest = small_manifest(tmp_path, 8)
    cfg = phone_config(tmp_path / "run", manifest, small_lexicon(tmp_path), "tokenizer.word_boundary=false")
    module = new_module(cfg, load_sources(cfg.data.train))
    tokenizer = module.tokenizer
    assert not tokenizer.word_boundary and module.encoder.cfg.vocab_size == tokenizer.vocab_size == 41
    units = tokenizer.units()
    assert [units[i] for i in tokenizer.encode("BUT THEY")] == ["B", "AH", "T", "DH", "EY"]
    for utt in load_sources(cfg.data.train):  # every word spelled (the G2P fills the lexicon's gaps)
        assert 1 not in tokenizer.encode(normalize(utt.text)), utt.text


LEXICON = {"READ": [("R", "EH", "D"), ("R", "IY", "D")], "RED": [("R", "EH", "D")], "BOOK": [("B", "UH", "K")],
           "I": [("AY",)], "A": [("AH",), ("EY",)], "THEY": [("DH", "EY")], "IT": [("IH", "T")]}
CORPUS = ["I READ A BOOK", "THEY READ IT", "I READ IT", "A RED BOOK", "THEY READ A BOOK"]


def spoken(phones: str, boundary: bool) -> list[dict[str, float]]:
    """CTC frames saying `phones` ("|" between words; left out without a word boundary), a blank after each."""
    units = [p for p in phones.split() if boundary or p != "|"]
    return [frame for p in units for frame in ({p: 0.9}, {"<blank>": 0.9})]


@pytest.mark.parametrize("boundary", [True, False])
def test_phones_decode_to_words_through_every_pronunciation(tmp_path, boundary):
    tokenizer = Tokenizer("phone", word_boundary=boundary).with_lexicon(Lexicon(LEXICON))
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    lm = WordLM(tokenizer, arpa, BeamConfig(beam_size=16, lm_weight=1.0))
    assert len(lm.entries) == 1 + sum(len(p) for p in LEXICON.values())  # a trie entry a pronunciation (+ <unk>)
    decoder = Decoder(tokenizer, lm)
    for said in ("AY | R IY D | AH | B UH K", "AY | R EH D | AH | B UH K"):  # READ's two pronunciations
        assert decoder.text(decoder.decode(emissions(tokenizer, spoken(said, boundary)))) == "I READ A BOOK", said


def test_a_phone_model_without_an_lm_searches_its_whole_lexicon(tmp_path):
    """What greedy decoding becomes for phones: a lexicon search with every word equally likely."""
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon(LEXICON))
    lm = WordLM(tokenizer, None, BeamConfig(beam_size=16, lexicon_words=2))  # the whole lexicon, whatever the limit
    assert lm.words.index_size() == len(LEXICON) + 1
    decoder = Decoder(tokenizer, lm)
    assert decoder.text(decoder.decode(emissions(tokenizer, spoken("DH EY | R IY D | IH T", True)))) == "THEY READ IT"
    with pytest.raises(LMError, match="needs a phone model"):
        WordLM(Tokenizer("char"), None)
    with pytest.raises(LMError, match="needs its pronunciation lexicon"):
        WordLM(Tokenizer("phone"), None)


def test_a_phone_models_lexicon_without_an_lm_is_cached_and_searches_the_same(tmp_path, monkeypatch):
    """Greedy decoding of a phone model spells its whole lexicon (seconds for the bundled one's 200k words): once per
    lexicon, then read from the cache (`asr.decoding.lexicon_cache`)."""
    from asr.decoding import beam  # noqa: PLC0415

    monkeypatch.setenv("ASR_CACHE_DIR", str(tmp_path / "cache"))
    tokenizer = Tokenizer.from_bytes(Tokenizer("phone").with_lexicon(Lexicon(LEXICON)).to_bytes())  # a fingerprint
    first = WordLM(tokenizer, None, BeamConfig(beam_size=16))
    assert [p.name[:6] for p in (tmp_path / "cache" / "lexicon").iterdir()] == ["no-lm-"]
    with monkeypatch.context() as patched:
        patched.setattr(beam, "phone_words", lambda *_: pytest.fail("the cached lexicon was spelled again"))
        second = WordLM(tokenizer, None, BeamConfig(beam_size=16, lexicon_words=2))  # the limit is not an LM's
    assert [second.words.get_entry(i) for i in range(second.words.index_size())] == \
        [first.words.get_entry(i) for i in range(first.words.index_size())]
    logprobs = emissions(tokenizer, spoken("DH EY | R IY D | IH T", True))
    assert {Decoder(tokenizer, lm).text(Decoder(tokenizer, lm).decode(logprobs)) for lm in (first, second)} == \
        {"THEY READ IT"}
    other = Tokenizer.from_bytes(Tokenizer("phone").with_lexicon(Lexicon({**LEXICON, "FROG": [("F", "R", "AA", "G")]}))
                                 .to_bytes())  # another lexicon: its own file
    assert WordLM(other, None).words.contains("FROG") and len(list((tmp_path / "cache" / "lexicon").iterdir())) == 2
    tokenizer.lexicon.add("FROG", ("F", "R", "AA", "G"))  # as an LM's words are filled in: no longer its bytes' lexicon
    assert not tokenizer.lexicon_as_loaded() and WordLM(tokenizer, None).words.contains("FROG")
    assert len(list((tmp_path / "cache" / "lexicon").iterdir())) == 2  # nor cached under their fingerprint


def test_lm_words_outside_the_lexicon_are_spelled_by_the_g2p(tmp_path):
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon(LEXICON, g2p=load_g2p()))
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS + ["I READ A BOOK TO KATHLEEN"]))
    lm = WordLM(tokenizer, arpa, BeamConfig(beam_size=16, lm_weight=1.0))
    assert "KATHLEEN" in tokenizer.lexicon  # filled in one batch before the trie is built
    logprobs = emissions(tokenizer, spoken("AY | R EH D | AH | B UH K | T UW | K AE TH L IY N", True))
    assert Decoder(tokenizer, lm).text(Decoder(tokenizer, lm).decode(logprobs)) == "I READ A BOOK TO KATHLEEN"


def test_the_decoder_gives_a_phone_model_words_times_and_confidences(tmp_path):
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon(LEXICON))
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    logprobs = emissions(tokenizer, spoken("DH EY | R IY D | AH | B UH K", True))
    decoder = Decoder.load(tokenizer, arpa, BeamConfig(beam_size=16, lm_weight=1.0), restorer=None)
    assert decoder.kind == "beam"
    search = decoder.search()
    search.push(logprobs[:6])  # DH EY | R: THEY is finished, READ is not
    assert decoder.text(search.best()) == "THEY"
    search.push(logprobs[6:])
    tokens, words = decoder.finish(search, 0.04, logprobs)
    assert decoder.text(tokens) == "THEY READ A BOOK"
    assert [w.word for w in words] == ["THEY", "READ", "A", "BOOK"]
    assert [round(w.start / 0.04) for w in words] == [0, 6, 14, 18]  # each word's first phone's frame
    assert all(0.5 < w.confidence <= 1.0 for w in words)
    greedy = Decoder.load(tokenizer, None, BeamConfig(beam_size=16), restorer=None)
    assert greedy.kind == "lexicon" and greedy.text(greedy.decode(logprobs)) == "THEY READ A BOOK"


def test_more_homophones_than_a_trie_node_holds_keep_the_likeliest(tmp_path, capfd):
    """flashlight keeps 6 words a spelling: the LM's likeliest are kept, quietly."""
    names = ["KARR", "KAHR", "CARR", "KAR", "KARRE", "KAAR", "CAHR", "QARR"]
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon({name: [("K", "AA", "R")] for name in names}))
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa([" ".join(names[:i + 1]) for i in range(len(names))]))  # KARR likeliest, QARR least
    lm = WordLM(tokenizer, arpa, BeamConfig(beam_size=16, lm_weight=1.0))
    assert "limit" not in capfd.readouterr().err
    decoder = Decoder(tokenizer, lm)
    assert decoder.text(decoder.decode(emissions(tokenizer, spoken("K AA R", True)))) == "KARR"


def test_homophones_the_search_cannot_tell_apart_leave_one_word(tmp_path):
    """Homophones the LM scores alike (without an LM: all of them) tie in a hypothesis, so only float rounding,
    which batching changes, would pick one: the trie keeps the first (the LM's likeliest, else the lexicon's)."""
    spellings = {"TO": [("T", "UW")], "TOO": [("T", "UW")], "TWO": [("T", "UW")], "TEW": [("T", "UW")]}
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon(spellings))
    labels = lambda lm: [lm.words.get_entry(i) for i in lm.trie.search(  # noqa: E731
        [lm.units.get_index(u) for u in ("T", "UW", "|")]).labels]
    assert labels(WordLM(tokenizer, None, BeamConfig(beam_size=16))) == ["TO"]
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(["TO TO TWO", "TOO TEW"]))  # after <s>: TO, TOO seen; TEW and TWO alike (backed off)
    assert labels(WordLM(tokenizer, arpa, BeamConfig(beam_size=16))) == ["TO", "TEW", "TOO"]


def in_git_history(blob: str) -> bool:
    """Whether git holds this object: a clone with its history does, a shallow one (git clone --depth 1) not."""
    return subprocess.run(["git", "cat-file", "-e", blob], cwd=ROOT, capture_output=True).returncode == 0


def test_the_phone_arms_start_from_the_shipped_model(tmp_path):
    """recipes/phones/start.py: b keeps every shipped tensor but the output layer; c only the CMVN statistics;
    both are states a continue.py period forks."""
    spec = importlib.util.spec_from_file_location("phones_start", ROOT / "recipes" / "phones" / "start.py")
    start = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(start)
    if not start.REFERENCE.is_file() and not in_git_history(start.REFERENCE_BLOB):
        pytest.skip(f"needs git's history (git fetch --unshallow): a shallow clone lacks blob {start.REFERENCE_BLOB}, "
                    "the model shipped when the A/B began")
    lexicon = Lexicon(LEXICON).save(tmp_path / "lexicon.txt")
    shipped_encoder = start.shipped_model()[0]  # the character model shipped when the A/B began (arm a's start)
    shipped = shipped_encoder.state_dict()
    for arm in ("b", "c"):
        assert start.main([arm, "--minutes", "0", "--lexicon", str(lexicon), "--out", str(tmp_path / arm)]) == 0
        encoder, tokenizer, info = load_model(tmp_path / arm / "model.safetensors")
        assert tokenizer.kind == "phone" and dict(tokenizer.lexicon.items()) == LEXICON
        assert encoder.cfg.vocab_size == 42 and encoder.cfg.d_model == shipped_encoder.cfg.d_model
        same = {k for k, v in encoder.state_dict().items() if v.shape == shipped[k].shape and torch.equal(v, shipped[k])}
        expected = {k for k in shipped if not k.startswith("ctc.")} if arm == "b" else {"cmvn.mean", "cmvn.std"}
        assert same == expected, arm
        period, _ = carry.current_period(tmp_path / "work" / arm, tmp_path / arm, tmp_path / "synthetic", 0)
        assert period["period"] == 1 and period["step_offset"] == 0 and Path(period["init_from"]).is_file()
    assert start.main(["a", "--out", str(tmp_path / "a")]) == 0  # the reference: the shipped model as it is
    encoder, tokenizer, _ = load_model(tmp_path / "a" / "model.safetensors")
    assert tokenizer.kind == "char" and all(torch.equal(v, shipped[k]) for k, v in encoder.state_dict().items())


@needs_data
def test_a_phone_run_without_its_lexicon_is_one_line(tmp_path):
    manifest = small_manifest(tmp_path, 2)
    done = subprocess.run([sys.executable, "-m", "asr.training", "model=tiny", "tokenizer.kind=phone",
                           f"tokenizer.lexicon={tmp_path / 'missing.txt'}", f"run_dir={tmp_path / 'run'}",
                           f"data.train=[{{manifest: {manifest}}}]", f"data.valid=[{{manifest: {manifest}}}]"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"asr.training: error: {tmp_path / 'missing.txt'}: no such lexicon file"


def test_a_hotword_outside_the_lm_is_spelled_by_the_g2p(tmp_path):
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon(LEXICON, g2p=load_g2p()))
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    decoder = Decoder(tokenizer, WordLM(tokenizer, arpa, BeamConfig(beam_size=16, lm_weight=1.0)))
    name = " ".join(tokenizer.spell("KATHLEEN")[:-1])  # the G2P's pronunciation, without the boundary
    logprobs = emissions(tokenizer, spoken(f"AY | R EH D | {name}", True))
    assert "KATHLEEN" not in decoder.text(decoder.decode(logprobs))
    biased = decoder.with_hotwords(parse_hotwords(["Kathleen"], "test", tokenizer))
    assert biased.text(biased.decode(logprobs)) == "I READ KATHLEEN"


def test_a_phone_model_runs_torch_free_with_its_lexicon_and_the_g2p(tmp_path):
    """An ONNX export keeps the lexicon in tokenizer.bin; the torch-free runtime decodes words through it (the
    G2P spelling an LM word it lacks) without importing torch."""
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon(LEXICON))
    export_onnx(tiny_encoder(3, vocab_size=tokenizer.vocab_size), tokenizer, {}, tmp_path / "onnx")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS + ["THEY READ TO KATHLEEN"]))
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np\n"
            "from asr.decoding.beam import BeamConfig\n"
            "from asr.decoding.decoder import Decoder\n"
            "from asr.model.backend import load_backend\n"
            f"model, tokenizer, info = load_backend({str(tmp_path / 'onnx')!r}, backend='onnx')\n"
            "assert tokenizer.kind == 'phone' and 'READ' in tokenizer.lexicon and tokenizer.lexicon.g2p is not None\n"
            f"decoder = Decoder.load(tokenizer, {str(arpa)!r}, BeamConfig(beam_size=16, lm_weight=1.0), restorer=None)\n"
            "said = 'DH EY | R EH D | T UW'.split() + ['|'] + tokenizer.spell('KATHLEEN')[:-1]\n"
            "units = tokenizer.units()\n"
            "logprobs = np.full((2 * len(said), len(units)), np.log(0.1 / len(units)), np.float32)\n"
            "for i, p in enumerate(said):\n"
            "    logprobs[2 * i, units.index(p)] = logprobs[2 * i + 1, 0] = np.log(0.9)\n"
            "print(decoder.text(decoder.decode(logprobs)))\n"
            "assert not any(m == 'torch' or m.startswith('torch.') for m in sys.modules if sys.modules[m])\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "THEY READ TO KATHLEEN"


@needs_data
def test_a_tiny_phone_model_overfits_twenty_utterances_and_decodes_words(tmp_path):
    """Real audio through the whole phone path: targets spelled by the G2P, CTC over phones, the search with an
    LM of the sentences spelling them back into words."""
    manifest = small_manifest(tmp_path, 20)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    lexicon = Lexicon(g2p=load_g2p())
    lexicon.fill({w for r in rows for w in normalize(r["text"]).split()})
    cfg = phone_config(tmp_path / "run", manifest, lexicon.save(tmp_path / "lexicon.txt"), "trainer.max_steps=400",
                       "trainer.check_val_every_n_epoch=400", "optim.lr=3e-3", "optim.warmup_steps=30",
                       "optim.decay_steps=370", "model.d_model=96", "checkpoint_every_steps=400",
                       "data.augment.time_masks=0", "data.augment.freq_masks=0")
    recognizer = Recognizer(*load_torch(train(cfg)), tail_seconds=0.0)
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa([normalize(r["text"]) for r in rows]))
    decoder = Decoder.load(recognizer.tokenizer, arpa, BeamConfig(), restorer=None)
    hyps = [decoder.text(decoder.decode(recognizer.run(load_audio(r["audio"])))) for r in rows]
    refs = [normalize(r["text"]) for r in rows]
    assert jiwer.wer(refs, hyps) < 0.1, list(zip(refs, hyps))


def test_a_phone_models_lexicon_can_be_replaced_and_its_weights_stay(tmp_path):
    """scripts/set_lexicon.py: the new lexicon (its words and order) in the file, every tensor as stored."""
    from asr.model.loader import save_model
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon(LEXICON))
    model = tmp_path / "phones.safetensors"
    save_model(model, tiny_encoder(vocab_size=tokenizer.vocab_size), tokenizer, {"steps": 3}, half=True)
    newer = Lexicon({"BOOK": [("B", "UH", "K")], "READ": [("R", "IY", "D")], "CAT": [("K", "AE", "T")]})
    out = tmp_path / "relexiconed.safetensors"
    done = subprocess.run([sys.executable, "scripts/set_lexicon.py", str(model), str(newer.save(tmp_path / "l.txt")),
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (before, _, info), (after, again, info_after) = load_model(model), load_model(out)
    assert again.lexicon.words() == ["BOOK", "READ", "CAT"] and again.lexicon.pronunciations("READ") == [("R", "IY", "D")]
    assert info_after == info and out.stat().st_size < model.stat().st_size + 1000  # still float16
    assert all(torch.equal(v, after.state_dict()[k]) for k, v in before.state_dict().items())
    letters = Tokenizer("char")
    save_model(tmp_path / "char.safetensors", tiny_encoder(vocab_size=letters.vocab_size), letters, {}, half=True)
    char_model = subprocess.run([sys.executable, "scripts/set_lexicon.py", str(tmp_path / "char.safetensors"),
                                 str(tmp_path / "l.txt"), "--out", str(tmp_path / "x.safetensors")],
                                cwd=ROOT, capture_output=True, text=True)
    assert char_model.returncode == 1 and char_model.stderr.count("\n") == 1 and "no lexicon" in char_model.stderr


def test_fine_tunings_greedy_score_of_a_phone_model_is_its_lexicon_search(tmp_path, monkeypatch):
    """asr.finetune scores a model greedy and beam before and after; a phone model has no greedy text, so its
    "greedy" row is the lexicon searched without an LM, as every tool's --greedy (it read 100% WER before)."""
    import argparse

    from asr.model.loader import save_model
    from asr.training.finetune import pipeline
    tokenizer = Tokenizer("phone").with_lexicon(Lexicon(LEXICON))
    model = tmp_path / "phones.safetensors"
    save_model(model, tiny_encoder(vocab_size=tokenizer.vocab_size), tokenizer, {}, half=True)
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(build_arpa(CORPUS))
    kinds = []
    monkeypatch.setattr(pipeline.report, "score",
                        lambda recognizer, utts, decoder: kinds.append(decoder.kind) or {"wer": 0.0})
    pipeline.score_model(model, [], {"greedy": None, "beam": arpa}, None, argparse.Namespace(threads=1, device=None))
    assert kinds == ["lexicon", "beam"]
