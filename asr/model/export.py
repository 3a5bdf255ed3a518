"""Export an `Encoder`'s streaming step to ONNX, with everything a torch-free runtime needs beside it.

The exported folder (read by `asr.model.onnx_backend`):

    encoder.onnx        Encoder.step as a graph: one chunk of log-mel frames and every cache in,
                        log-probs and the next caches out (the streaming state stays explicit)
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
from asr.tokenizer import Tokenizer

FORMAT = "asr-onnx-v1"
OPSET = 17
FP32_FILE, INT8_FILE = "encoder.onnx", "encoder.int8.onnx"


def state_names(encoder: Encoder) -> list[str]:
    """Graph input names of the state, in order: frames, invalid, key_i, value_i, conv_i (if any)."""
    layers = range(encoder.cfg.n_layers)
    convs = [f"conv_{i}" for i in layers] if encoder.cfg.conv_kernel else []
    return ["frames", "invalid"] + [f"key_{i}" for i in layers] + [f"value_{i}" for i in layers] + convs


class StreamingStep(nn.Module):
    """`Encoder.step` over flat tensors, as the exporter needs it:
    (feats (B,T,F), frames (B,P,F), invalid (B,) int64, keys..., values..., convs...)
    -> (logprobs (B,T',V), frames, invalid, keys..., values..., convs...). Valid when P + T >= the
    subsampling kernel (T' >= 1); the runtime handles shorter input without the graph."""

    def __init__(self, encoder: Encoder):
        super().__init__()
        self.encoder = encoder.eval()
        self.layers, self.has_conv = encoder.cfg.n_layers, bool(encoder.cfg.conv_kernel)

    def forward(self, feats: Tensor, frames: Tensor, invalid: Tensor, *caches: Tensor) -> tuple[Tensor, ...]:
        n = self.layers
        state = EncoderState(frames=frames, invalid=invalid, keys=list(caches[:n]), values=list(caches[n:2 * n]),
                             convs=list(caches[2 * n:]) if self.has_conv else [])
        logprobs, new = self.encoder.step(feats, state)
        return (logprobs, new.frames, new.invalid, *new.keys, *new.values, *new.convs)


def _example_state(encoder: Encoder, batch: int = 1) -> list[Tensor]:
    state = encoder.initial_state(batch)
    return [state.frames, state.invalid, *state.keys, *state.values, *state.convs]


def export_graph(encoder: Encoder, path: str | Path) -> None:
    """Write `encoder`'s streaming step to `path` (ONNX, opset OPSET, weights inside the file)."""
    if encoder.cfg.window is None:
        raise ValueError("ONNX export needs a sliding attention window (window=None caches grow without bound)")
    names = state_names(encoder)
    feats = torch.randn(1, 2 * encoder.subsampling.kernel + 5, encoder.cfg.n_mels,
                        generator=torch.Generator().manual_seed(0))
    inputs, outputs = ["feats"] + names, ["logprobs"] + [f"new_{n}" for n in names]
    dynamic = {name: {0: "batch"} for name in inputs + outputs}
    dynamic["feats"][1], dynamic["logprobs"][1] = "time", "out_time"
    dynamic["frames"][1], dynamic["new_frames"][1] = "left", "new_left"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings for the branches the runtime takes care of
        torch.onnx.export(StreamingStep(encoder), (feats, *_example_state(encoder)), str(path),
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
            shapes[f"conv_{i}"] = ["batch", cfg.d_model, cfg.conv_kernel - 1]
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


def contract_readme(meta: dict) -> str:
    """The tensor contract of an exported folder, as markdown."""
    cfg, sub, state = meta["config"], meta["subsampling"], meta["state"]
    rows = "\n".join(f"| `{name}` | `new_{name}` | ({', '.join(map(str, state['shapes'][name]))}) | "
                     f"{'int64' if name == 'invalid' else 'float32'} |" for name in state["names"])
    return f"""# ONNX export of an `asr` acoustic model ({meta['format']}, opset {meta['opset']})

`{meta['files']['fp32']}` is one streaming step of the encoder (`asr.model.encoder.Encoder.step`).
Run it once per chunk of audio, feeding back every `new_*` output as the next call's input.
`asr.model.onnx_backend.OnnxModel` does exactly this with onnxruntime and numpy only.
{'`' + meta['files']['int8'] + '` is the same graph with int8 weights (dynamic quantisation).' if meta['files']['int8'] else ''}

## Inputs and outputs

| input | output | shape | type |
|---|---|---|---|
| `feats` | - | (batch, time, {cfg['n_mels']}) | float32 |
| - | `logprobs` | (batch, out_time, {cfg['vocab_size']}) | float32 |
{rows}

- `feats`: raw log-mel frames (25 ms window, 10 ms hop, {cfg['n_mels']} bins) of one chunk. The graph
  applies the global CMVN itself (`model.json` `cmvn`: `(feats - mean) / std`).
- `logprobs`: CTC log-probabilities (blank = 0) of the encoder frames this chunk completes, one per
  {sub['stride']} feature frames: out_time = (left + time - {sub['kernel']}) // {sub['stride']} + 1.
- `frames`: CMVN-normalised feature frames not yet consumed by the subsampling (left < {sub['kernel']}).
  A new stream starts with {sub['left_context']} zero frames (the causal left padding).
- `invalid`: per row, how many leading cache slots hold no frame yet. A new stream starts with
  {state['cache_slots']} (all empty); each step subtracts out_time, clamped at 0.
- `key_i` / `value_i`: layer i's attention keys and values of its last {state['cache_slots']} frames
  (batch, heads, slots, head_dim); start as zeros.
- `conv_i`: layer i's causal depthwise-conv inputs (batch, d_model, kernel - 1); start as zeros.

The graph needs left + time >= {sub['kernel']} (at least one output frame). For a shorter chunk do
not call it: normalise the chunk with the CMVN statistics, append it to `frames`, and return no
log-probs (every other tensor unchanged). Rows of a batch are independent streams.
`model.json` also holds the architecture (`config`), the model's `info` and the file names;
`tokenizer.bin` is the tokenizer (`asr.tokenizer.Tokenizer.from_bytes`: a JSON header line, then
the SentencePiece model for BPE, nothing for characters).
"""
