"""Every tool's inputs, checked before any model or word LM loads: the files and folders its options name exist
and can be read, and its options go together. A mistake is then one line a fraction of a second after the start,
not after the seconds and hundreds of MB that loading takes (`asr.transcribe missing.wav` loaded the model and the
206k-word LM, 6.2 s and 603 MB, before it said the file was missing).

`options(args)` checks the options the tools share, by name, wherever a tool has them (--model, --onnx-dir, --lm,
--hotwords, --restorer, --restorer-text, --report, and which of them go together); each tool checks its own
inputs with `audio_file`, `readable`, `folder_or_file` (asr.transcribe's files, asr.stream's --file, asr.finetune's
data). Manifests are checked by the one parser, `asr.corpus.manifest.read_manifest`, which every tool calls before
it loads. Every check raises InputError (a ValueError, one line): the tools print it as `asr.TOOL: error: ...` and
exit with status 1. Only paths are looked at here: nothing of the model, the decoder or the LM is imported.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from asr.model.device import check_spelling, for_onnx
from asr.model.folder import folder_lm

STDIN = "-"


class InputError(ValueError):
    """An input or option that cannot work, said in one line."""


def readable(path: str | Path, what: str = "file") -> Path:
    """`path`, a file that can be read; else InputError: `PATH: no such WHAT`, `is a directory`, `cannot be read`."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such {what}")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a {what}")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: cannot be read (permission denied)")
    return path


def audio_file(path: str | Path) -> None:
    """An audio file that can be read (its content is judged when it is read), or `-` (standard input); the
    reasons are those of `asr.audio.files.read_blocks`, which says the same of a file that went since."""
    if str(path) == STDIN:
        return
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory")
    readable(path)
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty")


def folder_or_file(path: str | Path) -> None:
    """A folder, or a file that can be read (asr.finetune's data and --test: a folder, a table or a manifest)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such folder or file")
    if not path.is_dir():
        readable(path)


def folder_to_write(path: str | Path, option: str) -> None:
    """A folder that is there or can be made: no file stands in its place or above it."""
    path = Path(path)
    above = next((p for p in (path, *path.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        raise InputError(f"{option} {path}: {'it' if above == path else above} is a file, not a folder")


def _writable_in(path: Path, option: str) -> None:
    """A file `path` can be written: its folder is there (InputError naming `option` otherwise)."""
    above = path.parent
    if path.is_dir():
        raise InputError(f"{option} {path}: is a folder, not a file")
    if not above.is_dir():
        raise InputError(f"{option} {path}: no folder {above} to write it in")
    if not os.access(above, os.W_OK):
        raise InputError(f"{option} {path}: cannot write in {above} (permission denied)")


def model(args: argparse.Namespace) -> None:
    """--model, --onnx-dir, --backend, --int8 and --device: what they name exists, and they go together (whether
    a GPU is there is torch's to say, when the model loads)."""
    name, onnx_dir = getattr(args, "model", None), getattr(args, "onnx_dir", None)
    int8, backend = getattr(args, "int8", False), getattr(args, "backend", None)
    device = check_spelling(getattr(args, "device", None))
    if device is not None and (int8 or onnx_dir or backend == "onnx"):
        for_onnx(device)
    if int8 and backend == "torch":
        raise InputError("--int8 is a graph of the ONNX export: it needs --backend onnx, not torch")
    if name is not None and not Path(name).exists():
        raise InputError(f"{name}: no such model file")
    if onnx_dir is not None and not Path(onnx_dir).exists():  # a folder, or a graph in one
        raise InputError(f"{onnx_dir}: no such ONNX model folder (make one with python -m asr.export --onnx DIR)")
    if int8 and name and not onnx_dir and (Path(name).is_file() or Path(name).suffix == ".safetensors"):
        raise InputError(f"--int8 takes its graph from an ONNX export folder, and {name} is a file: "
                         "name the folder with --onnx-dir or --model")


def decoding(args: argparse.Namespace) -> None:
    """--greedy, --beam, --lm, --hotwords, --restorer and --rescore-lm: the files exist, and the options go together (the
    hotwords need the word-LM search, which `asr.api.word_lm` decides as the decoder will)."""
    greedy, beam, lm = getattr(args, "greedy", False), getattr(args, "beam", False), getattr(args, "lm", None)
    if greedy and (beam or lm):
        raise InputError("--greedy cannot be combined with --beam or --lm")
    if lm is not None:
        readable(lm, "language model file")
    if hotwords := getattr(args, "hotwords", None):
        readable(hotwords, "hotword file")
        if greedy or not (beam or lm or folder_lm(getattr(args, "model", None)) or _bundled(args)):
            raise InputError("--hotwords needs the beam search with a word LM (not --greedy; with --model, add "
                             "--beam or --lm)")
    if restorer := getattr(args, "restorer", None):
        readable(restorer, "restorer file")
    if rescore_lm := getattr(args, "rescore_lm", None):
        if getattr(args, "no_rescore", False):
            raise InputError("--rescore-lm cannot be combined with --no-rescore")
        readable(rescore_lm, "language model file")
        from asr.decoding.neural_lm import NeuralLM, NeuralLMError, is_neural_lm  # noqa: PLC0415 (numpy only)
        if is_neural_lm(rescore_lm):
            try:
                NeuralLM.check(rescore_lm)
            except NeuralLMError as err:
                raise InputError(str(err)) from None


def _bundled(args: argparse.Namespace) -> bool:
    """Whether the options name the bundled model (or its shipped export), which searches with the word LM."""
    if getattr(args, "model", None) is not None:
        return False
    onnx_dir = getattr(args, "onnx_dir", None)
    if onnx_dir is None:
        return True
    from asr.api import is_bundled  # noqa: PLC0415 (asr.api loads the decoding modules: only here)
    return is_bundled(onnx_dir)


def options(args: argparse.Namespace) -> None:
    """Every shared option the tool has: the model's, the decoding's, --restorer-text and --report."""
    model(args)
    decoding(args)
    if text := getattr(args, "restorer_text", None):
        readable(text, "file of sentences")
    if report := getattr(args, "report", None):
        _writable_in(Path(report), "--report")

