"""The retrain that carries over between working periods (recipes/voices/continue.py), at toy scale: two
periods back to back, the second on a machine with no run folder, resumes from the committed state (its
weights, step, schedule position and the Kokoro slices already used) rather than from scratch; a period
cut off mid-way resumes from its own run folder; the grown model starts exactly where the shipped one is."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from safetensors.torch import load_file

from asr.model.loader import load_model, save_model
from asr.training.acoustic import carry
from asr.training.acoustic.config import OptimConfig
from asr.training.acoustic.grow import deepen
from asr.training.acoustic.module import warmup_cosine
from asr.training.lm.build import build_arpa
from helpers import DATA, ROOT, SPEECHOCEAN, recipe_module, small_manifest

sys.path.insert(0, str(ROOT / "scripts"))  # scripts/bench: the resume and step benches
from bench import resume as bench_resume, step as bench_step  # noqa: E402

pytestmark = pytest.mark.skipif(not SPEECHOCEAN.exists(), reason=f"{SPEECHOCEAN} not found")
SCRIPT = ROOT / "recipes/voices/continue.py"
SHIPPED_LAYERS = load_model()[0].cfg.n_layers  # the toy run grows the shipped model by one block


@pytest.fixture
def cont(monkeypatch):
    """recipes/voices/continue.py as a module whose commands run in this process."""
    return recipe_module(SCRIPT, "continue_recipe", monkeypatch)


def kokoro_slice(synthetic, rows, period, start, end):
    """A stand-in for period `period`'s rendered Kokoro slice: its manifest and slice record."""
    manifest = synthetic / f"train_kokoro_en_p{period:03d}.jsonl"
    manifest.write_text("".join(json.dumps({**r, "speaker": f"kokoro_en-blend{i}"}) + "\n" for i, r in enumerate(rows)))
    hours = sum(r["duration"] for r in rows) / 3600
    manifest.with_suffix(".slice.json").write_text(json.dumps({"kokoro_en": {
        "start": start, "end": end, "hours": hours, "utterances": len(rows), "blend_seed": 20261125 + period}}))


