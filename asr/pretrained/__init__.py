"""The default model shipped in the package, its word LM and model card (files beside this one), and the cache
where asr keeps what it derives from such files on first use."""
from __future__ import annotations

import hashlib
import json
import math
import mmap
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


def read_safetensors(path: Path, error: type[Exception] = ValueError,
                     mapped: bool = False) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tensors, metadata) of a safetensors file, read with numpy alone (the `safetensors` package is a training
    dependency; the header is JSON and the tensors raw numbers, so nothing is ever unpickled); `error` with a
    one-line reason where it is not one. Read: float16 tensors as float32, each tensor a copy. `mapped`: each
    tensor a read-only view, in its stored dtype, of one memory map of the file, so that processes that load the
    same file share its pages and a tensor costs memory only where it is read (a file is then replaced by writing a
    new one and renaming it over, as the exports do, never rewritten in place under a process that maps it)."""
    if mapped:
        header, size = _file_header(path, error)
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # kept open by the arrays that view it
    else:
        data = path.read_bytes()
        header, size = _header(data, path, error)
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, spec in header.items():
        dtype = _DTYPES.get(spec.get("dtype"))
        if dtype is None:
            raise error(f"{path}: tensor {name} has unsupported dtype {spec.get('dtype')}")
        shape, (start, end) = spec["shape"], spec["data_offsets"]
        count = math.prod(shape)
        if not 0 <= start <= end <= len(data) - 8 - size or end - start != count * np.dtype(dtype).itemsize:
            raise error(f"{path}: tensor {name}'s data does not match its shape {shape} (a damaged file?)")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=8 + size + start).reshape(shape)
        tensors[name] = array if mapped else array.astype(np.float32) if array.dtype == np.float16 else array.copy()
    return tensors, meta


def safetensors_metadata(path: Path, error: type[Exception] = ValueError) -> dict[str, str]:
    """The metadata of a safetensors file, its header alone read (a check before anything loads)."""
    return _file_header(path, error)[0].get("__metadata__", {}) or {}


def _file_header(path: Path, error: type[Exception]) -> tuple[dict, int]:
    """(header, its size in bytes) of a safetensors file, the header alone read."""
    with open(path, "rb") as f:
        start = f.read(8)
        size = struct.unpack("<Q", start)[0] if len(start) == 8 else 0
        return _header(start + f.read(min(size, 1 << 26)), path, error)


def _header(data: bytes, path: Path, error: type[Exception]) -> tuple[dict, int]:
    try:
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + size])
    except (struct.error, ValueError, UnicodeDecodeError):
        raise error(f"{path}: not a safetensors file") from None
    if not isinstance(header, dict):
        raise error(f"{path}: not a safetensors file")
    return header, size
