"""A full-context teacher for distillation: Whisper's encoder as Whisper runs it, and its outputs cached.

Whisper's knowledge lives in full-context attention: frozen under a causal mask it is lost (its last
block reads out characters at CER 42 with the whole utterance, 63-80 causally). So the streaming student
is taught instead: the teacher runs once over each whole training utterance, and its frames are a dense
target for every 40 ms of it (asr/training/acoustic/whisper/distill.py).

`WhisperTeacher` is the encoder of Whisper (MIT licence; the `pretrained` extra's CTranslate2 files, read
by asr/training/acoustic/whisper/weights.py) as Whisper computes it: log-mel floored at each utterance's maximum
minus 8, two convolutions centred on their frame (not causal), sinusoidal absolute positions, full attention. Its
outputs at 20 ms are averaged in pairs to the student's 40 ms frames and stored float16, one `.npy` per
utterance under a cache folder, keyed by a hash of the audio file's bytes: audio rendered again into other
bytes is computed again, and nothing else is (a corpus copied again, to new paths or times, keeps its frames).

    python -m asr.training.acoustic.whisper.teacher --out data/teacher/base MANIFEST [...]  # prints the cost an hour

An experiment that lost, kept only to reproduce a published table: the teacher's cache feeds arms b and c of
`recipes/native/README.md` (`conf/experiment/native_distill.yaml`, `native_tiny_distill.yaml`), whose rows are in
`benchmarks/native/README.md` (no gain at equal compute, 2026-12-02). No shipped model trains with it.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr.audio.files import load_audio
from asr.features import Fbank, FbankConfig
from asr.training.acoustic.whisper.weights import encoder_shape, encoder_weights, load_ct2

POOL = 2  # teacher frames (20 ms) per student frame (40 ms)


class TeacherBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, ff: int):
        super().__init__()
        self.n_heads = n_heads
        self.attn_norm, self.ff_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.out = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, ff), nn.GELU(), nn.Linear(ff, d_model))

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> (B, T, D), every frame attending to every frame."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        x = x + self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ff_norm(x))


class WhisperTeacher(nn.Module):
    """Whisper's encoder with its own weights: Whisper log-mel (B, T, 80) at 10 ms -> (B, T/2, D) at 20 ms."""

    def __init__(self, source: str | Path = "base", n_heads: int = 8):
        super().__init__()
        variables = load_ct2(source)
        shape = encoder_shape(variables)
        d, self.n_mels = shape["d_model"], shape["n_mels"]
        self.conv1 = nn.Conv1d(self.n_mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.blocks = nn.ModuleList(TeacherBlock(d, n_heads, shape["ff_mult"] * d) for _ in range(shape["n_layers"]))
        self.norm = nn.LayerNorm(d)
        self.register_buffer("positions", torch.from_numpy(np.array(variables["encoder/position_encodings/encodings"],
                                                                    np.float32)))
        missing, unexpected = self.load_state_dict(_state(variables), strict=False)
        if [m for m in missing if m != "positions"] or unexpected:
            raise ValueError(f"{source}: not Whisper's encoder as the teacher reads it ({missing + unexpected})")
        self.eval().requires_grad_(False)
        self.fbank = Fbank(replace(FbankConfig.of("whisper"), whisper_floor=-1e9))

    @property
    def dim(self) -> int:
        return self.norm.normalized_shape[0]

    def forward(self, logmel: Tensor) -> Tensor:
        x = F.gelu(self.conv2(F.gelu(self.conv1(logmel.transpose(1, 2))))).transpose(1, 2)  # (B, T/2, D)
        if x.shape[1] > self.positions.shape[0]:
            raise ValueError(f"{x.shape[1] * 0.02:.1f} s is longer than Whisper's 30 s")
        x = x + self.positions[: x.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def features(self, wave: np.ndarray) -> Tensor:
        """Whisper's log-mel of a 16 kHz waveform: (1, T, 80), floored at its own maximum minus 8 (in log10)."""
        scaled = self.fbank(wave)  # (log10 + 4) / 4, not floored yet
        return torch.from_numpy(np.maximum(scaled, scaled.max(initial=-1e9) - 2.0))[None]  # 8 / 4 = 2

    @torch.inference_mode()
    def frames(self, wave: np.ndarray) -> np.ndarray:
        """The teacher's output at the student's 40 ms rate: (T / 4, D) float16 for T 10 ms frames."""
        out = self(self.features(wave))[0]  # (T/2, D)
        pairs = out.shape[0] // POOL * POOL
        pooled = out[:pairs].view(-1, POOL, out.shape[1]).mean(1) if pairs else out[:0]
        if out.shape[0] > pairs:  # an odd last frame stands alone
            pooled = torch.cat([pooled, out[pairs:]])
        return pooled.numpy().astype(np.float16)


def _state(variables: dict[str, np.ndarray]) -> dict[str, Tensor]:
    """Whisper's encoder tensors under the teacher's names: `encoder_weights`' mapping onto `Encoder`, renamed
    where the teacher's modules differ (no subsampling wrapper, no attention submodule, no dropout in its MLP)."""
    state = {}
    for name, array in encoder_weights(variables).items():
        if name.startswith("cmvn."):  # the teacher reads Whisper's own log-mel, unnormalised
            continue
        name = name.removeprefix("subsampling.").replace(".attn.", ".").replace(".ff.3.", ".ff.2.")
        state[name] = torch.from_numpy(array)
    return state


def cache_key(audio: str | Path) -> str:
    """The cache file's name for an audio file: its bytes, hashed. A corpus copied again (new paths or times)
    keeps its frames; audio rendered again into other bytes gets new ones."""
    path = Path(audio).resolve()
    stat = path.stat()
    return _content_key(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=1 << 17)
def _content_key(path: str, size: int, mtime_ns: int) -> str:
    """(size and time only make a changed file a new entry of this memo: each file is read once per process)"""
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()[:24] + ".npy"


class TeacherCache:
    """The cached frames of one teacher: `load(audio)` -> (T / 4, D) float16 array, read from disk."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"{self.folder}: no teacher cache "
                                    "(python -m asr.training.acoustic.whisper.teacher writes one)")

    def load(self, audio: str | Path) -> np.ndarray:
        path = self.folder / cache_key(audio)
        if not path.exists():
            raise FileNotFoundError(f"{audio}: not in the teacher cache {self.folder} (new or re-rendered audio: "
                                    "run python -m asr.training.acoustic.whisper.teacher on its manifest)")
        return np.load(path)


def fill_cache(audios: list[Path], out: Path, teacher: WhisperTeacher, share: tuple[int, int] = (0, 1)) -> dict:
    """Compute the frames of every audio file of this worker's `share` (index, count) not yet in `out`;
    returns the seconds of audio done and the compute seconds spent."""
    out.mkdir(parents=True, exist_ok=True)
    done_s, spent = 0.0, 0.0
    for i, audio in enumerate(audios):
        if i % share[1] != share[0]:
            continue
        target = out / cache_key(audio)
        if target.exists():
            continue
        wave = load_audio(audio)
        start = time.process_time()
        frames = teacher.frames(wave)
        spent += time.process_time() - start
        done_s += len(wave) / 16000
        partial = target.with_name(f".{target.name}.{os.getpid()}.npy")
        np.save(partial, frames)
        os.replace(partial, target)
    return {"audio_s": done_s, "cpu_s": spent}


def _worker(args: tuple[list[Path], Path, str, int, int, int]) -> dict:
    audios, out, source, index, count, threads = args
    torch.set_num_threads(threads)
    return fill_cache(audios, out, WhisperTeacher(source), (index, count))


def main(argv: list[str] | None = None) -> int:
    from asr import cli  # noqa: PLC0415
    from asr.corpus.manifest import read_manifest  # noqa: PLC0415

    p = cli.new_parser("asr.training.acoustic.whisper.teacher", __doc__)
    p.add_argument("manifests", nargs="+", type=Path, help="the training manifests whose audio it runs over")
    p.add_argument("--out", type=Path, required=True, help="the cache folder (data/teacher/<teacher>)")
    p.add_argument("--teacher", default="base", help="Whisper size of the pretrained extra (base, tiny.en)")
    p.add_argument("--jobs", type=int, default=1, help="processes")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--max-duration", type=float, default=30.0, help="longer utterances are skipped (Whisper: 30 s)")
    a = p.parse_args(argv)
    audios = sorted({u.audio for m in a.manifests for u in read_manifest(m, durations=False, text=False)
                     if u.duration is None or u.duration <= a.max_duration})
    todo = [x for x in audios if not (a.out / cache_key(x)).exists()]
    print(f"teacher: {len(audios)} audio files, {len(todo)} to compute into {a.out}", file=sys.stderr, flush=True)
    start = time.monotonic()
    jobs = [(todo, a.out, a.teacher, i, a.jobs, a.threads) for i in range(a.jobs)]
    if a.jobs == 1:
        results = [_worker(jobs[0])]
    else:
        import multiprocessing as mp  # noqa: PLC0415

        with mp.get_context("spawn").Pool(a.jobs) as pool:
            results = pool.map(_worker, jobs)
    audio_h = sum(r["audio_s"] for r in results) / 3600
    cpu_s = sum(r["cpu_s"] for r in results)
    wall = time.monotonic() - start
    per_hour = f"{cpu_s / audio_h / 60:.1f} CPU-min per audio hour" if audio_h else "nothing new"
    print(f"teacher: {audio_h:.2f} h of audio in {wall / 60:.1f} min wall, {cpu_s / 60:.1f} CPU-min of the model "
          f"at {a.threads} thread(s) a process ({per_hour})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