def test_two_periods_the_second_on_a_fresh_machine(tmp_path, cont, capsys):
    manifest = small_manifest(tmp_path, 6)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    synthetic, state, progress = tmp_path / "synthetic", tmp_path / "state", tmp_path / "progress.jsonl"
    synthetic.mkdir()
    (synthetic / "train.jsonl").write_text(manifest.read_text())
    kokoro_slice(synthetic, rows[:3], 1, 0, 3)
    kokoro_slice(synthetic, rows[3:], 2, 3, 6)
    kokoro_slice(synthetic, rows[:2], 3, 6, 8)
    toy = ["threads=1", "data.num_workers=0", "data.max_batch_seconds=1000", "trainer.max_steps=2",
           f"data.train.0.manifest={manifest}", f"data.train.1.manifest={manifest}",  # the rest: synthetic/
           f"data.valid=[{{manifest: {manifest}}}]", "trainer.enable_progress_bar=false",
           "checkpoint_every_steps=1", "data.augment.room_bank=2", "data.variants=2", "data.variants_workers=1",
           "trainer.val_check_interval=2"]

    small_lm = tmp_path / "small.arpa"  # the scores' word LM: the bundled 200k-word one loads in each of 8 scorings
    small_lm.write_text(build_arpa(r["text"] for r in rows))

    def period(work):
        args = ["--work", str(work), "--state", str(state), "--progress", str(progress), "--data-root", str(DATA),
                "--synthetic", str(synthetic), "--variants-dir", str(tmp_path / "variants"), "--skip-data",
                "--lm", str(small_lm),
                "--layers", str(SHIPPED_LAYERS + 1), "--score-limit", "2", "--minutes", "5", "--jobs", "1", "--", *toy]
        assert cont.main(args) == 0, capsys.readouterr().err[-3000:]

    period(tmp_path / "machine1")
    times = json.loads((tmp_path / "machine1" / "p001" / "step_times.json").read_text())
    assert times["steps"] == 2 and times["model_s"] > 0  # the parts of fitting's wall time add up to it
    assert times["model_s"] + times["between_s"] + times["validation_s"] <= times["wall_s"] + 0.05
    assert bench_resume.main([str(tmp_path / "machine1" / "p001"), "--steps", "1", "--dev-batches", "1",
                              "--threads", "1"]) == 0  # resuming with and without the optimizer's moments
    printed = capsys.readouterr().out
    assert "saved moments" in printed and "fresh moments, re-warmed" in printed
    first = json.loads((state / "state.json").read_text())
    assert first["period"] == 1 and first["steps"] == 2 and first["layers"] == SHIPPED_LAYERS + 1
    assert [s["start"] for s in first["kokoro_slices"]] == [0] and first["kokoro_slices"][0]["end"] == 3
    weights = load_file(str(state / "model.safetensors"))
    first_candidate = load_file(str(state / "candidate.safetensors"))["blocks.0.ff.0.weight"]
    assert weights["blocks.0.ff.0.weight"].dtype == torch.float16 and weights["cmvn.mean"].dtype == torch.float32

    period(tmp_path / "machine2")  # a bare machine: no run folder, only what was committed
    second_plan = json.loads((tmp_path / "machine2" / "p002" / "period.json").read_text())
    assert second_plan["step_offset"] == 2 and second_plan["rewarm_steps"] == carry.REWARM_STEPS
    assert second_plan["kokoro_slice"]["start"] == 3 and second_plan["kokoro_slice"]["blend_seed"] == 20261127
    start = load_file(second_plan["init_from"])
    assert torch.equal(start["blocks.0.ff.0.weight"], weights["blocks.0.ff.0.weight"])  # period 1's weights
    second = json.loads((state / "state.json").read_text())
    assert second["period"] == 2 and second["steps"] == 4
    assert [(s["start"], s["end"]) for s in second["kokoro_slices"]] == [(0, 3), (3, 6)]
    rows_out = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [r["period"] for r in rows_out] == [1, 2] and [r["steps"] for r in rows_out] == [2, 4]
    kokoro_hours = sum(r["duration"] for r in rows) / 3600
    assert rows_out[1]["kokoro_hours_seen"] == pytest.approx(kokoro_hours, abs=0.01)
    for column in ("dev_greedy", "dev_beam", "fsdd_beam", "synthetic_check_beam", "kokoro_check_beam"):
        assert all(0 <= r[column] for r in rows_out)
    assert rows_out[1]["train_minutes"] > rows_out[0]["train_minutes"] > 0
    assert sorted(p.name for p in state.iterdir()) == sorted(carry.STATE_FILES)
    # period 2 scores the mean of its own checkpoints and period 1's committed candidate
    second_run = tmp_path / "machine2" / "p002"
    assert torch.equal(load_file(second_plan["previous_candidate"])["blocks.0.ff.0.weight"], first_candidate)
    own = load_file(str(second_run / "period_mean.safetensors"))["blocks.0.ff.0.weight"]
    scored = load_file(str(second_run / "candidate.safetensors"))["blocks.0.ff.0.weight"]
    assert not torch.equal(own, first_candidate.float())
    assert torch.allclose(scored, (own + first_candidate.float()) / 2, atol=1e-6)
    assert [r["candidate"] for r in rows_out] == ["period mean", "mean with the previous candidate"]

    # again on the same machine: period 3 comes from the committed state, not the finished run folder
    capsys.readouterr()
    assert cont.main(["--work", str(tmp_path / "machine2"), "--state", str(state), "--data-root", str(DATA),
                      "--synthetic", str(synthetic), "--dry-run"]) == 0
    third = dry_run_plan(capsys)
    assert third["period"] == 3 and third["step_offset"] == 4 and third["kokoro_slice"]["start"] == 6


def test_a_cut_off_period_resumes_in_its_own_run_folder(tmp_path, cont, capsys):
    state, work = tmp_path / "state", tmp_path / "work"
    plan, origin = carry.current_period(work, state, tmp_path, 100)
    assert plan["period"] == 1 and origin.startswith("new run")
    plan["timings"]["data"] = 1.0
    (work / "p001").mkdir(parents=True)
    carry.save_period(work / "p001", plan)
    again, origin = carry.current_period(work, state, tmp_path, 100)
    assert again == plan and "this machine" in origin


def dry_run_plan(capsys) -> dict:
    """The period plan a --dry-run printed (after its status lines)."""
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):])


