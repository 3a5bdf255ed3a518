"""Rendered augmentation variants: a variant another builder has written is kept, not rendered again."""
import numpy as np

from asr.training.acoustic import variants
from asr.training.acoustic.data import AugmentConfig


def test_a_variant_written_meanwhile_is_not_rendered_again(tmp_path, monkeypatch):
    store = variants.VariantStore(tmp_path / "variants", 2, AugmentConfig())
    audio = tmp_path / "a.flac"  # never read: its variant is already there
    path = store.path(audio, 1)
    path.parent.mkdir(parents=True)
    np.save(path, np.ones((3, 80), np.float16))
    monkeypatch.setattr(variants, "_worker", (store, None))  # no dataset: rendering would fail
    variants._render((audio, 1))
    assert np.array_equal(np.load(path), np.ones((3, 80), np.float16))
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial file either
    assert store.missing([audio]) == [(audio, 0)]
