"""The restorer network (torch): word embeddings, a bidirectional GRU, and two heads per word.

    ids (B, T) int64 [, pauses (B, T) int64] -> case logits (B, T, 3), mark logits (B, T, 5)

Id 0 pads, id 1 is any word outside the vocabulary; the vocabulary (a list of normalised words, index =
id) is stored with the weights. With `pause_buckets` > 0 each word also gets an embedding of the pause
before it (`asr.text.restore.labels.pause_ids`: unknown, first word, or a bin of seconds), concatenated to its
word embedding; a network without (`pause_buckets` 0, the files of format v1) takes ids only. One safetensors file holds weights, config and vocabulary (no pickles);
`export_onnx` writes the same network as one ONNX graph with config and vocabulary in its metadata, for
the torch-free runtime (`asr.text.restore.restorer`).
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

from asr.text.restore.format import FORMAT, FORMAT_PAUSES, FORMATS, UNKNOWN, RestorerError
from asr.text.restore.labels import CASES, MARKS, NO_PAUSE

PAD = 0
OPSET = 17

@dataclass
class RestorerConfig:
    vocab_size: int = 8000  # embedded words: pad, unknown, then the most frequent training words
    dim: int = 64  # word embedding size
    hidden: int = 96  # GRU units per direction
    layers: int = 2
    dropout: float = 0.1
    pause_buckets: int = 0  # pause ids embedded (asr.text.restore.labels.PAUSE_BUCKETS); 0: no pause input
    pause_dim: int = 8  # pause embedding size


class RestorerNet(nn.Module):
    def __init__(self, cfg: RestorerConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=PAD)
        self.pause = nn.Embedding(cfg.pause_buckets, cfg.pause_dim) if cfg.pause_buckets else None
        width = cfg.dim + (cfg.pause_dim if cfg.pause_buckets else 0)
        self.rnn = nn.GRU(width, cfg.hidden, cfg.layers, batch_first=True, bidirectional=True,
                          dropout=cfg.dropout if cfg.layers > 1 else 0.0)
        self.drop = nn.Dropout(cfg.dropout)
        self.case = nn.Linear(2 * cfg.hidden, len(CASES))
        self.mark = nn.Linear(2 * cfg.hidden, len(MARKS))

    def forward(self, ids: Tensor, pauses: Tensor | None = None, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """ids (B, T), pause ids (B, T) (None: unknown; ignored without pause input) -> (case logits
        (B, T, 3), mark logits (B, T, 5)). With `lengths` (B,) the padding after each row's words is
        skipped (packed), so the backward direction starts at the last word."""
        x = self.embed(ids)
        if self.pause is not None:
            pauses = torch.full_like(ids, NO_PAUSE) if pauses is None else pauses
            x = torch.cat([x, self.pause(pauses)], dim=-1)
        x = self.drop(x)
        if lengths is None:
            h, _ = self.rnn(x)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            h, _ = nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=ids.shape[1])
        h = self.drop(h)
        return self.case(h), self.mark(h)


def file_format(cfg: RestorerConfig) -> str:
    """v2 for a network with pause input, v1 (which older runtimes read) without."""
    return FORMAT_PAUSES if cfg.pause_buckets else FORMAT


def save_restorer(path: str | Path, net: RestorerNet, vocab: list[str], info: dict | None = None) -> None:
    """Weights, config and vocabulary in one safetensors file."""
    metadata = {"format": file_format(net.cfg), "config": json.dumps(asdict(net.cfg)), "vocab": json.dumps(vocab),
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
        if meta.get("format") not in FORMATS:
            raise RestorerError(f"{path}: not an asr restorer (format {meta.get('format')!r}, expected one of "
                                f"{', '.join(map(repr, FORMATS))})")
        net = RestorerNet(RestorerConfig(**json.loads(meta["config"])))
        net.load_state_dict(load_file(str(path)))
        vocab = json.loads(meta["vocab"])
    except RestorerError:
        raise
    except (SafetensorError, OSError, ValueError, KeyError, RuntimeError, TypeError) as err:
        raise RestorerError(f"{path}: not a valid asr restorer file ({str(err).splitlines()[0][:200]})") from None
    return net.eval(), vocab, json.loads(meta.get("info", "{}"))


def export_onnx(net: RestorerNet, vocab: list[str], path: str | Path, info: dict | None = None) -> Path:
    """The network as one ONNX graph: inputs "ids" (batch, words) int64 (and "pauses", the same shape, for a
    network with pause input), outputs "cases" (batch, words, 3) and "marks" (batch, words, 5); config,
    vocabulary and info in the model's metadata. Deterministic."""
    import onnx

    path = Path(path)
    net = net.eval()
    example = (torch.tensor([[2, 3, 4, UNKNOWN]], dtype=torch.int64),)
    names = ["ids"]
    if net.cfg.pause_buckets:
        example, names = example + (torch.tensor([[1, 2, 5, 3]], dtype=torch.int64),), names + ["pauses"]
    dynamic = {name: {0: "batch", 1: "words"} for name in names + ["cases", "marks"]}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the GRU's batch-size warning: the graph is dynamic in batch and words
        torch.onnx.export(net, example, str(path), input_names=names, output_names=["cases", "marks"],
                          dynamic_axes=dynamic, opset_version=OPSET, dynamo=False, do_constant_folding=True)
    model = onnx.load(str(path))
    for key, value in {"format": file_format(net.cfg), "config": json.dumps(asdict(net.cfg)), "vocab": json.dumps(vocab),
                       "info": json.dumps(info or {})}.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))
    return path