def test_ab_arms_fork_a_state_or_start_from_whisper(tmp_path, cont, capsys):
    """--fork-from: an arm's period continues the forked run's weights, step and Kokoro slices; --start
    whisper:SIZE: period 1 has no starting file and trains from Whisper's encoder."""
    common = ["--data-root", str(DATA), "--synthetic", str(tmp_path), "--dry-run"]
    arm = tmp_path / "arm"
    assert cont.main(["--fork-from", str(ROOT / "recipes/voices/state"), "--state", str(arm), "--work",
                      str(tmp_path / "w1"), *common]) == 0
    committed = json.loads((ROOT / "recipes/voices/state/state.json").read_text())
    plan = dry_run_plan(capsys)
    assert plan["period"] == committed["period"] + 1 and plan["step_offset"] == committed["steps"]
    assert plan["kokoro_slice"]["start"] == committed["kokoro_slices"][-1]["end"]
    assert sorted(p.name for p in arm.iterdir()) == ["model.safetensors", "state.json"]  # no causal candidate
    assert cont.main(["--start", "whisper:tiny.en", "--state", str(tmp_path / "new"), "--work", str(tmp_path / "w2"),
                      *common]) == 0
    plan = dry_run_plan(capsys)
    assert plan["period"] == 1 and plan["init_from"] is None and plan["state_from"] == "whisper:tiny.en"
    # --new-schedule: the arm keeps the forked step count (its rows compare) but its schedule starts at 0
    fresh = tmp_path / "fresh"
    assert cont.main(["--fork-from", str(ROOT / "recipes/voices/state"), "--new-schedule", "--state", str(fresh),
                      "--work", str(tmp_path / "w3"), *common]) == 0
    plan = dry_run_plan(capsys)
    assert plan["step_offset"] == 0 and plan["previous"]["steps"] == committed["steps"]
    assert json.loads((fresh / "state.json").read_text())["schedule_start"] == committed["steps"]


def test_an_arm_beside_another_renders_its_own_kokoro_slice_only(tmp_path, cont, monkeypatch, capsys):
    """--shared-base: the data phase renders the period's Kokoro slice and not the cheaper voices, which another
    arm rendered this period (and it refuses, before any work, when they are not there)."""
    commands = []
    monkeypatch.setattr(cont, "run", lambda command, log=None: commands.append(command))
    args = ["--data-root", str(DATA), "--synthetic", str(tmp_path), "--fork-from", str(ROOT / "recipes/voices/state"),
            "--state", str(tmp_path / "arm"), "--work", str(tmp_path / "work"), "--shared-base"]
    with pytest.raises(SystemExit, match="--shared-base: no .*train.jsonl"):
        cont.main([*args, "--stop-after", "data"])
    assert commands == []
    (tmp_path / "train.jsonl").write_text("")
    assert cont.main([*args, "--dry-run"]) == 0
    kokoro = dry_run_plan(capsys)["kokoro_slice"]
    Path(kokoro["manifest"]).with_suffix(".slice.json").write_text(json.dumps({"kokoro_en": {
        "start": kokoro["start"], "end": kokoro["start"] + 3, "hours": 0.01, "utterances": 3,
        "blend_seed": kokoro["blend_seed"]}}))
    assert cont.main([*args, "--stop-after", "data"]) == 0
    rendered = [c for c in commands if "recipes/synthetic/prepare.py" in c]
    assert len(rendered) == 1 and rendered[0][rendered[0].index("--engines") + 1] == "kokoro_en"


def test_an_arm_takes_a_kokoro_slice_already_rendered(tmp_path, cont, monkeypatch, capsys):
    """--kokoro-slice: the period trains on a slice another arm rendered, renders no Kokoro speech (the cheaper
    voices only), and says so when the run heard its sentences before."""
    commands = []
    monkeypatch.setattr(cont, "run", lambda command, log=None: commands.append(command))
    committed = json.loads((ROOT / "recipes/voices/state/state.json").read_text())
    heard = committed["kokoro_slices"][-1]
    other = tmp_path / "other" / "train_kokoro_en_p099.jsonl"
    other.parent.mkdir()
    other.write_text("")
    for start, end in ((heard["end"] + 50, heard["end"] + 80), (heard["start"], heard["end"])):
        other.with_suffix(".slice.json").write_text(json.dumps({"kokoro_en": {
            "start": start, "end": end, "hours": 0.01, "utterances": 3, "blend_seed": 7}}))
        work = tmp_path / f"work{start}"
        args = ["--data-root", str(DATA), "--synthetic", str(tmp_path), "--fork-from", str(ROOT / "recipes/voices/state"),
                "--state", str(tmp_path / f"arm{start}"), "--work", str(work), "--kokoro-slice", str(other)]
        assert cont.main([*args, "--stop-after", "data"]) == 0
        period = json.loads((work / f"p{committed['period'] + 1:03d}" / "period.json").read_text())
        assert period["kokoro_slice"] == {"manifest": str(other), "start": start, "blend_seed": 7, "end": end,
                                          "hours": 0.01, "utterances": 3}
        said = capsys.readouterr().out
        assert ("it hears them again" in said) == (start == heard["start"])
    rendered = [c[c.index("--engines") + 1:c.index("--hours-train")] for c in commands if "recipes/synthetic/prepare.py" in c]
    assert rendered == [cont.ENGINES_BASE] * 2
    with pytest.raises(SystemExit, match="no train_kokoro_en_p098.slice.json"):
        cont.main([*args[:-1], str(other.with_name("train_kokoro_en_p098.jsonl")), "--work", str(tmp_path / "w3")])


