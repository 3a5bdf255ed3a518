"""Finals as soon as the audio holds their endpoint (asr.decoding.stepping): the same events as whole chunks but for
the finals' times, and the same plan whether the audio comes as a file's chunks or a client's messages."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr.audio import SAMPLE_RATE
from asr.audio.chunks import rechunk
from asr.decoding.decoder import Decoder
from asr.decoding.endpoint import EndpointConfig, emissions
from asr.decoding.stepping import GRID, Stepper
from asr.model.recognizer import Recognizer
from test_stream_cli import FRAME, ScriptedRecognizer, script

EXAMPLES = Path(__file__).resolve().parent.parent / "asr" / "examples"


def plan(stepper: Stepper, pieces: list[np.ndarray], due, marked: bool) -> list[tuple[int, bool]]:
    """(position after the step, partial) for every step; `due(position)` plays the segmenter."""
    steps = []
    for piece in [*pieces, None]:
        if piece is None:
            stepper.end()
        else:
            stepper.push(piece, boundary=marked)
        while (step := stepper.next(due(stepper.stepped))) is not None:
            if steps and steps[-1] == (stepper.stepped, False) and step[1]:
                steps[-1] = (stepper.stepped, True)  # an early step then an empty one with the partial: the
                continue  # same events as one step with both (a client's end can come after its last audio)
            steps.append((stepper.stepped, step[1]))
    return steps


@pytest.mark.parametrize("total", [8000 * 5 + 3000, 8000 * 5 + 2 * GRID, 8000 * 4])
def test_the_plan_is_the_same_for_a_file_and_for_messages(total: int) -> None:
    """A final due at 2 * GRID past the end of every chunk but the first, and once right at the end."""
    audio = np.zeros(total, np.float32)

    def due(position: int) -> int:
        return total if position >= total - 8000 else (position // 8000) * 8000 + 2 * GRID + 1
    file = plan(Stepper(8000, marked=True), list(rechunk([audio], 8000)), due, marked=True)
    rng = np.random.default_rng(total)
    cuts = np.sort(rng.choice(np.arange(1, total), 40, replace=False))
    messages = plan(Stepper(8000), np.split(audio, cuts), due, marked=False)
    assert messages == file
    assert [p for p, partial in file if partial][-1] == total  # the end always brings a partial
    assert any(not partial for _, partial in file)  # and some steps came early


def run(recognizer: Recognizer, wave: np.ndarray, decoder: Decoder | None = None, early: bool = True,
        cfg: EndpointConfig | None = None) -> list:
    return list(emissions(recognizer, rechunk([wave], 8000), decoder, cfg, early=early))


def compare(early: list, late: list) -> list[tuple[float, float]]:
    """The events agree but for the finals' time (and compute); the finals' (early, late) times."""
    def key(e) -> dict:
        out = e.to_json()
        out.pop("compute_ms")
        if e.is_final:
            out.pop("time")
        return {**out, "end": e.end}  # a final's words, with times and confidences, are in its JSON
    assert [key(e) for e in early] == [key(e) for e in late]
    times = [(a.time, b.time) for a, b in zip(early, late) if a.is_final]
    assert all(a <= b for a, b in times)
    return times


def test_a_final_comes_at_its_endpoint_not_at_the_end_of_the_chunk() -> None:
    recognizer = ScriptedRecognizer()
    wave = script(("", 0.36), ("HI", 1.5), ("THERE", 0.6), ("YOU", 0.0))
    cfg = EndpointConfig(trailing_silence=0.4)
    times = compare(run(recognizer, wave, cfg=cfg), run(recognizer, wave, early=False, cfg=cfg))
    # HI: tokens in frames 9-10, the endpoint 0.4 s after them (frame 21): 21 * 640 samples (on the 20 ms grid)
    assert times[0] == (pytest.approx(21 * FRAME / SAMPLE_RATE), 1.0) and (21 * FRAME) % GRID == 0
    assert times[1][0] < times[1][1]


def test_the_model_and_the_beam_search_give_the_same_events_sooner() -> None:
    recognizer = Recognizer.load()
    decoder = Decoder.load(recognizer.tokenizer, "bundled")
    a, b = (sf.read(EXAMPLES / name, dtype="float32")[0] for name in ("synthetic_slt.flac", "speechocean762_0813_0233.flac"))
    gap = np.zeros(SAMPLE_RATE, np.float32)
    wave = np.concatenate([a, gap, b, gap, b[:SAMPLE_RATE], gap])
    times = compare(run(recognizer, wave, decoder), run(recognizer, wave, decoder, early=False))
    assert len(times) >= 3 and any(early < late for early, late in times)


@pytest.mark.parametrize("after, early", [(0.0, True), (1e-3, True), (0.5, False)])
def test_an_early_step_waits_for_quiet(after: float, early: bool) -> None:
    """After 500 ms of speech, a final due 40 ms into the next chunk is stepped early only if the audio
    before that point is quiet next to the speech (silence, faint noise); while speech goes on it
    waits for the chunk's end."""
    rng = np.random.default_rng(0)
    speech = (0.3 * rng.standard_normal(8000)).astype(np.float32)
    stepper = Stepper(8000)
    stepper.push(speech)
    assert stepper.next(None)[1] is True  # the first chunk, with its partial
    stepper.push((after * rng.standard_normal(4000)).astype(np.float32))
    step = stepper.next(8000 + 2 * GRID)
    if early:
        assert step is not None and step[1] is False and stepper.stepped == 8000 + 2 * GRID
    else:
        assert step is None and stepper.stepped == 8000


def test_a_lookahead_models_frames_are_due_once_their_chunk_has_arrived(tmp_path: Path) -> None:
    """samples_for_frames(final=False), which places the early steps, counts the whole lookahead chunk holding
    the frame: one sample short of it, `step` has returned only the chunks before."""
    from asr.model.config import EncoderConfig
    from asr.model.loader import random_model, save_model
    from asr.model.torch_backend import load_torch
    encoder, tokenizer, _ = random_model(EncoderConfig(d_model=32, n_layers=2, n_heads=2, window=16, chunk=4))
    save_model(tmp_path / "m.safetensors", encoder, tokenizer)
    recognizer = Recognizer(*load_torch(tmp_path / "m.safetensors"))
    need = recognizer.samples_for_frames(5, final=False)
    assert need == recognizer.samples_for_frames(8) > recognizer.samples_for_frames(5)
    wave = (0.1 * np.random.default_rng(0).standard_normal(need)).astype(np.float32)
    first, state = recognizer.step(wave[:-1], recognizer.initial_state())
    rest, _ = recognizer.step(wave[-1:], state)
    assert (first.shape[0], rest.shape[0]) == (4, 4)
