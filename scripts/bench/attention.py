"""Encoder time and peak memory versus audio length: sliding-window against full causal attention.

    python scripts/bench/attention.py [--minutes 1 10 60] [--window 50] [--max-gb 8] [--threads 1] [--json]

Uses the bundled model's architecture (its config, 40 ms encoder frames; `EncoderConfig()` if no model
ships) with random weights on random log-mel features (the cost does not depend on the values). The windowed model runs
through `Encoder.stream` in 500 ms chunks (linear time, bounded state); the full-attention model
(strictly causal: no lookahead chunk) runs `Encoder.forward` on the whole input, whose dense (T x T) masks and scores grow
quadratically, so it is only tried while their estimated size stays under --max-gb.
Every measurement runs in a fresh subprocess; memory is its peak RSS (VmHWM) growth over the
RSS it had with the model and the input features already allocated.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: this checkout's asr
from asr import cli  # noqa: E402
from asr.model.encoder import Encoder, EncoderConfig  # noqa: E402
from asr.model.loader import load_config  # noqa: E402
from asr.pretrained import default_model_path  # noqa: E402

FRAMES_PER_SECOND = 100  # feature frames (10 ms hop)
CHUNK_FRAMES = 50  # 500 ms


@dataclass
class Measurement:
    mode: str  # "window W" or "full"
    minutes: float
    encoder_frames: int
    seconds: float | None = None  # encoder wall time
    peak_mb: float | None = None  # peak RSS growth during the run
    estimate_gb: float | None = None  # estimated dense attention memory (full attention)
    note: str = ""  # why it was not run (then seconds is None), or what the memory includes

    @property
    def rtf(self) -> float | None:
        return None if self.seconds is None else self.seconds / (self.minutes * 60)


def encoder_frames(minutes: float, cfg: EncoderConfig) -> int:
    return round(minutes * 60 * FRAMES_PER_SECOND) // cfg.subsampling


def describe(cfg: EncoderConfig) -> str:
    """One line naming the architecture a benchmark ran."""
    return (f"d_model {cfg.d_model}, {cfg.n_layers} layers, {cfg.n_heads} heads, subsampling {cfg.subsampling} "
            f"({cfg.frontend} front end), conv module kernel {cfg.conv_kernel}")


def dense_attention_gb(frames: int, heads: int) -> float:
    """Estimated peak bytes of one full-attention layer on `frames` encoder frames: the boolean mask,
    two int64 distance tensors, and about six (H, T, T) float tensors (bias, masked bias, scores,
    softmax and their temporaries); calibrated against measured runs at 1 and 2 minutes."""
    return frames * frames * (1 + 16 + 24 * heads) / 1e9


def _memory_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    """Make VmHWM start again from the current RSS (Linux >= 4.0); harmless where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def with_window(base: EncoderConfig, window: int | None, **changes) -> EncoderConfig:
    """`base` with another attention window; its lookahead chunk is kept where the window holds it, and dropped
    (strictly causal) for full attention or a shorter window."""
    chunk = base.chunk if window is not None and base.chunk <= window else 0
    return replace(base, window=window, chunk=chunk, **changes)


@torch.inference_mode()
def measure(window: int | None, minutes: float, threads: int = 1, seed: int = 0,
            base: EncoderConfig | None = None) -> Measurement:
    """Run an encoder (`base`'s architecture with this window) once over `minutes` of random features."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    cfg = with_window(base or EncoderConfig(), window, dropout=0.0)
    encoder = Encoder(cfg).eval()
    feats = torch.randn(1, round(minutes * 60 * FRAMES_PER_SECOND), cfg.n_mels)
    encoder.stream(feats[:, :200], CHUNK_FRAMES)  # warm-up
    _reset_peak()
    before = _memory_kb("VmRSS")
    began = time.perf_counter()
    out = encoder.stream(feats, CHUNK_FRAMES) if window is not None else encoder(feats)[0]
    seconds = time.perf_counter() - began
    peak = _memory_kb("VmHWM")
    mode = "full" if window is None else f"window {window}"
    return Measurement(mode, minutes, out.shape[1], seconds, (peak - before) / 1024)


def measure_in_subprocess(window: int | None, minutes: float, threads: int, base: EncoderConfig,
                          timeout: float = 1800) -> Measurement:
    """`measure` in a fresh Python process, so the peak RSS belongs to this run alone."""
    args = [sys.executable, str(Path(__file__).resolve()), "--child", str(window or 0), str(minutes),
            "--threads", str(threads), "--config-json", json.dumps(asdict(base))]
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    mode = "full" if window is None else f"window {window}"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Measurement(mode, minutes, encoder_frames(minutes, base), note=f"failed: {reason}")
    return Measurement(**json.loads(done.stdout.strip().splitlines()[-1]))


def bundled_config() -> EncoderConfig:
    """The shipped default model's architecture, or `EncoderConfig()` when no model ships."""
    path = default_model_path()
    return load_config(path) if path else EncoderConfig()