def test_the_rows_score_librispeech_dev_where_the_data_root_has_it(tmp_path):
    sets = carry.score_sets(DATA, tmp_path)
    assert sets["libri_dev_beam"] == (["--manifest", str(DATA / "librispeech" / "dev-clean-2.jsonl")], "beam")
    assert "libri_dev_greedy" in sets and "dev_beam" in sets
    old_root = tmp_path / "old"
    (old_root / "speechocean762").mkdir(parents=True)
    assert "libri_dev_beam" not in carry.score_sets(old_root, tmp_path) and "dev_beam" in carry.score_sets(old_root, tmp_path)
    progress = tmp_path / "a_new_arm" / "progress.jsonl"  # its folder is made on the first write
    carry.write_reference(progress, {"dev_beam": 48.0, "libri_dev_beam": 60.0, "synthetic_check_beam": 47.0,
                                     "kokoro_check_beam": 38.0, "fsdd_beam": 1.6})
    better = {"dev_beam": 47.0, "synthetic_check_beam": 46.0, "kokoro_check_beam": 37.0, "fsdd_beam": 1.2}
    assert not carry.beats_default(better, progress)  # not scored on LibriSpeech dev: not promoted
    assert carry.beats_default({**better, "libri_dev_beam": 59.0}, progress)
    assert not carry.beats_default({**better, "libri_dev_beam": 61.0}, progress)


def test_the_grown_model_computes_what_the_shipped_one_does():
    encoder, _, _ = load_model()
    grown = deepen(encoder, SHIPPED_LAYERS + 3).eval()
    assert len(grown.blocks) == SHIPPED_LAYERS + 3
    feats = torch.randn(1, 200, 80)
    assert torch.equal(encoder(feats)[0], grown(feats)[0])
    with pytest.raises(ValueError, match="fewer"):
        deepen(encoder, SHIPPED_LAYERS - 1)


def test_the_schedule_continues_from_its_position_and_rewarms():
    cfg = OptimConfig(warmup_steps=10, decay_steps=100)
    later = OptimConfig(warmup_steps=10, decay_steps=100, step_offset=50, rewarm_steps=20)
    assert warmup_cosine(0, later) == pytest.approx(warmup_cosine(50, cfg) / 20)  # ramped up again ...
    assert warmup_cosine(19, later) == pytest.approx(warmup_cosine(69, cfg))  # ... on the same position
    assert warmup_cosine(25, later) == pytest.approx(warmup_cosine(75, cfg))


