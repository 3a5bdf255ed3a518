"""The onnxruntime backend: an exported folder (`python -m asr.export --onnx DIR`) behind the numpy
interface of `asr.model.backend.AcousticModel`. Needs onnxruntime and numpy only; never imports torch.

The state is a dict of numpy arrays (see the folder's README.md): frames (B, P, F), the normalised
frames not yet consumed by the subsampling (kept here), and, named as the graph's inputs, invalid (B,)
int64, key_i / value_i (B, H, W-1, D/H), conv_i (B, D, K-1); for a model that normalises with a running
mean (`asr.model.normalise`) also norm_mean (B, F) and norm_count (B,), kept here too.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from asr.model.config import EncoderConfig, frames_out, ready_frames
from asr.model.errors import ModelError
from asr.model.normalise import running_norm
from asr.pretrained import bundled, cache_dir, path_key
from asr.text.tokenizer import Tokenizer

FORMAT = "asr-onnx-v2"
CACHED_GRAPHS = 8  # optimised graphs kept in the cache (`optimised`): the shipped encoder's is 27 MB
OnnxState = dict  # name -> np.ndarray, one entry per graph state input


class OnnxModelError(ModelError):
    """An exported folder that cannot be used; the message names the path and the reason."""


class OnnxModel:
    """One onnxruntime session over the streaming-step graph; arrays in and out are numpy."""

    def __init__(self, session, meta: dict):
        self.session, self.meta = session, meta
        self.cfg = EncoderConfig(**meta["config"])
        self.mean = np.asarray(meta["cmvn"]["mean"], dtype=np.float32)
        self.std = np.asarray(meta["cmvn"]["std"], dtype=np.float32)
        self.kernel = int(meta["subsampling"]["kernel"])
        self.left_context = int(meta["subsampling"]["left_context"])
        self.names: list[str] = list(meta["state"]["names"])
        self.slots = int(meta["state"]["cache_slots"])
        self.shapes = meta["state"]["shapes"]
        self.stride = int(meta["subsampling"]["stride"])
        self.outputs = ["logprobs"] + [f"new_{name}" for name in self.names[1:]]  # every state tensor but frames
        self.host = ["norm_mean", "norm_count"] if self.cfg.norm == "running" else []  # state the graph never sees
        self._new_stream: OnnxState | None = None

    def initial_state(self, batch: int = 1) -> OnnxState:
        """`batch` new streams: zero caches, every slot empty, the subsampling's left padding. A single stream's
        arrays are one read-only set shared by every new stream (steps replace arrays, never write into them)."""
        if batch == 1:
            if self._new_stream is None:
                self._new_stream = self._zeros(1)
                for array in self._new_stream.values():
                    array.flags.writeable = False
            return dict(self._new_stream)
        return self._zeros(batch)

    def _zeros(self, batch: int) -> OnnxState:
        state = {}
        if self.host:  # the running mean starts at the stored one
            state = {"norm_mean": np.tile(self.mean, (batch, 1)), "norm_count": np.zeros(batch, np.int64)}
        for name in self.names:
            if name == "invalid":
                state[name] = np.full((batch,), self.slots, dtype=np.int64)
            elif name == "frames":
                state[name] = np.zeros((batch, self.left_context, self.cfg.n_mels), dtype=np.float32)
            else:
                state[name] = np.zeros([batch] + self.shapes[name][1:], dtype=np.float32)
        return state

    def step(self, feats: np.ndarray, state: OnnxState, final: bool = False) -> tuple[np.ndarray, OnnxState]:
        """Log-mel (B, T, F) float32, any T >= 0 -> log-probs (B, T', V) float32 and the next state."""
        states = [state] if feats.shape[0] == 1 else self.split_states(state)
        rows = self.step_many(list(feats), states, final)
        return (np.stack([logprobs for logprobs, _ in rows]),
                rows[0][1] if len(rows) == 1 else self.stack_states([row for _, row in rows]))

    def step_many(self, feats: list[np.ndarray], states: list[OnnxState],
                  final: bool = False) -> list[tuple[np.ndarray, OnnxState]]:
        """Independent streams (log-mel (T_i, F) and a batch-1 state each) in one graph run: each row's
        leftover and new frames, normalised here and padded at the end to the longest; `final`: the
        streams end here (a lookahead model computes its last, partial chunk)."""
        normed = [self._normalise(np.asarray(f, np.float32), s) for f, s in zip(feats, states)]
        states = [s for _, s in normed]
        frames = [np.concatenate([s["frames"][0], n]) for n, s in normed]
        ends = np.array([ready_frames(frames_out(len(f), self.kernel, self.stride), self.cfg.chunk, final)
                         for f in frames], dtype=np.int64)
        if not ends.any():  # no row completes an encoder frame: nothing for the graph to do
            return [(np.zeros((0, self.cfg.vocab_size), np.float32), {**s, "frames": f[None]})
                    for f, s in zip(frames, states)]
        host = [{name: s[name] for name in self.host} for s in states]
        padded = np.zeros((len(frames), max(len(f) for f in frames), self.cfg.n_mels), np.float32)
        for row, f in zip(padded, frames):
            row[:len(f)] = f
        inputs = {"frames": padded, "ends": ends,
                  **{name: np.concatenate([s[name] for s in states]) for name in self.names[1:]}}
        logprobs, *new = self.session.run(self.outputs, inputs)
        return [(logprobs[i, :ends[i]], {"frames": frames[i][None, ends[i] * self.stride:], **host[i],
                                         **{name: out[i:i + 1] for name, out in zip(self.names[1:], new)}})
                for i in range(len(frames))]

    def _normalise(self, feats: np.ndarray, state: OnnxState) -> tuple[np.ndarray, OnnxState]:
        """One stream's raw log-mel (T, F) -> its normalised frames (cfg.norm) and the state with its running mean
        moved on."""
        if not self.host:
            return (feats - self.mean) / self.std, state
        count = int(state["norm_count"][0])
        centred, mean = running_norm(feats, state["norm_mean"][0], count, self.cfg.norm_prior, self.cfg.norm_horizon)
        return centred / self.std, {**state, "norm_mean": mean[None],
                                    "norm_count": np.array([count + len(feats)], np.int64)}

    def stack_states(self, states: list[OnnxState]) -> OnnxState:
        """Batch-1 states with equal shapes (as many leftover frames) -> one state with a row per stream."""
        return {name: np.concatenate([s[name] for s in states], axis=0) for name in self.names + self.host}

    def split_states(self, state: OnnxState) -> list[OnnxState]:
        """A batched state -> one batch-1 state per row."""
        rows = state["invalid"].shape[0]
        return [{name: state[name][i:i + 1].copy() for name in self.names + self.host} for i in range(rows)]


def default_onnx_dir() -> Path | None:
    """The export of the bundled model shipped in the package (asr/pretrained/onnx), if any."""
    path = bundled("onnx")
    return path if path is not None and (path / "model.json").is_file() else None


def read_meta(path: Path) -> dict:
    """model.json of an exported folder, checked; OnnxModelError naming the folder otherwise."""
    if not path.is_dir():
        raise OnnxModelError(f"{path}: no such ONNX model folder (make one with python -m asr.export --onnx DIR)")
    try:
        meta = json.loads((path / "model.json").read_text())
    except (OSError, ValueError) as err:
        raise OnnxModelError(f"{path}: not an asr ONNX export (model.json: {str(err).splitlines()[0]})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise OnnxModelError(f"{path}: not an asr ONNX export (format {found!r}, expected {FORMAT!r})")
    return meta


def optimised(graph: Path) -> Path:
    """`graph` with onnxruntime's portable optimisations applied (its "extended" level: constant folding, fused
    attention, layer norm and GELU; no layout tied to a CPU), written to the cache on first use, so a load runs
    only the machine's own passes: the shipped encoder's session starts in 0.09 s instead of 0.27 s, with the same
    outputs to the bit (2026-12-06). One file per graph path under `cache_dir()/onnx/`, named by the graph's size
    and time and the onnxruntime version (a graph exported again or a new onnxruntime makes a new one), the
    `CACHED_GRAPHS` used last kept; the graph itself where the cache cannot be written."""
    import onnxruntime as ort

    stat = graph.stat()
    where = path_key(graph, 8)
    what = hashlib.blake2b(f"{stat.st_size}|{stat.st_mtime_ns}|{ort.__version__}".encode(), digest_size=8).hexdigest()
    cached = cache_dir() / "onnx" / f"{where}-{what}.onnx"
    try:
        if cached.is_file():
            os.utime(cached)  # used now: the last to be dropped
            return cached
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cached.parent, prefix=".graph-", suffix=".onnx", delete=False) as f:
            part = Path(f.name)
    except OSError:  # a read-only or missing cache
        return cached if cached.is_file() else graph
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(part)
    try:
        ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        os.replace(part, cached)
    finally:
        part.unlink(missing_ok=True)
    _drop_old(cached, where)
    return cached


def _drop_old(kept: Path, where: str) -> None:
    """Remove the cached graphs of `kept`'s path from before it was exported again, and the least recently used
    beyond `CACHED_GRAPHS` (another process may be removing them too)."""
    used = {}
    for path in kept.parent.glob("*.onnx"):
        try:
            used[path] = path.stat().st_mtime
        except OSError:
            continue
    newest = sorted(used, key=used.get, reverse=True)
    for path in [p for p in newest if p.name.startswith(where) and p != kept] + newest[CACHED_GRAPHS:]:
        path.unlink(missing_ok=True)


def load_onnx(path: str | Path | None = None, threads: int = 1,
              int8: bool = False) -> tuple[OnnxModel, Tokenizer, dict]:
    """(model, tokenizer, info) from an exported folder (None: the bundled export). `threads`: the
    session's intra-op threads; `int8`: the quantised graph (the folder must have one). `path` may
    also name a graph file inside a folder (e.g. DIR/encoder.int8.onnx)."""
    import onnxruntime as ort

    graph_file = None
    if path is not None and Path(path).suffix == ".onnx":
        path, graph_file = Path(path).parent, Path(path).name
    if path is None:
        path = default_onnx_dir()
        if path is None:
            raise OnnxModelError("no bundled ONNX export in this installation; pass --onnx-dir DIR")
    path = Path(path)
    meta = read_meta(path)
    try:
        name = graph_file or (meta["files"]["int8"] if int8 else meta["files"]["fp32"])
        if not name:
            raise OnnxModelError(f"{path}: this export has no int8 graph (export it with --int8)")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        options.enable_cpu_mem_arena = False  # chunks are small: an arena only holds on to memory
        options.enable_mem_pattern = False  # its plans are cached per input shape, and streams batch in many shapes
        session = ort.InferenceSession(str(optimised(path / name)), options, providers=["CPUExecutionProvider"])
        tokenizer = Tokenizer.from_bytes((path / meta["files"]["tokenizer"]).read_bytes())
        model = OnnxModel(session, meta)
    except OnnxModelError:
        raise
    except Exception as err:  # onnxruntime raises its own exception types for a missing or corrupt graph
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise OnnxModelError(f"{path}: not a usable asr ONNX export ({reason})") from None
    info = dict(meta.get("info") or {})
    info["onnx"] = {"dir": str(path), "graph": name}
    return model, tokenizer, info
