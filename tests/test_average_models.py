"""scripts/average_models.py: the weight-by-weight mean of finished model files (the default model's last step)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from asr.model.config import EncoderConfig
from asr.model.loader import load_model, random_model, save_model
from helpers import ROOT

SCRIPT = str(ROOT / "scripts" / "average_models.py")


def small_model(path: Path, seed: int, dropout: float = 0.0, d_model: int = 32, norm: str = "global") -> Path:
    cfg = EncoderConfig(d_model=d_model, n_layers=1, n_heads=2, window=4, dropout=dropout, ff_mult=2, norm=norm)
    encoder, tokenizer, _ = random_model(cfg, seed=seed)
    save_model(path, encoder, tokenizer, {"seed": seed})
    return path


def average(*args: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True)


def test_mean_of_two_models_weight_by_weight(tmp_path: Path) -> None:
    a, b = small_model(tmp_path / "a.safetensors", 0), small_model(tmp_path / "b.safetensors", 1, dropout=0.1)
    done = average(a, b, "--out", tmp_path / "soup.safetensors")
    assert done.returncode == 0, done.stderr
    soup, _, info = load_model(tmp_path / "soup.safetensors")
    wa, wb = load_model(a)[0].state_dict(), load_model(b)[0].state_dict()
    for name, weight in soup.state_dict().items():
        torch.testing.assert_close(weight, (wa[name] + wb[name]) / 2)
    assert not torch.equal(wa["ctc.weight"], wb["ctc.weight"])  # the two really differ
    assert [m["seed"] for m in info["averaged_models"]] == [0, 1]


def test_different_architectures_are_refused(tmp_path: Path) -> None:
    a, b = small_model(tmp_path / "a.safetensors", 0), small_model(tmp_path / "b.safetensors", 1, d_model=48)
    done = average(a, b, "--out", tmp_path / "soup.safetensors")
    assert done.returncode == 1 and not (tmp_path / "soup.safetensors").exists()
    assert done.stderr.strip() == f"error: {b}: architecture or tokenizer differs from {a}"


def test_weights_count_each_file_and_are_recorded(tmp_path: Path) -> None:
    a, b = small_model(tmp_path / "a.safetensors", 0), small_model(tmp_path / "b.safetensors", 1)
    done = average(a, b, "--weights", "3", "1", "--out", tmp_path / "soup.safetensors")
    assert done.returncode == 0, done.stderr
    soup, _, info = load_model(tmp_path / "soup.safetensors")
    wa, wb = load_model(a)[0].state_dict(), load_model(b)[0].state_dict()
    torch.testing.assert_close(soup.state_dict()["ctc.weight"], (3 * wa["ctc.weight"] + wb["ctc.weight"]) / 4)
    assert [m["weight"] for m in info["averaged_models"]] == [3.0, 1.0]
    done = average(a, b, "--weights", "1", "--out", tmp_path / "bad.safetensors")
    assert done.returncode == 1 and "1 weights for 2 models" in done.stderr


def test_a_running_mean_model_averages_with_its_global_ancestor_only_when_asked(tmp_path: Path) -> None:
    running, ancestor = (small_model(tmp_path / "running.safetensors", 0, norm="running"),
                         small_model(tmp_path / "global.safetensors", 1))
    refused = average(running, ancestor, "--out", tmp_path / "soup.safetensors")
    assert refused.returncode == 1 and "architecture or tokenizer differs" in refused.stderr
    done = average(running, ancestor, "--first-norm", "--out", tmp_path / "soup.safetensors")
    assert done.returncode == 0, done.stderr
    assert load_model(tmp_path / "soup.safetensors")[0].cfg.norm == "running"  # the first file's front end
