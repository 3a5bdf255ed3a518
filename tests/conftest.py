"""Shared fixtures: a small random model file and short audio files made with numpy or espeak-ng."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from asr.model.config import EncoderConfig
from asr.model.loader import random_model, save_model
from asr.training.lm.build import build_arpa

from helpers import ROOT
RATE = 16000
torch.set_num_threads(1)  # the suite must not fight other processes for cores
# What asr derives from files on first use (a lexicon's arrays, optimised ONNX graphs: asr.pretrained.cache_dir) goes
# into the checkout's pytest cache rather than the user's: shared by the suite's processes, kept between its runs.
os.environ["ASR_CACHE_DIR"] = str(ROOT / ".pytest_cache" / "asr")

# The slowest test files and their seconds on 2 cores (measured 2026-12-08). scripts/test.sh runs files on two
# workers as they come (`--no-loadscope-reorder`), so these go first, longest first, and the files of a few seconds
# fill in behind them: the two workers then end together instead of one waiting on a long file that came last.
SLOW_FILES = {"test_onnx_runtime.py": 116, "test_finetune.py": 99, "test_continue.py": 75, "test_batch.py": 71,
              "test_interrupt.py": 49, "test_benchmark_smoke.py": 37, "test_probes.py": 34, "test_ray.py": 28,
              "test_phones.py": 26, "test_evaluate.py": 23, "test_onnx.py": 21, "test_bench_finetune.py": 17}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first (a stable sort: the tests of a file keep their order, the other files theirs)."""
    items.sort(key=lambda item: -SLOW_FILES.get(item.path.name, 0))


@pytest.fixture(scope="session")
def small_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A word LM of a few everyday sentences to add a fine-tune's text to: mixing into it takes a moment, where the
    bundled 200k-word LM takes half a minute."""
    path = tmp_path_factory.mktemp("lm") / "small.arpa"
    path.write_text(build_arpa(["THE CAT SAT ON THE MAT", "THE DOG RAN HOME", "A MAN SAID YES", "IT IS THE END"]))
    return path


@pytest.fixture(scope="session")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small untrained model (garbage text, but every code path runs, and fast)."""
    cfg = EncoderConfig(d_model=64, n_layers=2, n_heads=2, window=16, dropout=0.0)
    path = tmp_path_factory.mktemp("model") / "random.safetensors"
    save_model(path, *random_model(cfg, seed=0)[:2], info={"untrained": True})
    return path


def tone(seconds: float, rate: int = RATE, freq: float = 440.0, channels: int = 1, seed: int = 0) -> np.ndarray:
    """A tone plus a little noise, float32 (N,) or (N, channels)."""
    t = np.arange(round(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    wave = (0.3 * np.sin(2 * np.pi * freq * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
    return wave if channels == 1 else np.stack([wave * (c + 1) / channels for c in range(channels)], axis=1)


def write(path: Path, samples: np.ndarray, rate: int = RATE, subtype: str | None = None) -> Path:
    sf.write(str(path), samples, rate, subtype=subtype)
    return path


def espeak(text: str, path: Path) -> Path:
    """Speak `text` into a wav file (espeak-ng's own rate, 22.05 kHz); skips if espeak-ng is missing."""
    if not shutil.which("espeak-ng"):
        pytest.skip("espeak-ng is not installed")
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True, capture_output=True)
    return path


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 2 s of synthetic speech."""
    return espeak("the quick brown fox jumps over the lazy dog", tmp_path_factory.mktemp("speech") / "fox.wav")


def run_module(module: str, *args: str, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m module args...` in the repository root, text output captured."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=timeout)
