"""The front end: log-mel frames, incremental extraction, resampling and downmixing."""
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
from hypothesis import given, settings
from hypothesis import strategies as st

from asr.audio.files import load_audio
from asr.audio.resample import resample
from asr.features import Fbank, FbankConfig, mel_filters, num_frames, stream_fbank


def test_frame_count_and_shape():
    fbank, rng = Fbank(), np.random.default_rng(0)
    for n in [0, 399, 400, 559, 560, 16000]:
        feats = fbank(rng.standard_normal((1, n)).astype(np.float32))
        assert feats.shape == (1, num_frames(n, FbankConfig()), 80) and feats.dtype == np.float32
    assert num_frames(16000, FbankConfig()) == 98  # 1 + (16000 - 400) // 160


def test_log_mel_peaks_at_a_tone():
    t = np.arange(16000) / 16000
    high = Fbank()(np.sin(2 * np.pi * 1000 * t))
    low = Fbank()(np.sin(2 * np.pi * 200 * t))
    assert high.mean(0).argmax() > low.mean(0).argmax() + 10


@settings(max_examples=25, deadline=None)
@given(pieces=st.lists(st.integers(0, 3000), min_size=1, max_size=20), seed=st.integers(0, 5))
def test_incremental_equals_offline(pieces, seed):
    wave = (np.random.default_rng(seed).standard_normal(sum(pieces) + 1234) * 0.1).astype(np.float32)
    fbank = Fbank()
    offline = fbank(wave)
    pending, frames, start = np.zeros(0, np.float32), [], 0
    for size in pieces + [1234]:
        new, pending = stream_fbank(fbank, wave[start:start + size], pending)
        frames.append(new)
        start += size
        assert pending.size < 400 + 160
    np.testing.assert_allclose(np.concatenate(frames), offline, atol=1e-4, rtol=1e-5)


def test_numpy_front_end_equals_torchaudio_reference():
    """The one front end (numpy) against the same definition in torch/torchaudio, on real speech."""
    torch = pytest.importorskip("torch")
    torchaudio = pytest.importorskip("torchaudio")
    cfg = FbankConfig()
    reference_mel = torchaudio.functional.melscale_fbanks(cfg.n_fft // 2 + 1, cfg.f_min, cfg.f_max, cfg.n_mels,
                                                          cfg.sample_rate, norm=None, mel_scale="htk")
    np.testing.assert_allclose(mel_filters(cfg), reference_mel.numpy(), atol=1e-5)
    wave = load_audio("asr/examples/synthetic_slt.flac")
    frames = torch.from_numpy(wave).unfold(0, cfg.win_length, cfg.hop_length)
    frames = frames - frames.mean(dim=-1, keepdim=True)
    spectrum = torch.fft.rfft(frames * torch.hann_window(cfg.win_length), n=cfg.n_fft)
    reference = torch.log((spectrum.real.square() + spectrum.imag.square()) @ reference_mel + 1e-6).numpy()
    diff = np.abs(Fbank()(wave) - reference)
    assert diff.mean() < 1e-5 and diff.max() < 1e-3  # float32 FFT rounding, largest near the 1e-6 floor


def test_resampler_equals_torchaudio():
    torchaudio = pytest.importorskip("torchaudio")
    torch = pytest.importorskip("torch")
    wave = np.random.default_rng(0).standard_normal(12345).astype(np.float32)
    for rate in (8000, 22050, 44100, 48000):
        expected = torchaudio.functional.resample(torch.from_numpy(wave), rate, 16000).numpy()
        ours = resample(wave, rate)
        assert ours.shape == expected.shape
        np.testing.assert_allclose(ours, expected, atol=1e-4)  # float32 sums of unit-variance noise


def test_resampling_and_downmix(tmp_path):
    t = np.arange(48000) / 48000
    left = 0.5 * np.sin(2 * np.pi * 440 * t)
    stereo = np.stack([left, -0.5 * left], axis=1)  # the channels' mean is 0.25 x left
    sf.write(tmp_path / "s48.wav", stereo, 48000, subtype="PCM_24")
    sf.write(tmp_path / "m8.flac", left[::6], 8000)
    a, b = load_audio(tmp_path / "s48.wav"), load_audio(tmp_path / "m8.flac")
    assert a.shape == (16000,) and b.shape == (16000,)
    reference = 0.5 * np.sin(2 * np.pi * 440 * np.arange(16000) / 16000)
    assert np.abs(a[200:-200] - 0.25 * reference[200:-200]).max() < 1e-2  # averaged, not one channel or a sum
    assert np.abs(b[200:-200] - reference[200:-200]).max() < 2e-2


def test_the_features_run_on_one_thread():
    """Importing asr keeps numpy's BLAS to one thread (set before numpy loads), so the filterbank's matrix
    product starts no threads that spin beside the stream. Checked in a fresh interpreter with none of the
    thread variables set, asr imported first (as every entry point does): the process has one thread after
    computing features."""
    code = ("from asr.features import Fbank\nimport os, numpy as np\n"
            "Fbank()(np.random.default_rng(0).standard_normal((1, 16000)).astype(np.float32))\n"
            "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout.split()
    assert out == ["1", "1"]
