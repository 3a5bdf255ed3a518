"""How the acoustic model normalises its log-mel frames, in numpy (the onnx backend; the torch encoder
does the same arithmetic on tensors in `asr.model.encoder.FrameNorm`).

Two kinds, chosen by the model (`EncoderConfig.norm`, stored in its file):
  global   (x - mean) / std with the training set's statistics, stored in the model. A louder or quieter
           speaker shifts every log-mel bin by the same constant (0.23 a dB), which this keeps.
  running  x minus a causal running mean of the stream's own frames, / std. The mean starts at the stored
           training mean, worth `norm_prior` frames, takes in each frame as it comes (a plain average of
           the prior and the frames so far), and once `norm_horizon` frames are in it forgets at
           1/horizon a frame (an exponential mean). A level change is then removed within a few seconds,
           and the state is one mean and one count a stream, however long it runs.
Frame t's mean depends on frames 0..t only and is updated one frame at a time in float32, the same
arithmetic whether the frames come in one call or in chunks: streamed == whole-utterance exactly.
"""
from __future__ import annotations

import numpy as np

NORMS = ("global", "running")


def running_weights(count: int, frames: int, prior: int, horizon: int) -> np.ndarray:
    """(frames,) float32: the weight each new frame gets in the running mean, for a stream that has
    seen `count` frames before them: 1 / min(count + 1 + prior, horizon)."""
    seen = np.arange(count + 1, count + 1 + frames, dtype=np.int64) + prior
    return (1.0 / np.minimum(seen, max(horizon, 1))).astype(np.float32)


def running_norm(feats: np.ndarray, mean: np.ndarray, count: int, prior: int, horizon: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """feats (T, F) float32 of one stream, its running mean (F,) and the frames it has seen -> the frames
    minus the running mean at each (T, F), and the mean after them (divide by std afterwards)."""
    out = np.empty_like(feats, dtype=np.float32)
    mean = np.array(mean, dtype=np.float32)
    for t, weight in enumerate(running_weights(count, len(feats), prior, horizon)):
        mean += weight * (feats[t] - mean)
        out[t] = feats[t] - mean
    return out, mean
