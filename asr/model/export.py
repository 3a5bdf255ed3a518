"""Export an `Encoder`'s streaming step to ONNX, with everything a torch-free runtime needs beside it.

The exported folder (read by `asr.model.onnx_backend`):

    encoder.onnx        Encoder.step_padded as a graph: a batch of streams' normalised frames (padded
                        to the longest), the frames each completes and every cache in, log-probs and
                        the next caches out (the streaming state stays explicit)
    encoder.int8.onnx   (int8=True) the same graph with dynamically quantised weights
    model.json          format, config, CMVN statistics, the subsampling's kernel/stride, the state's
                        tensor names and shapes, the model's info, and the file names below
    tokenizer.bin       the tokenizer (`Tokenizer.to_bytes`)
    README.md           the tensor contract

The export is deterministic: the same model gives the same bytes (fixed opset, no timestamps).
"""
from __future__ import annotations

import json
import logging
import warnings
from dataclasses import asdict
from pathlib import Path

import torch
from torch import Tensor, nn

from asr.model.encoder import Encoder, EncoderState
from asr.text.tokenizer import Tokenizer

FORMAT = "asr-onnx-v2"
OPSET = 17
FP32_FILE, INT8_FILE = "encoder.onnx", "encoder.int8.onnx"


def state_names(encoder: Encoder) -> list[str]:
    """Graph input names of the state, in order: frames, invalid, key_i, value_i, conv_i (if any)."""
    layers = range(encoder.cfg.n_layers)
    convs = [f"conv_{i}" for i in layers] if encoder.cfg.conv_kernel else []
    return ["frames", "invalid"] + [f"key_{i}" for i in layers] + [f"value_{i}" for i in layers] + convs


class StreamingRows(nn.Module):
    """`Encoder.step_padded` over flat tensors, as the exporter needs it:
    (frames (B,S,F), ends (B,) int64, invalid (B,) int64, keys..., values..., convs...)
    -> (logprobs (B,C,V), invalid, keys..., values..., convs...). Valid when some row completes an
    encoder frame (S >= the subsampling kernel); the runtime handles the rest without the graph."""

    def __init__(self, encoder: Encoder):
        super().__init__()
        self.encoder = encoder.eval()
        self.layers, self.has_conv = encoder.cfg.n_layers, bool(encoder.cfg.conv_kernel)

    def forward(self, frames: Tensor, ends: Tensor, invalid: Tensor, *caches: Tensor) -> tuple[Tensor, ...]:
        n = self.layers
        state = EncoderState(frames=frames[:, :0], invalid=invalid, keys=list(caches[:n]),
                             values=list(caches[n:2 * n]), convs=list(caches[2 * n:]) if self.has_conv else [])
        logprobs, new = self.encoder.step_padded(frames, ends, state)
        return (logprobs, new.invalid, *new.keys, *new.values, *new.convs)


def _example_inputs(encoder: Encoder) -> list[Tensor]:
    """Two streams whose rows differ in length (so that nothing about `ends` is traced as a constant)."""
    sub, generator = encoder.subsampling, torch.Generator().manual_seed(0)
    frames = torch.randn(2, 3 * sub.kernel, encoder.cfg.n_mels, generator=generator)
    ends = torch.tensor([sub.frames_out(frames.shape[1]), sub.frames_out(frames.shape[1] - sub.stride)])
    state = encoder.initial_state(2)
    return [frames, ends, state.invalid, *state.keys, *state.values, *state.convs]


def export_graph(encoder: Encoder, path: str | Path) -> None:
    """Write `encoder`'s padded streaming step to `path` (ONNX, opset OPSET, weights inside the file)."""
    if encoder.cfg.window is None:
        raise ValueError("ONNX export needs a sliding attention window (window=None caches grow without bound)")
    caches = state_names(encoder)[2:]
    inputs, outputs = ["frames", "ends", "invalid", *caches], ["logprobs", "new_invalid"] + [f"new_{n}" for n in caches]
    dynamic = {name: {0: "batch"} for name in inputs + outputs}
    dynamic["frames"][1], dynamic["logprobs"][1] = "time", "out_time"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings for the branches the runtime takes care of
        torch.onnx.export(StreamingRows(encoder), tuple(_example_inputs(encoder)), str(path),
                          input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                          opset_version=OPSET, dynamo=False, do_constant_folding=True)


