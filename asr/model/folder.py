"""A model folder: one directory that every tool takes as `--model DIR` (and `asr.load(DIR)`).

    DIR/model.safetensors   the weights, config, tokenizer and CMVN (`asr.model.loader`; the torch backend)
    DIR/onnx/               its ONNX export (`python -m asr.export`; the onnx backend, the default where
                            onnxruntime is installed)
    DIR/lm.arpa.gz          its word LM (gzip-compressed ARPA; a folder of before 2026-12-03 has lm.arpa): the
                            beam search's default for this model, as the bundled LM is for the bundled model
    DIR/lm.klm              its KenLM binary form, where build_binary made one (`asr.decoding.lm_binary`): what the
                            search loads, at once, while it matches lm.arpa.gz (lm.klm.json holds the ARPA's stamp)
    DIR/rescore.safetensors its second pass's word LM (`asr.decoding.rescore`), ranking each final's n-best again
                            after a search with DIR's own LM; `asr.finetune` copies the starting model's there
    DIR/MODEL_CARD.md       what it was trained on and how it scored (`python -m asr.finetune` writes all of these)

Only the weights or the export need be there: a training run folder (`run_dir`, which holds
model.safetensors) is a model folder too. An ONNX export folder itself (model.json at its top) is not
one: it stays what `--backend onnx --model DIR` has always read. This module only looks at paths
(no numpy, no torch), so every loader can ask it first.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

WEIGHTS, ONNX, LM, CARD = "model.safetensors", "onnx", "lm.arpa.gz", "MODEL_CARD.md"
RESCORE = "rescore.safetensors"
OLD_LM = "lm.arpa"  # a folder's LM before it was compressed (a 200k-word LM is 120 MB as plain text)


@dataclass(frozen=True)
class ModelFolder:
    root: Path

    @property
    def weights(self) -> Path | None:
        path = self.root / WEIGHTS
        return path if path.is_file() else None

    @property
    def onnx(self) -> Path | None:
        path = self.root / ONNX
        return path if (path / "model.json").is_file() else None

    @property
    def lm(self) -> Path | None:
        return next((self.root / name for name in (LM, OLD_LM) if (self.root / name).is_file()), None)

    @property
    def rescore_lm(self) -> Path | None:
        """The second pass's LM, which goes with `lm` (without `lm`, none)."""
        path = self.root / RESCORE
        return path if self.lm and path.is_file() else None


def model_folder(path: str | Path | None) -> ModelFolder | None:
    """The model folder at `path`, or None where `path` is not one (None, a file, an ONNX export folder,
    a folder with neither weights nor an export)."""
    if path is None or not Path(path).is_dir() or (Path(path) / "model.json").is_file():
        return None
    folder = ModelFolder(Path(path))
    return folder if folder.weights or folder.onnx else None


def folder_lm(path: str | Path | None) -> Path | None:
    """The word LM of the model folder at `path`, if it is one and has one."""
    folder = model_folder(path)
    return folder.lm if folder else None


def folder_rescore_lm(path: str | Path | None) -> Path | None:
    """The second-pass LM of the model folder at `path`, if it is one and has one beside its own word LM."""
    folder = model_folder(path)
    return folder.rescore_lm if folder else None


def resolve(path: str | Path | None, backend: str) -> str | Path | None:
    """What `backend` loads for `path`: a model folder's weights (torch) or export (onnx), else `path` as it is.
    A folder without what that backend needs is returned as it is, for the backend's own error."""
    folder = model_folder(path)
    if folder is None:
        return path
    found = folder.weights if backend == "torch" else folder.onnx
    return found or path


def folder_backend(folder: ModelFolder, onnx_installed: bool) -> str:
    """A model folder's backend when none is named: onnx where it has an export and onnxruntime is installed,
    else torch (where it has weights)."""
    if folder.onnx and (onnx_installed or folder.weights is None):
        return "onnx"
    return "torch"
