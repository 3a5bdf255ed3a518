"""The default model's recipe as one resumable command (recipes/mixture/reproduce.py), run at toy scale:
every step runs in order, the default model is the mean of its two parents, and a rerun skips every step."""
import re
import subprocess
import sys

import pytest
import torch

from asr.model.loader import load_model
from helpers import DATA, ROOT, SPEECHOCEAN, small_manifest

pytestmark = pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")
STEPS = ["synthetic", "stage1a", "stage1b", "stage1-export", "stage2", "stage2-export", "stage3", "stage4a",
         "stage4b", "soup34", "stage5", "default", "lm-text", "lm"]


def listed(stdout: str) -> list[tuple[str, str]]:
    """(step, state) of each line of the step list the script prints first."""
    return [(m[1], m[2]) for m in re.finditer(r"^reproduce: +\d+/\d+ (\S+) +(\S+)", stdout, re.M)]


def test_whole_recipe_at_toy_scale_then_a_rerun_skips_every_step(tmp_path):
    manifest = small_manifest(tmp_path, 8)
    work = tmp_path / "work"
    (work / "lm").mkdir(parents=True)  # the lm-text step is skipped: a small text stands in for it
    (work / "lm" / "train_text.txt").write_text("MARK SAW A ZORBLAX\nKATE LOVES CHINA\n")
    toy = ["model=tiny", "attention=w16_h4", "threads=1", "data.num_workers=0", "data.max_batch_seconds=1000",
           f"data.train=[{{manifest: {manifest}}}]", f"data.valid=[{{manifest: {manifest}}}]",
           "trainer.max_steps=2", "trainer.val_check_interval=2", "trainer.enable_progress_bar=false",
           "optim.warmup_steps=1", "optim.decay_steps=2", "checkpoint_every_steps=1"]
    command = [sys.executable, str(ROOT / "recipes/mixture/reproduce.py"), "--work", str(work), "--data-root",
               str(DATA), "--skip", "synthetic", "lm-text", *(f"--extra={o}" for o in toy)]

    first = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert listed(first.stdout) == [(s, "skipped" if s in ("synthetic", "lm-text") else "pending") for s in STEPS]
    assert re.findall(r"^reproduce: running (\S+)", first.stdout, re.M) == [s for s in STEPS if s not in ("synthetic", "lm-text")]

    default, _, _ = load_model(work / "default.safetensors")
    soup, stage5 = load_model(work / "soup34.safetensors")[0], load_model(work / "mixture_stage5" / "model.safetensors")[0]
    assert any(not torch.equal(soup.state_dict()[k], stage5.state_dict()[k]) for k in soup.state_dict())
    for name, weight in default.state_dict().items():
        torch.testing.assert_close(weight, (soup.state_dict()[name] + stage5.state_dict()[name]) / 2)
    arpa = (work / "default.arpa").read_text()
    assert arpa.startswith("\\data\\\n") and "\tZORBLAX" in arpa  # the LM read the stand-in text too

    again = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert listed(again.stdout) == [(s, "skipped" if s in ("synthetic", "lm-text") else "done") for s in STEPS]
    assert "reproduce: running" not in again.stdout


def test_missing_tts_venv_is_one_clear_error_before_anything_runs(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "recipes/mixture/reproduce.py"), "--work", str(tmp_path / "w"),
                           "--data-root", str(DATA), "--tts-python", str(tmp_path / "none" / "python")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "install_tts.sh" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w" / "reproduce").exists()


def test_unknown_step_is_refused():
    done = subprocess.run([sys.executable, str(ROOT / "recipes/mixture/reproduce.py"), "--skip", "stage9", "--dry-run"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "stage9" in done.stderr
