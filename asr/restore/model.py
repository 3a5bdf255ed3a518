"""The restorer network (torch): word embeddings, a bidirectional GRU, and two heads per word.

    ids (B, T) int64 -> case logits (B, T, 3), mark logits (B, T, 5)

Id 0 pads, id 1 is any word outside the vocabulary; the vocabulary (a list of normalised words, index =
id) is stored with the weights. One safetensors file holds weights, config and vocabulary (no pickles);
`export_onnx` writes the same network as one ONNX graph with config and vocabulary in its metadata, for
the torch-free runtime (`asr.restore.restorer`).
"""
from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file
from torch import Tensor, nn

from asr.restore.labels import CASES, MARKS
from asr.restore.restorer import FORMAT, UNKNOWN, RestorerError

PAD = 0
OPSET = 17

@dataclass
class RestorerConfig:
    vocab_size: int = 8000  # embedded words: pad, unknown, then the most frequent training words
    dim: int = 64  # word embedding size
    hidden: int = 96  # GRU units per direction
    layers: int = 2
    dropout: float = 0.1


class RestorerNet(nn.Module):
    def __init__(self, cfg: RestorerConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=PAD)
        self.rnn = nn.GRU(cfg.dim, cfg.hidden, cfg.layers, batch_first=True, bidirectional=True,
                          dropout=cfg.dropout if cfg.layers > 1 else 0.0)
        self.drop = nn.Dropout(cfg.dropout)
        self.case = nn.Linear(2 * cfg.hidden, len(CASES))
        self.mark = nn.Linear(2 * cfg.hidden, len(MARKS))

    def forward(self, ids: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """ids (B, T) -> (case logits (B, T, 3), mark logits (B, T, 5)). With `lengths` (B,) the padding
        after each row's words is skipped (packed), so the backward direction starts at the last word."""
        x = self.drop(self.embed(ids))
        if lengths is None:
            h, _ = self.rnn(x)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            h, _ = nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=ids.shape[1])
        h = self.drop(h)
        return self.case(h), self.mark(h)


def save_restorer(path: str | Path, net: RestorerNet, vocab: list[str], info: dict | None = None) -> None:
    """Weights, config and vocabulary in one safetensors file."""
    metadata = {"format": FORMAT, "config": json.dumps(asdict(net.cfg)), "vocab": json.dumps(vocab),
                "info": json.dumps(info or {})}
    save_file({k: v.detach().contiguous().cpu() for k, v in net.state_dict().items()}, str(path), metadata=metadata)


def load_restorer_file(path: str | Path) -> tuple[RestorerNet, list[str], dict]:
    """(network in eval mode, vocabulary, info) from a safetensors file; RestorerError if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise RestorerError(f"{path}: no such restorer file")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        if meta.get("format") != FORMAT:
            raise RestorerError(f"{path}: not an asr restorer (format {meta.get('format')!r}, expected {FORMAT!r})")
        net = RestorerNet(RestorerConfig(**json.loads(meta["config"])))
        net.load_state_dict(load_file(str(path)))
        vocab = json.loads(meta["vocab"])
    except RestorerError:
        raise
    except (SafetensorError, OSError, ValueError, KeyError, RuntimeError, TypeError) as err:
        raise RestorerError(f"{path}: not a valid asr restorer file ({str(err).splitlines()[0][:200]})") from None
    return net.eval(), vocab, json.loads(meta.get("info", "{}"))


def export_onnx(net: RestorerNet, vocab: list[str], path: str | Path, info: dict | None = None) -> Path:
    """The network as one ONNX graph: input "ids" (batch, words) int64, outputs "cases" (batch, words, 3)
    and "marks" (batch, words, 5); config, vocabulary and info in the model's metadata. Deterministic."""
    import onnx

    path = Path(path)
    net = net.eval()
    example = torch.tensor([[2, 3, 4, UNKNOWN]], dtype=torch.int64)
    dynamic = {"ids": {0: "batch", 1: "words"}, "cases": {0: "batch", 1: "words"}, "marks": {0: "batch", 1: "words"}}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the GRU's batch-size warning: the graph is dynamic in batch and words
        torch.onnx.export(net, (example,), str(path), input_names=["ids"], output_names=["cases", "marks"],
                          dynamic_axes=dynamic, opset_version=OPSET, dynamo=False, do_constant_folding=True)
    model = onnx.load(str(path))
    for key, value in {"format": FORMAT, "config": json.dumps(asdict(net.cfg)), "vocab": json.dumps(vocab),
                       "info": json.dumps(info or {})}.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))
    return path
