"""The default model shipped in the package, its word LM and model card (files beside this one), and the cache
where asr keeps what it derives from such files on first use."""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path


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
    """The second pass's larger word LM (KenLM's binary of a 4-gram: recipes/lm/rescore.py), which re-ranks the
    n-best of each final searched with the bundled LM."""
    return bundled("default.rescore.klm")


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