def test_bench_step_times_a_training_step(capsys):
    assert bench_step.main(["--config", "tiny", "--seconds", "4", "--steps", "1", "--warmup", "0", "--threads", "1"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("tiny") and float(line.split(" s/step")[0].split()[-1]) > 0


def test_a_period_trained_on_another_machine_from_the_packed_corpora(tmp_path, cont, monkeypatch, capsys):
    """gpu.py: the period's corpora packed as Opus here, trained 'there' (another run folder, only the
    pack), and the results received here, where continue.py scores them and commits the state."""
    import soundfile as sf  # noqa: PLC0415

    gpu = recipe_module(ROOT / "recipes/voices/gpu.py", "gpu_recipe", monkeypatch)
    rows = [json.loads(line) for line in small_manifest(tmp_path, 6).read_text().splitlines()]
    root, synthetic, state = tmp_path / "data", tmp_path / "synthetic", tmp_path / "state"
    for name, subset in (("speechocean762/train.jsonl", rows[:4]), ("speechocean762/dev.jsonl", rows[4:]),
                         ("fsdd/fsdd.jsonl", [{**r, "split": s} for r, s in zip(rows[:3], ("train", "test", "train"))])):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in subset))
    synthetic.mkdir()
    (synthetic / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[3:]))
    kokoro_slice(synthetic, rows[:2], 4, 5, 7)
    encoder, tokenizer, _ = load_model()  # a committed state as after period 3 (10 steps, one slice)
    state.mkdir()
    save_model(state / "model.safetensors", encoder, tokenizer, {}, half=True)
    with torch.no_grad():  # period 3's candidate: other weights than where its training stopped
        encoder.blocks[0].ff[0].weight.mul_(0.5)
    save_model(state / "candidate.safetensors", encoder, tokenizer, {}, half=True)
    (state / "state.json").write_text(json.dumps({"period": 3, "steps": 10, "train_minutes": 1.0,
                                                  "kokoro_hours_seen": 0.01, "kokoro_slices": [
        {"period": 3, "manifest": "train_kokoro_en_p003.jsonl", "start": 0, "end": 5, "blend_seed": 20261128}]}))
    toy = ["threads=1", "data.max_batch_seconds=1000", "trainer.max_steps=2", "checkpoint_every_steps=1",
           "data.augment.room_bank=2"]
    here, there, pack, results = (tmp_path / n for n in ("here", "there", "pack", "results"))
    common = ["--state", str(state), "--synthetic", str(synthetic), "--jobs", "1"]
    small_lm = tmp_path / "small.arpa"  # the scores' word LM (the bundled one loads in each scoring)
    small_lm.write_text(build_arpa(r["text"] for r in rows))
    args = [*common, "--work", str(here), "--data-root", str(root), "--variants-dir", str(tmp_path / "variants"),
            "--progress", str(tmp_path / "progress.jsonl"), "--skip-data", "--score-limit", "2", "--lm", str(small_lm)]
    assert cont.main([*args, "--stop-after", "data"]) == 0

    assert gpu.main(["pack", *common, "--work", str(here), "--pack", str(pack), "--data-root", str(root)]) == 0
    packed = {m: [json.loads(line) for line in (pack / m).read_text().splitlines()] for m in
              ("data/speechocean762/train.jsonl", "data/fsdd/fsdd.jsonl", "synthetic/train.jsonl",
               "synthetic/train_kokoro_en_p004.jsonl")}
    assert [len(r) for r in packed.values()] == [4, 2, 3, 2]  # FSDD: its train split only
    for manifest, entries in packed.items():
        for row in entries:
            audio = (pack / manifest).parent / row["audio"]
            assert pack in audio.parents and sf.info(str(audio)).subtype == "OPUS"

    shutil.rmtree(pack)  # only the one-file copy travels: train unpacks it
    remote_state = tmp_path / "remote_state"  # the state travels without the previous candidate
    shutil.copytree(state, remote_state, ignore=shutil.ignore_patterns("candidate.safetensors"))
    assert gpu.main(["train", "--pack", str(pack), "--work", str(there), "--state", str(remote_state), "--jobs", "1",
                     "--accelerator", "cpu", "--out", str(results), "--variants-dir", str(tmp_path / "remote"),
                     "--call-minutes", "5", *toy]) == 0
    config = next(p for p in there.rglob("config.yaml") if ".hydra" not in p.parts)  # the call's end reached training as a deadline, its export time kept
    remote_config = OmegaConf.load(config)
    assert 0 < remote_config.stop_at - time.time() < 300 - gpu.EXPORT_SECONDS
    assert remote_config.data.variants == 0 and remote_config.data.num_workers == 1  # drawn in a loader process
    assert sorted(p.name for p in results.iterdir()) == sorted(gpu.RESULTS)
    assert load_file(str(results / "candidate.safetensors"))["blocks.0.ff.0.weight"].dtype == torch.float16
    assert not (here / "p004" / "last.safetensors").exists()  # nothing was trained here

    assert gpu.main(["receive", str(results), *common, "--work", str(here)]) == 0
    # the running mean with period 3's candidate, taken here as it did not travel
    previous = load_file(str(state / "candidate.safetensors"))["blocks.0.ff.0.weight"].float()
    own = load_file(str(here / "p004" / "period_mean.safetensors"))["blocks.0.ff.0.weight"].float()
    scored = load_file(str(here / "p004" / "candidate.safetensors"))["blocks.0.ff.0.weight"]
    assert not torch.equal(own, previous) and torch.allclose(scored, (own + previous) / 2, atol=1e-6)
    assert cont.main(args) == 0, capsys.readouterr().err[-3000:]
    row = json.loads((tmp_path / "progress.jsonl").read_text().splitlines()[-1])
    remote = json.loads((results / "period.json").read_text())
    assert row["period"] == 4 and row["steps"] == 12 and row["machine"] == remote["machine"]
    assert row["phase_minutes"]["train"] == remote["timings"]["train"]
    assert json.loads((state / "state.json").read_text())["period"] == 4