def scaling(minutes: list[float], window: int = 50, max_gb: float = 8.0, threads: int = 1,
            cfg: EncoderConfig | None = None) -> list[Measurement]:
    """Windowed and full attention at each length for `cfg`'s architecture (default: the bundled
    model's); full attention is skipped past `max_gb`."""
    cfg = cfg or bundled_config()
    rows = []
    for m in minutes:
        frames = encoder_frames(m, cfg)
        row = measure_in_subprocess(window, m, threads, cfg)
        if not row.note:  # Encoder.stream returns all log-probs: chunks plus their concatenation
            row.note = f"includes the returned log-probs, ~{frames * cfg.vocab_size * 8 / 1e6:.0f} MB"
        rows.append(row)
        estimate = dense_attention_gb(frames, cfg.n_heads)
        if estimate > max_gb:
            rows.append(Measurement("full", m, frames, estimate_gb=estimate,
                                    note=f"not run: dense attention needs ~{estimate:.0f} GB > {max_gb:g} GB"))
        else:
            row = measure_in_subprocess(None, m, threads, cfg)
            row.estimate_gb = estimate
            rows.append(row)
    return rows


@torch.inference_mode()
def chunk_speed(window: int | None, heads: int, seconds: float = 30.0, threads: int = 1,
                base: EncoderConfig | None = None) -> dict:
    """Per-500 ms-chunk encoder compute (ms) of a random model (`base`'s width and depth, default
    EncoderConfig()) with this window and heads, streaming `seconds` of random features:
    median, p95, max and the real-time factor."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = with_window(base or EncoderConfig(), window, n_heads=heads, dropout=0.0)
    encoder = Encoder(cfg).eval()
    feats = torch.randn(1, round(seconds * FRAMES_PER_SECOND), encoder.cfg.n_mels)
    state, times = encoder.initial_state(), []
    for start in range(0, feats.shape[1], CHUNK_FRAMES):
        began = time.perf_counter()
        _, state = encoder.step(feats[:, start:start + CHUNK_FRAMES], state)
        times.append((time.perf_counter() - began) * 1000)
    times = sorted(times[2:])  # the first chunks warm up
    return {"median_ms": times[len(times) // 2], "p95_ms": times[min(len(times) - 1, int(0.95 * len(times)))],
            "max_ms": times[-1], "rtf": sum(times) / 1000 / (len(times) * CHUNK_FRAMES / FRAMES_PER_SECOND)}


def table(rows: list[Measurement]) -> str:
    """A Markdown table of the measurements."""
    lines = ["| attention | audio (min) | encoder frames | time (s) | RTF | peak memory growth (MB) | note |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        fmt = (lambda v, spec: "-" if v is None else format(v, spec))
        note = r.note or (f"dense attention estimate {r.estimate_gb:.2f} GB" if r.estimate_gb else "")
        lines.append(f"| {r.mode} | {r.minutes:g} | {r.encoder_frames} | {fmt(r.seconds, '.2f')} | "
                     f"{fmt(r.rtf, '.4f')} | {fmt(r.peak_mb, '.0f')} | {note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/bench/attention.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=cli.finite_float, nargs="+", default=[1.0, 10.0, 60.0], help="audio lengths")
    parser.add_argument("--window", type=int, default=50, help="sliding window in encoder frames (default 50)")
    parser.add_argument("--max-gb", type=cli.finite_float, default=8.0, help="skip full attention past this estimate")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    parser.add_argument("--child", nargs=2, metavar=("WINDOW", "MINUTES"), help=argparse.SUPPRESS)
    parser.add_argument("--config-json", help=argparse.SUPPRESS)  # the child's EncoderConfig
    args = parser.parse_args(argv)
    if args.child:
        window, minutes = int(args.child[0]) or None, float(args.child[1])
        base = EncoderConfig(**json.loads(args.config_json)) if args.config_json else None
        print(json.dumps(asdict(measure(window, minutes, args.threads, base=base))))
        return 0
    if any(m <= 0 for m in args.minutes) or args.window < 1 or args.threads < 1:
        parser.error("--minutes, --window and --threads must be positive")
    cfg = bundled_config()
    rows = scaling(args.minutes, args.window, args.max_gb, args.threads, cfg)
    if args.json:
        for row in rows:
            print(json.dumps(asdict(row)))
    else:
        print(f"{describe(cfg)}; {args.threads} thread(s)\n")
        print(table(rows))
    failed = [r for r in rows if r.note.startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
