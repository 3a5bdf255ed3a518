"""Kokoro English voices in the synthetic recipe: held-out voices can never be chosen for training or
blends, the sentence slices never overlap, and (with .venv-tts installed) one sentence really speaks."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "recipes/synthetic"))
import engines as E  # noqa: E402

NON_ENGLISH_KOKORO = ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo", "zf_xiaobei", "zm_yunxi",
                      "ef_dora", "em_alex", "ff_siwis", "hf_alpha", "hm_omega", "if_sara", "im_nicola", "pf_dora",
                      "pm_alex"]


def _prepare():
    spec = importlib.util.spec_from_file_location("synthetic_prepare_kokoro", ROOT / "recipes/synthetic/prepare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _bad(source: tuple[str, str]) -> bool:
    """The issue's list, written out independently of engines.py."""
    family, name = source
    if family == "kokoro":
        return name in {"af_sky", "am_echo", "bf_isabella", "bm_daniel"} or name[0] not in "ab"
    return source in {("festival", "cmu_us_slt_arctic_hts"), ("mbrola", "us2"), ("flite", "awb")}


@pytest.mark.parametrize("engine", list(E.SYNTH))
def test_no_training_voice_or_blend_part_is_held_out(engine):
    chosen = E.train_voices(engine)
    for v in chosen:
        assert not any(_bad(s) for s in E.sources(v)), v
        assert not E.is_held_out(v)
    stream = _prepare().Stream(engine, [], 0)  # what prepare.py draws training voices from
    assert stream.voices == chosen


def test_the_never_train_rule_catches_every_listed_voice():
    for name in NON_ENGLISH_KOKORO + list(E.KOKORO_EN_CHECK):
        assert E.never_train(E.Voice("kokoro_en", f"kokoro_en-{name}", ((name, 1.0),))), name
        blend = E.Voice("kokoro_en", "kokoro_en-x", (("af_bella", 0.5), (name, 0.5)))
        assert E.never_train(blend), name  # one held-out part is enough
    assert E.never_train(E.Voice("flite", "flite-awb", ("awb",)))
    assert E.never_train(E.Voice("festival", "festival-cmu", ("cmu_us_slt_arctic_hts",)))
    assert E.never_train(E.Voice("espeak", "espeak-mb-us2-m1", ("mb-us2", "m1")))
    assert all(E.never_train(v) for v in E.voices("kokoro"))  # the Japanese styles no longer train
    assert not E.train_voices("kokoro")
    assert "flite-awb" not in {v.speaker for v in E.train_voices("flite")}


def test_kokoro_english_voices_and_blends():
    named = [v for v in E.train_voices("kokoro_en") if len(v.args) == 1]
    blends = [v for v in E.train_voices("kokoro_en") if len(v.args) > 1]
    assert len(E.KOKORO_EN_VOICES) == 28 and len(named) == 24
    assert len(blends) == E.KOKORO_EN_BLENDS >= 1000
    assert len({v.args for v in blends}) == len(blends)
    for v in blends:
        names = [n for n, _ in v.args]
        assert 2 <= len(names) <= 3 and len(set(names)) == len(names)
        assert abs(sum(w for _, w in v.args) - 1) < 1e-9 and all(w >= 0.099 for _, w in v.args)
    assert blends == E.kokoro_en_blends()  # fixed by its seed
    p = E.voice_probs("kokoro_en", named + blends)
    assert abs(p.sum() - 1) < 1e-9 and abs(p[: len(named)].sum() - 0.25) < 1e-9
    assert E.kokoro_lang(E.Voice("kokoro_en", "x", (("bf_emma", 0.6), ("am_adam", 0.4)))) == "en-gb"
    assert E.kokoro_lang(E.Voice("kokoro_en", "x", (("bf_emma", 0.4), ("am_adam", 0.6)))) == "en-us"


def test_blend_is_the_weighted_mean_and_voices_pack_into_one_npz(tmp_path):
    rng = np.random.default_rng(0)
    for name in E.KOKORO_EN_VOICES:
        rng.standard_normal(510 * 256).astype("<f4").tofile(tmp_path / f"{name}.bin")
    E.pack_kokoro_voices(tmp_path, tmp_path / "voices.npz")
    voices = dict(np.load(tmp_path / "voices.npz"))
    assert sorted(voices) == sorted(E.KOKORO_EN_VOICES) and voices["af_bella"].shape == (510, 1, 256)
    mixed = E.blend_style(voices, (("af_bella", 0.25), ("bm_lewis", 0.75)))
    np.testing.assert_allclose(mixed, 0.25 * voices["af_bella"] + 0.75 * voices["bm_lewis"], rtol=1e-5, atol=1e-6)
    (tmp_path / "af_bella.bin").write_bytes(b"\0" * 16)
    with pytest.raises(ValueError, match="af_bella"):
        E.pack_kokoro_voices(tmp_path, tmp_path / "bad.npz")


def test_sentence_slices_are_disjoint_and_keep_the_old_engines_items():
    prepare = _prepare()
    n = 1000
    slices = prepare.train_slices(n, 0, E.LEGACY_ENGINES + ["kokoro_en"])
    seen: set[int] = set()
    for part in slices.values():
        assert not seen & set(part.tolist())
        seen |= set(part.tolist())
    assert seen == set(range(n)) and len(slices["kokoro_en"]) == n // 2
    order = np.random.default_rng(0).permutation(n)  # before kokoro_en: engine k read order[k::6]
    for k, e in enumerate(E.LEGACY_ENGINES):
        assert slices[e].tolist() == order[k::6][: len(slices[e])].tolist()


def test_kokoro_check_set_uses_only_the_four_held_out_voices_on_held_out_sentences():
    prepare = _prepare()
    held = [prepare.Sentence(f"h-{i:05d}", f"held {i}", f"HELD {i}") for i in range(400)]
    items = prepare.kokoro_check_items(held, 300, 0)
    assert len(items) == 300 and len({it.sentence.sid for it in items}) == 300
    assert {it.voice.args[0][0] for it in items} == set(E.KOKORO_EN_CHECK)
    assert all(E.is_held_out(it.voice) for it in items)
    assert [it.rel for it in items] == [it.rel for it in prepare.kokoro_check_items(held, 300, 0)]


TTS_PY = ROOT / ".venv-tts" / "bin" / "python"


@pytest.mark.skipif(not TTS_PY.exists(), reason=".venv-tts is not installed (bash scripts/install_tts.sh)")
def test_kokoro_english_speaks_a_sentence():
    code = ("import sys, json, numpy as np; sys.path.insert(0, 'recipes/synthetic'); import engines as E\n"
            "if not E.available('kokoro_en'): print(json.dumps(None)); sys.exit()\n"
            "v = E.train_voices('kokoro_en')[-1]\n"
            "a = E.kokoro_en('The water was cold.', v, np.random.default_rng(0))\n"
            "print(json.dumps([len(a) / E.SR, float(np.abs(a).max()), v.speaker]))")
    out = subprocess.run([str(TTS_PY), "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result is None:
        pytest.skip("kokoro_en is not available in .venv-tts (kokoro-onnx or the voices .npz missing)")
    seconds, peak, speaker = result
    assert 0.6 < seconds < 4 and peak > 0.01 and "blend" in speaker