def test_the_curve_keeps_its_starting_point_when_a_period_is_promoted(tmp_path):
    progress = tmp_path / "progress.jsonl"
    first = {"dev_greedy": 80.0, "dev_beam": 54.0, "fsdd_beam": 2.0, "synthetic_check_beam": 59.0, "kokoro_check_beam": 62.0}
    carry.write_reference(progress, first)  # the shipped model the run grows from
    promoted = {**first, "dev_beam": 49.5}
    carry.write_reference(progress, promoted)  # a period promoted: the new shipped model
    reference = json.loads(carry.reference_path(progress).read_text())
    assert reference["dev_beam"] == 49.5 and reference["start"] == first
    progress.write_text(json.dumps({"period": 1, "train_minutes": 60.0, **promoted}) + "\n")
    carry.plot_progress(progress, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 0


def test_a_probe_that_trained_on_is_exported_and_scored_again(tmp_path, cont, monkeypatch):
    run = tmp_path / "probe"
    (run / "checkpoints").mkdir(parents=True)
    (run / "scores").mkdir()
    (run / "scores" / "dev_greedy.json").write_text("{}")
    exports = []
    monkeypatch.setattr(cont.carry, "export_period",
                        lambda work: (exports.append(work), (work / "candidate.safetensors").write_bytes(b"new")))
    (run / "candidate.safetensors").write_bytes(b"old")
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    old = time.time() - 60
    os.utime(run / "candidate.safetensors", (old, old))  # scored a minute ago; it trained on since

    assert cont.probe_candidate(run) == run / "candidate.safetensors"
    assert exports == [run] and (run / "candidate.safetensors").read_bytes() == b"new"
    assert not (run / "scores").exists()  # the old weights' scores are gone

    cont.probe_candidate(run)  # nothing new since: the same candidate, no export
    assert exports == [run]


def test_the_ab_table_and_curve_come_from_the_arms_rows(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from bench import ab
    def row(period, steps, greedy, beam, train=80.0):
        return json.dumps({"period": period, "steps": steps, "dev_greedy": greedy, "dev_beam": beam, "fsdd_beam": 1.0,
                           "kokoro_check_beam": 30.0, "synthetic_check_beam": 40.0,
                           "phase_minutes": {"train": train}}) + "\n"
    (tmp_path / "ab").mkdir()
    (tmp_path / "voices").mkdir()
    (tmp_path / "voices" / "training_progress.jsonl").write_text(row(11, 900, 75.0, 50.0) + row(12, 1000, 72.0, 49.0)
                                                                 + row(13, 2000, 71.0, 48.0))
    (tmp_path / "ab" / "lookahead.jsonl").write_text(row(13, 1900, 70.0, 47.0) + row(14, 2800, 69.0, 46.5, 60.0))
    readme = tmp_path / "ab" / "README.md"
    readme.write_text(f"before\n{ab.BEGIN}\nold table\n{ab.END}\nafter\n")
    assert ab.main(["--benchmarks", str(tmp_path)]) == 0
    lines = readme.read_text().splitlines()
    assert lines[0] == "before" and lines[-1] == "after" and "old table" not in lines
    by_arm = {line.split(":")[0].strip("| "): line for line in lines if line.startswith("| ")}
    assert by_arm["a"].split("|")[2:6] == [" 1 ", " 1.33 ", " 1000 ", " 0.24 "] and " 48.0 " in by_arm["a"]
    assert by_arm["b"].split("|")[2:6] == [" 2 ", " 2.33 ", " 1800 ", " 0.45 "] and " 46.5 " in by_arm["b"]
    assert by_arm["c"].split("|")[2] == " 0 " and (tmp_path / "ab" / "curve.png").stat().st_size > 0
    assert by_arm["b"].endswith("| 46.5 | 30.0 | 40.0 | 1.0 |  |  |  |  |")  # no cost.json: blank cost columns
    (tmp_path / "ab" / "cost.json").write_text(json.dumps(
        {"b": {"chunk_p95_ms": 12.34, "rtf": 0.0123, "onnx_mb": 27.61, "peak_rss_mb": 150.4}}))
    assert ab.main(["--benchmarks", str(tmp_path)]) == 0
    by_arm = {line.split(":")[0].strip("| "): line for line in readme.read_text().splitlines() if line.startswith("| ")}
    assert by_arm["b"].endswith("| 12.3 | 0.012 | 27.6 | 150 |") and by_arm["a"].endswith("|  |  |  |  |")
    measured = []
    monkeypatch.setattr(ab, "measure_costs", lambda arms, manifest, limit, load, letters: measured.append(letters) or {
        "d": {"chunk_p95_ms": 20.0, "rtf": 0.02, "onnx_mb": 80.0, "peak_rss_mb": 190.0}})
    assert ab.main(["--benchmarks", str(tmp_path), "--cost", "--arms", "d", "--allow-load"]) == 0
    assert measured == ["d"] and set(json.loads((tmp_path / "ab" / "cost.json").read_text())) == {"b", "d"}  # b kept
    with pytest.raises(SystemExit):  # no arm x
        ab.main(["--benchmarks", str(tmp_path), "--cost", "--arms", "dx", "--allow-load"])
    assert measured == ["d"]
    (tmp_path / "voices" / "training_progress_reference.json").write_text(json.dumps(
        {"date": "2026-11-27", "dev_greedy": 72.86, "dev_beam": 48.73, "fsdd_beam": 1.6, "synthetic_check_beam": 47.98,
         "kokoro_check_beam": 38.76}))
    assert ab.main(["--benchmarks", str(tmp_path)]) == 0  # the shipped model's row heads the table
    assert "| the model shipped when the A/B began (2026-11-27) | | | | | 72.9 | 48.7 | 38.8 | 48.0 | 1.6 |" in readme.read_text()
    monkeypatch.setattr(ab, "export_cost", lambda onnx_dir, manifest, limit: {
        "chunk_p95_ms": 10.0, "rtf": 0.01, "onnx_mb": 27.6, "peak_rss_mb": 160.0, "dir": str(onnx_dir)})
    assert ab.main(["--benchmarks", str(tmp_path), "--cost", "--arms", "d", "--shipped-onnx", "old", "--allow-load"]) == 0
    costs = json.loads((tmp_path / "ab" / "cost.json").read_text())
    assert set(costs) == {"b", "d", "shipped"} and costs["shipped"]["dir"] == "old"  # measured in the same run
    assert "| the model shipped when the A/B began (2026-11-27) | | | | | 72.9 | 48.7 | 38.8 | 48.0 | 1.6 | 10.0 | 0.010 | 27.6 | 160 |" \
        in readme.read_text()
    readme.write_text("no markers")
    with pytest.raises(SystemExit):
        ab.main(["--benchmarks", str(tmp_path)])


def test_an_arm_that_continues_another_starts_its_curve_on_that_arms_rows(tmp_path, monkeypatch):
    """Arm.continues: an arm forked from another arm's state counts that arm's periods before its own (hours,
    steps since the A/B's fork, the periods column), and a period the other arm trained on after it is not its."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from bench import ab
    def row(period, steps, train):
        return json.dumps({"period": period, "steps": steps, "phase_minutes": {"train": train}}) + "\n"
    (tmp_path / "fork.jsonl").write_text(row(4, 1000, 60.0))
    (tmp_path / "a.jsonl").write_text(row(5, 2000, 60.0) + row(6, 3000, 60.0) + row(7, 4000, 60.0))
    (tmp_path / "d.jsonl").write_text(row(7, 3600, 30.0))
    arms = [ab.Arm("a", "", "a.jsonl", True, "", 3.6), ab.Arm("d", "", "d.jsonl", True, "", 3.6, continues="a")]
    test_ab = ab.AB("t", "", "the fork", "fork.jsonl", 4, "ref.json", arms, [], [])
    _, rows = ab.arm_rows(tmp_path, test_ab)
    assert [(r["period"], r["ab_hours"], r["ab_compute_hours"]) for r in rows["d"]] == [
        (5, 1.0, 1.0), (6, 2.0, 2.0), (7, 2.5, 2.6)]
    assert [r["ab_hours"] for r in rows["a"]] == [1.0, 2.0, 3.0]  # a's own rows are untouched


def test_an_arms_cost_is_measured_without_torch(tmp_path):
    """ab.py's cost worker streams an export through the beam search in a process where torch cannot load."""
    from asr.model.onnx_backend import default_onnx_dir
    out = tmp_path / "cost.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "ab.py"), "--cost-worker", str(default_onnx_dir()),
                    "--manifest", str(DATA / "speechocean762" / "dev.jsonl"), "--limit", "2", "--json", str(out)],
                   check=True, cwd=ROOT)
    cost = json.loads(out.read_text())
    assert cost["utterances"] == 2 and cost["chunks"] >= 2 and 0 < cost["chunk_p50_ms"] <= cost["chunk_p95_ms"]
    assert 0 < cost["rtf"] < 1 and cost["peak_rss_mb"] > 50


