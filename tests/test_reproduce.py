"""The default model's recipe as one resumable command (recipes/mixture/reproduce.py), run at toy scale:
every step runs in order, the default model is the mean of its two parents, and a rerun skips every step.

The chain's steps run in this process: `subprocess.run` in the step runner (asr.training.recipe) is replaced by one that
executes each step's exact command line (`python -m MODULE ...` or `python SCRIPT ...`) with runpy, so
torch, Lightning and Hydra are imported once rather than once per step. The rerun and the refusals go
through the script as a real subprocess."""
import importlib.util
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from asr.model.loader import load_model
from asr.training import recipe
from helpers import DATA, ROOT, SPEECHOCEAN, in_process, small_manifest

pytestmark = pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")
SCRIPT = ROOT / "recipes/mixture/reproduce.py"
STEPS = ["synthetic", "stage1a", "stage1b", "stage1-export", "stage2", "stage2-export", "stage3", "stage4a",
         "stage4b", "soup34", "stage5", "default", "lm-text", "lm"]
SKIPPED = ("synthetic", "lm-text")
EXPERIMENTS = {  # run folder: (lr, dropout, noise_prob, mel_warp) of its experiment config
    "mixture": (2e-3, 0.0, 0.0, 0.0), "mixture_finetune": (1e-3, 0.0, 0.0, 0.0), "mixture_refine": (5e-4, 0.0, 0.0, 0.0),
    "mixture_regularised_probe": (5e-4, 0.1, 0.0, 0.0), "mixture_regularised": (5e-4, 0.1, 0.2, 0.0),
    "mixture_warp_silence": (5e-4, 0.1, 0.2, 0.1)}


def listed(stdout: str) -> list[tuple[str, str]]:
    """(step, state) of each line of the step list the script prints first."""
    return [(m[1], m[2]) for m in re.finditer(r"^reproduce: +\d+/\d+ (\S+) +(\S+)", stdout, re.M)]


@pytest.fixture
def reproduce(monkeypatch):
    """recipes/mixture/reproduce.py as a module whose steps run in this process."""
    spec = importlib.util.spec_from_file_location("reproduce", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(recipe, "subprocess", SimpleNamespace(run=in_process))  # the step runner's, not everyone's
    monkeypatch.chdir(ROOT)  # every step runs from the repository root (reproduce.py's cwd=ROOT)
    return module


def test_whole_recipe_at_toy_scale_then_a_rerun_skips_every_step(tmp_path, reproduce, capsys):
    manifest = small_manifest(tmp_path, 4)
    work = tmp_path / "work"
    (work / "lm").mkdir(parents=True)  # the lm-text step is skipped: a small text stands in for it
    (work / "lm" / "train_text.txt").write_text("MARK SAW A ZORBLAX\nKATE LOVES CHINA\n")
    toy = ["model=tiny", "attention=w16_h4", "threads=1", "data.num_workers=0", "data.max_batch_seconds=1000",
           f"data.train=[{{manifest: {manifest}}}]", f"data.valid=[{{manifest: {manifest}}}]",
           "trainer.max_steps=1", "trainer.val_check_interval=1",
           "trainer.enable_progress_bar=false",
           "optim.warmup_steps=1", "optim.decay_steps=1", "checkpoint_every_steps=1", "cmvn_utterances=4"]
    args = ["--work", str(work), "--data-root", str(DATA), "--skip", *SKIPPED, *(f"--extra={o}" for o in toy)]

    code = reproduce.main(args)
    first, errors = capsys.readouterr()
    assert code == 0, errors[-3000:]
    assert listed(first) == [(s, "skipped" if s in SKIPPED else "pending") for s in STEPS]
    assert re.findall(r"^reproduce: running (\S+)", first, re.M) == [s for s in STEPS if s not in SKIPPED]
    assert sorted(p.stem for p in (work / "reproduce").glob("*.done")) == sorted(set(STEPS) - set(SKIPPED))

    runs = {run: OmegaConf.load(work / run / "config.yaml") for run in EXPERIMENTS}  # each step's own experiment
    assert {run: (c.optim.lr, c.model.dropout, c.data.augment.noise_prob, c.data.augment.mel_warp)
            for run, c in runs.items()} == EXPERIMENTS
    assert runs["mixture_warp_silence"].init_from == str(work / "soup34.safetensors")

    default, _, _ = load_model(work / "default.safetensors")
    soup = load_model(work / "soup34.safetensors")[0].state_dict()
    stage5 = load_model(work / "mixture_warp_silence" / "model.safetensors")[0].state_dict()
    assert any(not torch.equal(soup[k], stage5[k]) for k in soup)
    for name, weight in default.state_dict().items():
        torch.testing.assert_close(weight, (soup[name] + stage5[name]) / 2)
    arpa = (work / "default.arpa").read_text()
    assert arpa.startswith("\\data\\\n") and "\tZORBLAX" in arpa  # the LM read the stand-in text too

    again = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert listed(again.stdout) == [(s, "skipped" if s in SKIPPED else "done") for s in STEPS]
    assert "reproduce: running" not in again.stdout


def test_missing_tts_venv_is_one_clear_error_before_anything_runs(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--work", str(tmp_path / "w"),
                           "--data-root", str(DATA), "--tts-python", str(tmp_path / "none" / "python")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "install_tts.sh" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w" / "reproduce").exists()


def test_unknown_step_is_refused():
    done = subprocess.run([sys.executable, str(SCRIPT), "--skip", "stage9", "--dry-run"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "stage9" in done.stderr
