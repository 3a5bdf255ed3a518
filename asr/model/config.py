"""The acoustic model's architecture as plain data (no torch): what a model file's header stores."""
from __future__ import annotations

from dataclasses import dataclass


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
    frontend: str = "conv1d"  # conv1d: one strided Conv1d; conv2d: narrow Conv2d layers (S=8: x4, pairs merged)
    subsampling_kernel: int = 8  # conv1d: feature frames each encoder frame looks at (>= S)
    frontend_channels: int = 32  # conv2d: channels of each Conv2d layer (keep it narrow on CPUs)
    conv_kernel: int = 0  # causal depthwise conv module in each block over this many frames (0: none)

    def validate(self) -> "EncoderConfig":
        """Raise ValueError naming the first bad value."""
        if self.d_model <= 0 or self.n_heads <= 0 or self.d_model % self.n_heads:
            raise ValueError(f"n_heads={self.n_heads} must divide d_model={self.d_model}")
        if self.window is not None and self.window < 1:
            raise ValueError(f"window={self.window} must be >= 1 (or null for full attention)")
        if self.subsampling not in (1, 2, 4, 8):
            raise ValueError(f"subsampling={self.subsampling} must be 1, 2, 4 or 8")
        if self.frontend not in ("conv1d", "conv2d"):
            raise ValueError(f"frontend={self.frontend!r} must be conv1d or conv2d")
        if self.frontend == "conv1d" and self.subsampling_kernel < self.subsampling:
            raise ValueError(f"subsampling_kernel={self.subsampling_kernel} must be >= subsampling={self.subsampling}")
        if self.conv_kernel < 0:
            raise ValueError(f"conv_kernel={self.conv_kernel} must be >= 0 (0: no conv module)")
        if self.n_layers < 1 or self.vocab_size < 2:
            raise ValueError(f"n_layers={self.n_layers} and vocab_size={self.vocab_size} must be >= 1 and >= 2")
        return self


def frames_out(frames: int, kernel: int, stride: int) -> int:
    """Encoder frames that `frames` feature frames (the subsampling's left padding included) complete."""
    return (frames - kernel) // stride + 1 if frames >= kernel else 0