def test_a_state_too_big_for_the_budget_carries_its_weights_and_not_its_candidate(tmp_path, monkeypatch):
    from asr.model.loader import random_model
    work, state = tmp_path / "p001", tmp_path / "state"
    work.mkdir()
    for name in ("last.safetensors", "candidate.safetensors"):
        save_model(work / name, *random_model())
    period = {"period": 1, "previous": {"kokoro_slices": []},
              "kokoro_slice": {"manifest": str(tmp_path / "train_kokoro_en_p001.jsonl"), "start": 0, "end": 5}}
    row = {"date": "2026-11-29", "steps": 10, "train_minutes": 1.0, "kokoro_hours_seen": 0.1}
    carry.write_state(state, work, period, row)
    size = (state / "model.safetensors").stat().st_size
    assert (state / "candidate.safetensors").exists() and carry.read_state(state)["candidate_carried"]
    monkeypatch.setattr(carry, "STATE_BUDGET_BYTES", size + 1000)  # room for the weights, not for both files
    carry.write_state(state, work, period, row)
    assert sorted(p.name for p in state.iterdir()) == ["model.safetensors", "state.json"]
    assert carry.read_state(state)["candidate_carried"] is False
    following, _ = carry.current_period(tmp_path / "runs", state, tmp_path, carry.BLEND_SEED_BASE)
    assert following["period"] == 2 and "previous_candidate" not in following  # its candidate: its own mean
    monkeypatch.undo()
    carry.write_state(state, work, period, row, weights_only=True)  # --weights-only: two arms in one budget
    assert sorted(p.name for p in state.iterdir()) == ["model.safetensors", "state.json"]
    assert carry.read_state(state)["candidate_carried"] is False


