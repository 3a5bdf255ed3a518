"""The many-voices measurements (recipes/voices/probes.py) at toy scale: the data curve's runs hold
Kokoro's share fixed while its distinct hours change, the sizing runs use their model size, every model
is scored on every set, the report and plot are written, and a rerun runs nothing."""
import json
import re

import pytest
from omegaconf import OmegaConf

from asr.training import recipe
from helpers import CONF, DATA, ROOT, SPEECHOCEAN, recipe_module, small_manifest

pytestmark = pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")
SCRIPT = ROOT / "recipes/voices/probes.py"


@pytest.fixture
def probes(monkeypatch):
    """recipes/voices/probes.py as a module whose steps run in this process."""
    return recipe_module(SCRIPT, "probes", monkeypatch, runner=recipe)


def test_curve_and_sizing_at_toy_scale_then_a_rerun_runs_nothing(tmp_path, probes, capsys):
    manifest = small_manifest(tmp_path, 6)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    synthetic = tmp_path / "synthetic"
    synthetic.mkdir()
    kokoro = [{**r, "speaker": f"kokoro_en-blend{i:04d}"} for i, r in enumerate(rows)]
    (synthetic / "train_kokoro_en.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kokoro))
    for name in ("check.jsonl", "check_kokoro_en.jsonl"):
        (synthetic / name).write_text(manifest.read_text())
    hours = [0, rows[0]["duration"] / 3600, (rows[0]["duration"] + rows[1]["duration"] + 0.5) / 3600]
    work, reports = tmp_path / "work", tmp_path / "reports"
    earlier = {"curve_9h@elsewhere": {"kind": "curve", "kokoro_hours": 9, "rendering": "elsewhere",
                                      "measured": "2026-01-01", "scores": {"dev": {"greedy": {"wer": 1.0, "cer": 0.5}}}}}
    reports.mkdir()
    (reports / "probes.json").write_text(json.dumps(earlier))
    toy = ["model=tiny", "attention=w16_h4", "threads=1", "data.num_workers=0", "data.max_batch_seconds=1000",
           f"data.train=[{{manifest: {manifest}}},{{manifest: {manifest}}},{{manifest: {manifest}}},{{manifest: {manifest}}}]",
           f"data.valid=[{{manifest: {manifest}}}]", "trainer.enable_progress_bar=false", "optim.warmup_steps=1",
           "checkpoint_every_steps=1", "keep_every_steps=1", "cmvn_utterances=4", "data.augment.room_bank=2"]
    args = ["--work", str(work), "--data-root", str(DATA), "--synthetic-dir", str(synthetic),
            "--curve-hours", *map(str, hours), "--curve-steps", "1", "--sizes", "tiny", "--sizing-steps", "1", "--sizing-score-steps", "1",
            "--decodings", "greedy", "--limit", "2", "--report-dir", str(reports), *(f"--extra={o}" for o in toy)]

    assert probes.main(args) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr().out
    names = ["default"] + [f"curve_{h:g}h" for h in hours] + ["size_tiny", "size_tiny_step1"]
    trained = names[1:-1]
    running = re.findall(r"^probes: running (\S+)$", out, re.M)
    assert [n for n in running if not n.endswith(".greedy")] == trained + ["size_tiny_step1"]  # its export
    assert len(running) == len(trained) + 1 + 4 * len(names)  # every model on every set

    # the curve: the same share of an epoch (repeats 0, 2, 1), the corpus's first rows at each point
    configs = {name: OmegaConf.load(work / name / "config.yaml") for name in trained}
    kokoro_source = [configs[f"curve_{h:g}h"].data.train[3] for h in hours]
    assert [s.repeat for s in kokoro_source] == [0, 2, 1]
    firsts = [[json.loads(line) for line in open(s.manifest)] for s in kokoro_source[1:]]
    assert firsts == [kokoro[:1], kokoro[:3]]
    assert all(c.init_from.endswith("default.safetensors") for n, c in configs.items() if n.startswith("curve"))
    assert configs["size_tiny"].model.d_model == OmegaConf.load(CONF / "model" / "tiny.yaml").d_model
    assert configs["size_tiny"].init_from is None

    # the report: results merged into the recorded ones (an earlier machine's run stays), keyed run@rendering
    results = json.loads((reports / "probes.json").read_text())
    render = probes.rendering(synthetic)
    assert list(results) == list(earlier) + [f"{n}@{render}" for n in names]
    assert results["curve_9h@elsewhere"] == earlier["curve_9h@elsewhere"]
    for name in names:
        run = results[f"{name}@{render}"]
        assert set(run["scores"]) == {"dev", "fsdd", "synthetic-check", "kokoro-check"}, name
        assert all(0 <= s["greedy"]["wer"] for s in run["scores"].values())
    assert [results[f"curve_{h:g}h@{render}"].get("kokoro", {}).get("utterances") for h in hours] == [None, 1, 3]
    sizing = [results[f"size_tiny{s}@{render}"] for s in ("", "_step1")]
    assert [(r["steps"], r["parameters_m"] > 0, r["train_minutes"] >= 0) for r in sizing] == [(1, True, True)] * 2
    table = (reports / "probes.md").read_text()
    assert all(f"| {n}" in table for n in names + ["curve_9h"])
    assert (reports / "data_curve.png").read_bytes()[:4] == b"\x89PNG"

    assert probes.main(args) == 0
    assert "probes: running" not in capsys.readouterr().out
