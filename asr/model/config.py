"""The acoustic model's architecture as plain data (no torch): what a model file's header stores."""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass
class EncoderConfig:
    vocab_size: int = 256  # CTC output classes, blank = 0
    n_mels: int = 80
    d_model: int = 192
    n_layers: int = 6
    n_heads: int = 4
    window: int | None = 50  # attention window W in encoder frames (None: full causal attention)
    max_distance: int = 128  # distance buckets of the position bias when window is None
    ff_mult: int = 4
    dropout: float = 0.1
    subsampling: int = 4  # S: encoder frame = S x 10 ms (1, 2, 4 or 8)
    frontend: str = "conv1d"  # conv1d: one strided Conv1d; conv2d: narrow Conv2d layers (S=8: x4, pairs merged);
    #                           whisper: Whisper's two Conv1d (kernel 3, the second of stride 2), causal (S=2)
    subsampling_kernel: int = 8  # conv1d: feature frames each encoder frame looks at (>= S)
    frontend_channels: int = 32  # conv2d: channels of each Conv2d layer (keep it narrow on CPUs)
    conv_kernel: int = 0  # causal depthwise conv module in each block over this many frames (0: none)
    features: str = "fbank"  # the feature front end the model was trained on (asr.features: fbank | whisper)
    chunk: int = 0  # lookahead inside the chunk: a frame also sees the rest of its chunk of this many encoder
    #                 frames (chunks counted from the stream's start; 0: strictly causal)
    norm: str = "global"  # how frames are normalised (asr.model.normalise): global (the stored training mean and
    #                       std) or running (a causal running mean of the stream's own frames, then the std)
    norm_prior: int = 100  # running: the stored mean counts as this many frames at the start of a stream
    norm_horizon: int = 300  # running: past this many frames (prior included) the mean forgets at 1/horizon a frame
    max_chunk: int = 0  # the longest lookahead chunk the model holds biases for (0: chunk); trained at several
    #                     sizes (dynamic chunk training), it can compute with any chunk up to this one

    @property
    def longest_chunk(self) -> int:
        """The longest lookahead chunk the model holds biases for."""
        return max(self.chunk, self.max_chunk)

    def with_chunk(self, chunk: int, longest: int = 0) -> "EncoderConfig":
        """This config computing with lookahead inside chunks of `chunk` frames, holding biases for chunks up
        to the longest of `chunk`, `longest` and its own (max_chunk 0 when that is `chunk` itself)."""
        longest = max(chunk, longest, self.longest_chunk)
        return replace(self, chunk=chunk, max_chunk=longest if longest > chunk else 0)

    def validate(self) -> "EncoderConfig":
        """Raise ValueError naming the first bad value."""
        if self.d_model <= 0 or self.n_heads <= 0 or self.d_model % self.n_heads:
            raise ValueError(f"n_heads={self.n_heads} must divide d_model={self.d_model}")
        if self.window is not None and self.window < 1:
            raise ValueError(f"window={self.window} must be >= 1 (or null for full attention)")
        if self.subsampling not in (1, 2, 4, 8):
            raise ValueError(f"subsampling={self.subsampling} must be 1, 2, 4 or 8")
        if self.frontend not in ("conv1d", "conv2d", "whisper"):
            raise ValueError(f"frontend={self.frontend!r} must be conv1d, conv2d or whisper")
        if self.frontend == "whisper" and self.subsampling != 2:
            raise ValueError(f"frontend=whisper subsamples by 2, not subsampling={self.subsampling}")
        if self.features not in ("fbank", "whisper"):
            raise ValueError(f"features={self.features!r} must be fbank or whisper")
        if self.chunk < 0 or (self.chunk and (self.window is None or self.chunk > self.window)):
            raise ValueError(f"chunk={self.chunk} must be 0 (no lookahead) or between 1 and the window ({self.window})")
        if self.max_chunk and (self.window is None or not self.chunk <= self.max_chunk <= self.window):
            raise ValueError(f"max_chunk={self.max_chunk} must be 0 or between chunk ({self.chunk}) and the window "
                             f"({self.window})")
        if self.frontend == "conv1d" and self.subsampling_kernel < self.subsampling:
            raise ValueError(f"subsampling_kernel={self.subsampling_kernel} must be >= subsampling={self.subsampling}")
        if self.norm not in ("global", "running") or self.norm_prior < 0 or self.norm_horizon < 1:
            raise ValueError(f"norm={self.norm!r} must be global or running, with norm_prior >= 0 "
                             f"({self.norm_prior}) and norm_horizon >= 1 ({self.norm_horizon})")
        if self.conv_kernel < 0:
            raise ValueError(f"conv_kernel={self.conv_kernel} must be >= 0 (0: no conv module)")
        if self.n_layers < 1 or self.vocab_size < 2:
            raise ValueError(f"n_layers={self.n_layers} and vocab_size={self.vocab_size} must be >= 1 and >= 2")
        return self


def frames_out(frames: int, kernel: int, stride: int) -> int:
    """Encoder frames that `frames` feature frames (the subsampling's left padding included) complete."""
    return (frames - kernel) // stride + 1 if frames >= kernel else 0


def ready_frames(frames: int, chunk: int, final: bool) -> int:
    """Of `frames` encoder frames a step could compute, those it does: all of them without lookahead or at
    the end of the stream (`final`), else whole chunks only (the rest wait for their chunk to fill)."""
    return frames if final or not chunk else frames - frames % chunk