def test_the_rows_score_kathleens_held_out_prompts_when_asked(tmp_path):
    assert not any("kathleen" in name for name in carry.score_sets(DATA, tmp_path))
    kathleen = tmp_path / "kathleen.jsonl"
    sets = carry.score_sets(DATA, tmp_path, kathleen)
    assert sets["kathleen_test_beam"] == (["--manifest", str(kathleen), "--split", "test"], "beam")


def test_bench_step_prints_the_crf_denominators_share(capsys):
    assert bench_step.main(["--config", "tiny", "--seconds", "4", "--steps", "1", "--warmup", "0", "--threads", "1",
                            "--criterion", "ctc", "crf", "--bf16"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "bf16 autocast" in lines[0] and " ctc " in lines[1] and "denominator" not in lines[1]
    share = float(lines[2].split(": ")[-1].rstrip("%"))
    assert " crf " in lines[2] and "states" in lines[2] and 0 < share < 100


def test_a_period_without_synthetic_speech_takes_no_kokoro_slice(tmp_path, cont):
    period = {"period": 1, "kokoro_slice": None, "previous": {"steps": 0, "train_minutes": 0.0, "kokoro_slices": [],
                                                              "kokoro_hours_seen": 0.0, "schedule_start": 0}}
    a = cont.argparse.Namespace(data_root=DATA)
    assert cont.data_overrides(a, period) == [f"data.root={DATA}"]  # the experiment's own training list
    cont.build_data(a, period, tmp_path)  # renders nothing, reads no slice
    work = tmp_path / "p001"
    work.mkdir()
    shipped = load_model()
    save_model(work / "last.safetensors", shipped[0], shipped[1], {"steps": 3})
    save_model(work / "candidate.safetensors", shipped[0], shipped[1], {"steps": 3})
    period.update(timings={"train": 1.0}, wers={"dev_beam": 40.0}, search={"lm_weight": 2.75, "word_score": -1.0})
    row = carry.progress_row(period, work, {"cpu": "x"})
    assert row["kokoro_hours_seen"] == 0.0 and row["search"] == {"lm_weight": 2.75, "word_score": -1.0}
    carry.write_state(tmp_path / "state", work, period, row, weights_only=True)
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert state["kokoro_slices"] == [] and state["steps"] == 3


def test_the_crf_ab_starts_from_the_shipped_models_row_and_shows_each_arms_search(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from bench import ab
    (tmp_path / "crf").mkdir()
    (tmp_path / "crf" / "README.md").write_text(f"{ab.BEGIN}\n{ab.END}\n")
    (tmp_path / "crf" / "a_reference.json").write_text(json.dumps(
        {"date": "2026-12-04", "libri_dev_beam": 28.52, "dev_beam": 40.81, "lm_weight": 2.25, "word_score": -1.0}))
    for arm, wer, weight in (("a", 28.4, 2.25), ("b", 25.1, 2.75)):
        (tmp_path / "crf" / f"{arm}.jsonl").write_text(json.dumps(
            {"period": 1, "steps": 4000, "libri_dev_beam": wer, "libri_dev_greedy": 53.0, "dev_beam": 39.0, "dev_greedy": 60.0,
             "phase_minutes": {"train": 80.0}, "search": {"lm_weight": weight, "word_score": -1.0}}) + "\n")
    assert ab.main(["--benchmarks", str(tmp_path), "--ab", "crf"]) == 0
    lines = [line for line in (tmp_path / "crf" / "README.md").read_text().splitlines() if line.startswith("| ")]
    shipped = next(line for line in lines if line.startswith("| the model shipped"))
    assert shipped.startswith("| the model shipped when the A/B began (2026-12-04) | | | | | 28.5 |  | 40.8 |")
    assert shipped.split("|")[-7:-5] == [" 2.25 ", " -1 "] and not any("start:" in line for line in lines)
    b = next(line for line in lines if line.startswith("| b:"))
    assert " 25.1 | 53.0 | 39.0 |" in b and b.split("|")[-7:-5] == [" 2.75 ", " -1 "]
