"""The front end: log-mel frames, incremental extraction, resampling and downmixing."""
import numpy as np
import soundfile as sf
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from asr.audio import load_audio
from asr.features import Fbank, FbankConfig, num_frames, stream_fbank


def test_frame_count_and_shape():
    fbank = Fbank()
    for n in [0, 399, 400, 559, 560, 16000]:
        feats = fbank(torch.randn(1, n))
        assert feats.shape == (1, num_frames(n, FbankConfig()), 80)
    assert num_frames(16000, FbankConfig()) == 98  # 1 + (16000 - 400) // 160


def test_log_mel_peaks_at_a_tone():
    t = torch.arange(16000) / 16000
    feats = Fbank()(torch.sin(2 * torch.pi * 1000 * t)[None])[0]
    low = Fbank()(torch.sin(2 * torch.pi * 200 * t)[None])[0]
    assert feats.mean(0).argmax() > low.mean(0).argmax() + 10


@settings(max_examples=25, deadline=None)
@given(pieces=st.lists(st.integers(0, 3000), min_size=1, max_size=20), seed=st.integers(0, 5))
def test_incremental_equals_offline(pieces, seed):
    torch.manual_seed(seed)
    wave = torch.randn(sum(pieces) + 1234) * 0.1
    fbank = Fbank()
    offline = fbank(wave[None])[0]
    pending, frames, start = torch.zeros(0), [], 0
    for size in pieces + [1234]:
        new, pending = stream_fbank(fbank, wave[start:start + size], pending)
        frames.append(new)
        start += size
        assert pending.numel() < 400 + 160
    torch.testing.assert_close(torch.cat(frames), offline, atol=1e-4, rtol=1e-5)


def test_resampling_and_downmix(tmp_path):
    t = np.arange(48000) / 48000
    left = 0.5 * np.sin(2 * np.pi * 440 * t)
    stereo = np.stack([left, -left * 0 + left], axis=1)
    sf.write(tmp_path / "s48.wav", stereo, 48000, subtype="PCM_24")
    sf.write(tmp_path / "m8.flac", left[::6], 8000)
    a, b = load_audio(tmp_path / "s48.wav"), load_audio(tmp_path / "m8.flac")
    assert a.shape == (16000,) and b.shape == (16000,)
    reference = torch.from_numpy(0.5 * np.sin(2 * np.pi * 440 * np.arange(16000) / 16000)).float()
    assert (a[200:-200] - reference[200:-200]).abs().max() < 1e-2
    assert (b[200:-200] - reference[200:-200]).abs().max() < 2e-2
