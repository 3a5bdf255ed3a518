"""What can stop a model from loading, said in one line: ModelError, the error for a missing [train] extra, and
the check for an installed module (which imports nothing).

Every loader (`asr.model.loader`, `asr.model.onnx_backend`, the restorer) raises these, and the backend chooser
(`asr.model.backend`) imports those loaders, so the errors live below all of them.
"""
from __future__ import annotations

import importlib.util


class ModelError(Exception):
    """A model file or folder that cannot be used; the message names it and the reason."""


def needs_train_extra(what: str, err: ModuleNotFoundError, instead: str = "") -> ModelError:
    """The one-line error for `what`, which needs the `[train]` extra (PyTorch, safetensors, onnx), when importing
    it found `err`'s module missing; `instead`: what to do without it."""
    return ModelError(f"{what} needs the training stack (PyTorch), and the module {err.name!r} is not installed "
                      f"here: pip install 'asr[train]'{instead}")


def installed(module: str) -> bool:
    """Whether `module` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # deliberately made unimportable (sys.modules[module] = None)
        return False
