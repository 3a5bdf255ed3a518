"""The default model shipped in the package, its word LM and model card (files beside this one), and the cache
where asr keeps what it derives from such files on first use."""
from __future__ import annotations

import hashlib
import json
import os
import struct
from importlib import resources
from pathlib import Path

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def bundled(name: str) -> Path | None:
    """The shipped file or folder `name`, or None where this installation has none."""
    path = Path(str(resources.files("asr.pretrained") / name))
    return path if path.exists() else None


def default_model_path() -> Path | None:
    """The default model (safetensors: weights, config, tokenizer, CMVN statistics)."""
    return bundled("default.safetensors")


def default_lm_path() -> Path | None:
    """The word LM bundled with the default model (gzip-compressed ARPA: recipes/lm/build.py)."""
    return bundled("default.arpa.gz")


def default_rescore_lm_path() -> Path | None:
    """The second pass's neural word LM (recipes/lm/neural.py), which re-ranks the n-best of each final searched
    with the bundled LM."""
    return bundled("default.rescore.safetensors")


def file_or_bundled(path: str | Path | None, name: str, error: type[Exception], what: str) -> Path:
    """`path`, or where it is None the bundled file `name`; `error` with a one-line reason where the file is not
    there (`what` names the kind of file: "G2P", "restorer")."""
    if path is None:
        path = bundled(name)
        if path is None:
            raise error(f"no {name} is bundled in this installation")
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such {what} file")
    return path


def cache_dir() -> Path:
    """Where asr keeps what it derives from files on first use (a KenLM binary, a lexicon's arrays, an optimised
    ONNX graph): $ASR_CACHE_DIR, else $XDG_CACHE_HOME/asr, else ~/.cache/asr."""
    if os.environ.get("ASR_CACHE_DIR"):
        return Path(os.environ["ASR_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "asr"


def path_key(path: Path, size: int = 12) -> str:
    """A short stable name for the file at `path` (a digest of its resolved path), for what the cache derives from it."""
    return hashlib.blake2b(str(Path(path).resolve()).encode(), digest_size=size).hexdigest()


def read_safetensors(path: Path, error: type[Exception] = ValueError) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tensors, metadata) of a safetensors file, read with numpy alone (the `safetensors` package is a training
    dependency): float16 tensors as float32; `error` with a one-line reason where it is not one."""
    data = path.read_bytes()
    header, size = _header(data, path, error)
    meta = header.pop("__metadata__", {}) or {}
    body, tensors = memoryview(data)[8 + size:], {}
    for name, spec in header.items():
        dtype = _DTYPES.get(spec.get("dtype"))
        if dtype is None:
            raise error(f"{path}: tensor {name} has unsupported dtype {spec.get('dtype')}")
        start, end = spec["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=dtype).reshape(spec["shape"])
        tensors[name] = array.astype(np.float32) if array.dtype == np.float16 else array.copy()
    return tensors, meta


def safetensors_metadata(path: Path, error: type[Exception] = ValueError) -> dict[str, str]:
    """The metadata of a safetensors file, its header alone read (a check before anything loads)."""
    with open(path, "rb") as f:
        start = f.read(8)
        size = struct.unpack("<Q", start)[0] if len(start) == 8 else 0
        header, _ = _header(start + f.read(min(size, 1 << 26)), path, error)
    return header.get("__metadata__", {}) or {}


def _header(data: bytes, path: Path, error: type[Exception]) -> tuple[dict, int]:
    try:
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + size])
    except (struct.error, ValueError, UnicodeDecodeError):
        raise error(f"{path}: not a safetensors file") from None
    if not isinstance(header, dict):
        raise error(f"{path}: not a safetensors file")
    return header, size
