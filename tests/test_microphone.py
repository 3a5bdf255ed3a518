"""`asr.stream --mic` for real through PortAudio and ALSA, with no sound card.

An ALSA configuration (tests/alsa/replay.conf.in) replays a raw 16 kHz S16_LE file through
ALSA's `file` plugin on top of the `null` device; ALSA_CONFIG_PATH selects it in a subprocess
before sounddevice is imported. --max-seconds (the file's length) ends the capture.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import jiwer
import pytest

from asr.pretrained import default_model_path
from asr.text.normalize import normalize
from conftest import run_module

sys.path.insert(0, str(Path(__file__).parent / "alsa"))
import replay  # noqa: E402

pytestmark = pytest.mark.serial  # the replayed microphone runs in real time: a busy machine overflows it

SENTENCE = "the quick brown fox jumps over the lazy dog"
SECONDS = 4.0  # speech, then silence so that the endpointer closes the segment

if not (shutil.which("espeak-ng") and shutil.which("sox")):
    pytest.skip("espeak-ng and sox are needed to make the replayed speech", allow_module_level=True)
try:
    import sounddevice  # noqa: F401  (only to know whether PortAudio is there; tests use subprocesses)
except OSError:
    pytest.skip("PortAudio is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def fake_mic(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """(environment whose default microphone says SENTENCE, a wav file of the very same samples)."""
    folder = tmp_path_factory.mktemp("alsa")
    raw, wav = replay.save_replay(replay.speak(SENTENCE, folder, SECONDS), folder)
    return replay.alsa_env(replay.write_config(raw, folder)), wav


def mic(env: dict[str, str], *args: str):
    return run_module("asr.stream", "--mic", "--max-seconds", str(SECONDS), *args, env=env)


def without_timing(lines: list[str]) -> list[dict]:
    objects = [json.loads(line) for line in lines]
    for o in objects:
        del o["compute_ms"]
    return objects


def test_mic_and_file_give_identical_results(fake_mic, model_path: Path) -> None:
    env, wav = fake_mic
    live = mic(env, "--model", str(model_path), "--json")
    assert live.returncode == 0, live.stderr
    assert "listening on default" in live.stderr and "overflow" not in live.stderr
    from_file = run_module("asr.stream", "--file", str(wav), "--model", str(model_path), "--json")
    assert from_file.returncode == 0, from_file.stderr
    live_objects = without_timing(live.stdout.splitlines())
    assert live_objects == without_timing(from_file.stdout.splitlines())
    partial_times = [o["time"] for o in live_objects if not o["is_final"]]  # at chunk ends, where the text changed
    assert partial_times and partial_times == sorted(set(partial_times))
    assert set(partial_times) <= {0.5 * n for n in range(1, 9)}


def test_list_devices_and_no_device(fake_mic, tmp_path: Path) -> None:
    env, _ = fake_mic
    listing = run_module("asr.stream", "--list-devices", env=env)
    assert listing.returncode == 0 and "replay" in listing.stdout and "default" in listing.stdout
    wrong = mic(env, "--device", "no-such-device")
    assert wrong.returncode == 2 and "no input device matches 'no-such-device'" in wrong.stderr
    no_card = replay.alsa_env(replay.empty_config(tmp_path))
    missing = mic(no_card)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1].startswith("asr.stream: error: no default audio input device")


def test_sounddevice_is_imported_only_for_the_microphone() -> None:
    code = "import sys, asr.stream, asr.transcribe, asr.evaluate; print('sounddevice' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.skipif(default_model_path() is None, reason="the trained default model has not shipped yet")
def test_mic_transcript_with_default_model(fake_mic) -> None:
    """The microphone content test: the bundled model hears the replayed sentence (CER, as in test_transcribe)."""
    env, _ = fake_mic
    live = mic(env)
    assert live.returncode == 0, live.stderr
    heard = normalize(" ".join(live.stdout.splitlines()))
    assert jiwer.cer(normalize(SENTENCE), heard) <= 0.35, heard


def test_ctrl_c_stops_listening_with_the_final_out_one_line_and_130(fake_mic, model_path: Path) -> None:
    """No --max-seconds: the replay goes on (silence after the speech) until Ctrl-C, as a user stops it."""
    env, _ = fake_mic
    live = subprocess.Popen([sys.executable, "-m", "asr.stream", "--mic", "--model", str(model_path), "--json"],
                            cwd=Path(__file__).resolve().parents[1], env={**os.environ, **env}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert json.loads(live.stdout.readline())["time"] == 0.5  # it is listening and transcribing
    os.killpg(live.pid, signal.SIGINT)
    out, err = live.communicate(timeout=120)
    assert live.returncode == 130, err
    assert err.strip().splitlines()[-1] == "asr.stream: interrupted (Ctrl-C)"
    assert json.loads(out.splitlines()[-1])["is_final"]  # the open segment's final came out
