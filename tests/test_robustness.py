"""scripts/bench/robustness.py (issue 89): its conditions render the same audio every time at the utterance's
length, only from the test side of the noise folder; a tiny run writes the figures with the right arithmetic, its
clean row equal to asr.evaluate's; a bad option is one line and a non-zero exit."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asr.corpus.manifest import Utterance
from asr.training.acoustic import channel

from conftest import tone, write
from helpers import DATA, ROOT

sys.path.insert(0, str(ROOT / "scripts"))  # the `bench` package
from bench import conditions  # noqa: E402
from bench.conditions import CONDITIONS, Sources, Speech, noise_items, render, render_noise  # noqa: E402

NOISE = DATA / "noise"
SCRIPT = ROOT / "scripts" / "bench" / "robustness.py"
needs_noise = pytest.mark.skipif(not (NOISE / "manifest.jsonl").is_file(), reason="needs ../shared/data/noise")


@pytest.fixture
def sources(tmp_path: Path) -> Sources:
    """A made-up set of four 1.5 s utterances by three speakers, and the real noise folder."""
    rows = []
    for index, speaker in enumerate(["a", "a", "b", "c"]):
        path = write(tmp_path / f"{index}.wav", tone(1.5, freq=200.0 + 100 * index, seed=index))
        rows.append(Utterance(path, 1.5, "A WORD", speaker))
    return Sources(NOISE, {"made": rows}, {"made": tmp_path})


def speech(sources: Sources, index: int = 0) -> Speech:
    utt = sources.sets["made"][index]
    return Speech("made", sources.name("made", utt), utt.speaker, tone(1.5, freq=300.0, seed=index))


@needs_noise
def test_every_condition_renders_the_same_audio_every_time_at_the_same_length(sources: Sources) -> None:
    one, other = speech(sources, 0), speech(sources, 1)
    for condition in CONDITIONS:
        wave, drawn = render(condition, sources, one)
        again, drawn_again = render(condition, sources, one)
        assert wave.dtype == np.float32 and len(wave) == len(one.wave), condition.name
        assert np.array_equal(wave, again) and drawn == drawn_again, condition.name
        if condition.name != "clean":
            assert not np.array_equal(wave, one.wave), condition.name
    noise = conditions.BY_NAME["noise"]
    assert render(noise, sources, one)[1] != render(noise, sources, other)[1]  # each utterance its own draw
    item = noise_items(sources)[0]
    assert np.array_equal(render_noise(item, sources, 2.0), render_noise(item, sources, 2.0))


@needs_noise
def test_other_talkers_are_other_utterances_by_other_speakers(sources: Sources) -> None:
    wave, drawn = render(conditions.BY_NAME["talkers"], sources, speech(sources, 0))
    talkers = drawn.split(" + ")
    assert sorted(talkers) == ["1.wav", "2.wav", "3.wav"]  # 0.wav is the speech; 1.wav (its speaker's) fills up


@needs_noise
def test_the_benchmark_plays_only_the_test_side(sources: Sources, monkeypatch: pytest.MonkeyPatch) -> None:
    sides, real_pools = [], channel.pools

    def spy(root: str, side: str) -> channel.Pools:
        sides.append(side)
        return real_pools(root, side)

    monkeypatch.setattr(channel, "pools", spy)
    train, test = real_pools(str(NOISE), "train").names, real_pools(str(NOISE), "test").names
    assert not set(train["rooms"]) & set(test["rooms"]) and not set(train["microphones"]) & set(test["microphones"])
    drawn = set()
    for index in range(4):
        for name in ("microphone", "reverb", "noise"):
            drawn.add(render(conditions.BY_NAME[name], sources, speech(sources, index))[1].split(" at ")[0])
    items = noise_items(sources)
    for item in items[:8]:
        render_noise(item, sources, 1.0)
    assert set(sides) == {"test"}
    played = set(test["rooms"]) | set(test["microphones"]) | set(test["noise"])
    assert drawn <= played and not drawn & (set(train["rooms"]) | set(train["microphones"]) | set(train["noise"]))
    assert all("[last 30%]" in n for n in test["noise"])
    assert {i.source for i in items} == set(conditions.NOISE_COLOURS) | set(test["noise"])


def test_the_subset_is_seeded_and_a_smaller_one_is_part_of_a_larger_one() -> None:
    from bench.robustness import subset  # noqa: PLC0415
    rows = [Utterance(Path(f"{i}.wav"), 1.0, "A") for i in range(50)]
    small, large = subset(rows, "s", 5), subset(rows, "s", 20)
    assert small == subset(rows, "s", 5) and set(map(id, small)) <= set(map(id, large))
    assert [rows.index(u) for u in large] == sorted(rows.index(u) for u in large)  # manifest order
    assert small != subset(rows, "other set", 5)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@needs_noise
@pytest.mark.skipif(not (DATA / "speechocean762" / "dev.jsonl").is_file(), reason="needs speechocean762 dev")
def test_a_tiny_run_writes_the_figures_and_its_clean_row_is_asr_evaluate_s(model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run("--sets", "speechocean762-dev", "--limit", "2", "--conditions", "mp3-16,quiet-25", "--noise-seconds",
               "1", "--peers", "none", "--model", str(model_path), "--out", str(out), "--cache", str(tmp_path / "c"))
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((out / "robustness.json").read_text())
    entry = record["figures"]["sets"]["speechocean762-dev"]
    assert entry["utterances"] == 2 and list(entry["conditions"]) == ["clean", "mp3-16", "quiet-25"]
    clean = entry["conditions"]["clean"]["systems"]["asr"]["wer"]
    ratios = []
    for name, condition in entry["conditions"].items():
        got = condition["systems"]["asr"]
        assert got["utts"] == 2 and got["wer"] == pytest.approx(got["errors"] / got["ref_words"])
        assert got["ratio"] == pytest.approx(got["wer"] / clean)
        ratios += [got["ratio"]] if name != "clean" else []
    assert entry["mean_ratio"]["asr"] == pytest.approx(sum(ratios) / 2)
    noise = record["figures"]["noise_alone"]
    assert len(noise["items"]) == 3 * (3 + 4)  # 3 levels x (3 colours + 4 recordings)
    for row in noise["items"].values():
        asr = row["systems"]["asr"]
        assert row["seconds"] == pytest.approx(1.0) and asr["words_per_minute"] == pytest.approx(asr["words"] * 60)
    assert noise["total"]["asr"]["words"] == sum(r["systems"]["asr"]["words"] for r in noise["items"].values())
    assert record["noise_side"] == "test" and record["model"].startswith(f"{model_path}, sha256 ") and record["machine"]
    page = (out / "robustness.md").read_text()
    assert "| condition | asr WER | ratio |" in page and "| MP3 16 kbps |" in page
    assert "| pink noise, -40 dBFS |" in page
    assert "**mean of the 2 degraded**" in page and (out / "robustness.png").stat().st_size > 0
    manifest = tmp_path / "clean.jsonl"  # the originals of the two utterances, scored by asr.evaluate itself
    rows = [json.loads(line) for line in (DATA / "speechocean762" / "dev.jsonl").read_text().splitlines()]
    picked = [r for r in rows if r["audio"] in record["utterances"]["speechocean762-dev"]]
    manifest.write_text("".join(json.dumps({**r, "audio": str(DATA / "speechocean762" / r["audio"])}) + "\n"
                                for r in picked))
    evaluated = subprocess.run([sys.executable, "-m", "asr.evaluate", str(manifest), "--model", str(model_path)],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert re.search(r"WER=([\d.]+)", evaluated.stdout).group(1) == f"{clean * 100:.2f}"


@pytest.mark.parametrize("args", [["--conditions", "mp3-16,bogus"], ["--sets", "nowhere"], ["--limit", "0"],
                                  ["--peers", "whisper-huge"], ["--noise-root", "/nonexistent"],
                                  ["--cache", str(SCRIPT)], ["--jobs", "2", "--batch-seconds", "0"]])
def test_a_bad_option_is_one_line_and_a_non_zero_exit(args: list[str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    from bench.robustness import parse  # noqa: PLC0415
    with pytest.raises(SystemExit) as stopped:
        parse([*args, "--out", str(tmp_path)])
    said = capsys.readouterr()
    assert stopped.value.code == 2 and said.out == ""
    assert said.err.startswith("robustness: error: ") and said.err.count("\n") == 1, said.err


def test_the_script_says_a_bad_option_in_one_line(tmp_path: Path) -> None:
    done = run("--conditions", "loud", "--out", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown loud" in done.stderr, done.stderr


def test_the_readme_lists_every_condition_and_keeps_a_place_for_the_results() -> None:
    readme = (ROOT / "benchmarks" / "robustness" / "README.md").read_text()
    for condition in CONDITIONS:
        assert f"| `{condition.name}` |" in readme, condition.name
    assert "<!-- robustness results:" in readme and "<!-- end of robustness results -->" in readme