def quantize_int8(src: str | Path, dst: str | Path) -> None:
    """Dynamically quantised copy of an fp32 graph: int8 weights for MatMul/Gemm, activations
    quantised per call (onnxruntime.quantization.quantize_dynamic)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic logs advice about static pre-processing on the root logger
    try:
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gemm"])
    finally:
        root.setLevel(level)


def model_json(encoder: Encoder, info: dict, int8: bool) -> dict:
    """The plain-JSON description that `asr.model.onnx_backend` reads."""
    cfg, sub = encoder.cfg, encoder.subsampling
    heads, head_dim = cfg.n_heads, cfg.d_model // cfg.n_heads
    slots = cfg.window - 1
    shapes = {"frames": ["batch", "left", cfg.n_mels], "invalid": ["batch"]}
    for i in range(cfg.n_layers):
        shapes[f"key_{i}"] = shapes[f"value_{i}"] = ["batch", heads, slots, head_dim]
        if cfg.conv_kernel:
            shapes[f"conv_{i}"] = ["batch", cfg.conv_kernel - 1, cfg.d_model]
    return {
        "format": FORMAT, "opset": OPSET, "config": asdict(cfg),
        "cmvn": {"mean": encoder.cmvn.mean.tolist(), "std": encoder.cmvn.std.tolist()},
        "subsampling": {"kernel": sub.kernel, "stride": sub.stride, "left_context": sub.left_context},
        "state": {"names": state_names(encoder), "shapes": shapes, "cache_slots": slots},
        "files": {"fp32": FP32_FILE, "int8": INT8_FILE if int8 else None, "tokenizer": "tokenizer.bin"},
        "info": info,
    }


def export_onnx(encoder: Encoder, tokenizer: Tokenizer, info: dict, out_dir: str | Path,
                int8: bool = False) -> list[Path]:
    """Write the whole folder (see the module doc); returns the files written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    encoder = encoder.eval()
    export_graph(encoder, out / FP32_FILE)
    written = [out / FP32_FILE]
    if int8:
        quantize_int8(out / FP32_FILE, out / INT8_FILE)
        written.append(out / INT8_FILE)
    elif (out / INT8_FILE).exists():
        (out / INT8_FILE).unlink()  # a stale copy from an earlier export must not pass for this model's
    meta = model_json(encoder, info, int8)
    (out / "model.json").write_text(json.dumps(meta, indent=1) + "\n")
    (out / "tokenizer.bin").write_bytes(tokenizer.to_bytes())
    (out / "README.md").write_text(contract_readme(meta))
    return written + [out / "model.json", out / "tokenizer.bin", out / "README.md"]


NORM_TEXT = {
    "global": "`global`: `(feats - mean) / std`",
    "running": "`running`: `(feats - m_t) / std`, where m_t is the stream's running mean after frame t: it starts at "
               "`mean`, and m_t = m_(t-1) + (x_t - m_(t-1)) / min(t + 1 + {norm_prior}, {norm_horizon}) for the "
               "stream's t-th frame x_t (t from 0; `asr.model.normalise`)",
}


def contract_readme(meta: dict) -> str:
    """The tensor contract of an exported folder, as markdown."""
    cfg, sub, state = meta["config"], meta["subsampling"], meta["state"]
    rows = "\n".join(f"| `{name}` | `new_{name}` | ({', '.join(map(str, state['shapes'][name]))}) | "
                     f"{'int64' if name == 'invalid' else 'float32'} |" for name in state["names"][1:])
    return f"""# ONNX export of an `asr` acoustic model ({meta['format']}, opset {meta['opset']})

`{meta['files']['fp32']}` is one streaming step of the encoder for a batch of independent streams whose
chunks may differ in length (`asr.model.encoder.Encoder.step_padded`). Run it once per chunk of audio,
feeding back every `new_*` output as the next call's input. `asr.model.onnx_backend.OnnxModel` does
exactly this with onnxruntime and numpy only.
{'`' + meta['files']['int8'] + '` is the same graph with int8 weights (dynamic quantisation).' if meta['files']['int8'] else ''}

## Inputs and outputs

| input | output | shape | type |
|---|---|---|---|
| `frames` | - | (batch, time, {cfg['n_mels']}) | float32 |
| `ends` | - | (batch) | int64 |
| - | `logprobs` | (batch, out_time, {cfg['vocab_size']}) | float32 |
{rows}

- `frames`: per row, the stream's leftover frames (below), then its chunk's log-mel frames (25 ms
  window, 10 ms hop, {cfg['n_mels']} bins) normalised with `model.json`'s `cmvn` as `config.norm` says
  ({NORM_TEXT[cfg.get('norm', 'global')].format(**cfg)}); rows padded with zeros at the end to the longest.
- `ends`: per row, the encoder frames its real frames complete: (n - {sub['kernel']}) // {sub['stride']} + 1
  for n real frames (0 when n < {sub['kernel']}).
- `logprobs`: CTC log-probabilities (blank = 0); row b's first `ends[b]` frames are real, the rest
  come from padding. The row's leftover frames for its next call are its real frames from
  `ends[b] * {sub['stride']}` on (fewer than {sub['kernel']}); a new stream starts with
  {sub['left_context']} zero frames (the causal left padding).
- `invalid`: per row, how many leading cache slots hold no frame yet. A new stream starts with
  {state['cache_slots']} (all empty); each step subtracts `ends`, clamped at 0.
- `key_i` / `value_i`: layer i's attention keys and values of the row's last {state['cache_slots']} real frames
  (batch, heads, slots, head_dim); start as zeros.
- `conv_i`: layer i's causal depthwise-conv inputs of its last kernel - 1 real frames (batch, kernel - 1,
  d_model); start as zeros.

Padding never reaches a real frame (the subsampling, attention and convolution are causal) and each
row's caches are cut at its own last real frame, so a row's results do not depend on the others.
When no row completes an encoder frame, do not call the graph: keep the frames as leftover.
`model.json` also holds the architecture (`config`), the model's `info` and the file names;
`tokenizer.bin` is the tokenizer (`asr.text.tokenizer.Tokenizer.from_bytes`: a JSON header line, then
the SentencePiece model for BPE, nothing for characters, the gzipped lexicon text for phones).
"""
