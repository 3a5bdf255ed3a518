"""The ONNX export and the torch-free runtime give what the torch model gives."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from asr.model.export import export_onnx
from asr.model.loader import load_model
from asr.model.onnx_backend import CACHED_GRAPHS, OnnxModelError, load_onnx, optimised
from asr.model.torch_backend import TorchModel
from asr.text.tokenizer import Tokenizer
from helpers import ROOT, tiny_encoder

FRAMES_PER_MS = 0.1  # one log-mel frame every 10 ms


@pytest.fixture(scope="module")
def default_export(tmp_path_factory):
    """The bundled model exported with its int8 copy: (torch model, folder)."""
    encoder, tokenizer, info = load_model()
    out = tmp_path_factory.mktemp("onnx")
    export_onnx(encoder, tokenizer, info, out, int8=True)
    return TorchModel(encoder), out


def speechlike_feats(model: TorchModel, frames: int, batch: int = 1, seed: int = 0) -> np.ndarray:
    """(B, T, F) log-mel frames spread like the model's training data (its CMVN statistics)."""
    rng = np.random.default_rng(seed)
    mean, std = model.encoder.cmvn.mean.numpy(), model.encoder.cmvn.std.numpy()
    smooth = np.cumsum(rng.standard_normal((batch, frames, mean.shape[0])), axis=1) * 0.3  # slow drifts like speech
    return (mean + std * np.tanh(smooth + 0.5 * rng.standard_normal(smooth.shape))).astype(np.float32)


def run_stream(model, feats: np.ndarray, chunk: int) -> tuple[np.ndarray, object]:
    """Log-probs of `feats` (B, T, F) fed `chunk` frames at a time, the last piece final; (B, T', V) and the
    last state."""
    state, outs = model.initial_state(feats.shape[0]), []
    for start in range(0, feats.shape[1], chunk):
        logprobs, state = model.step(feats[:, start:start + chunk], state, final=start + chunk >= feats.shape[1])
        outs.append(logprobs)
    return np.concatenate(outs, axis=1), state


@pytest.mark.parametrize("chunk_ms", [500, 130, 10])
def test_onnx_logprobs_equal_torch_for_every_chunk_size(default_export, chunk_ms):
    torch_model, folder = default_export
    onnx_model, _, _ = load_onnx(folder)
    feats = speechlike_feats(torch_model, 600)  # 6 s: the attention window (2 s) fills and slides
    chunk = round(chunk_ms * FRAMES_PER_MS)
    expected, torch_state = run_stream(torch_model, feats, chunk)
    got, onnx_state = run_stream(onnx_model, feats, chunk)
    assert got.shape == expected.shape == (1, 150, torch_model.cfg.vocab_size)
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    assert (got.argmax(-1) == expected.argmax(-1)).all()
    np.testing.assert_array_equal(onnx_state["invalid"], torch_state.invalid.numpy())
    np.testing.assert_allclose(onnx_state["frames"], torch_state.frames.numpy(), atol=1e-6, rtol=0)
    np.testing.assert_allclose(onnx_state["key_5"], torch_state.keys[5].numpy(), atol=1e-4, rtol=0)


def test_zero_frames_and_short_chunks_leave_the_caches_alone(default_export):
    torch_model, folder = default_export
    onnx_model, _, _ = load_onnx(folder)
    state = onnx_model.initial_state()
    logprobs, after = onnx_model.step(np.zeros((1, 0, 80), np.float32), state)
    assert logprobs.shape == (1, 0, torch_model.cfg.vocab_size)
    logprobs, after = onnx_model.step(speechlike_feats(torch_model, 3), after)  # 3 + 3 left < kernel 7
    assert logprobs.shape[1] == 0 and after["frames"].shape == (1, 6, 80)
    assert all(after[name] is state[name] for name in state if name != "frames")


def test_batched_streams_equal_each_stream_alone(default_export):
    torch_model, folder = default_export
    onnx_model, _, _ = load_onnx(folder)
    feats = speechlike_feats(torch_model, 400, batch=3, seed=1)
    alone = [run_stream(onnx_model, feats[i:i + 1], 13)[0] for i in range(3)]
    # streams that start at different times: row 1 heard 160 frames of other audio first
    states = [onnx_model.initial_state() for _ in range(3)]
    _, states[1] = run_stream(onnx_model, speechlike_feats(torch_model, 160, seed=2), 16)
    states[1]["frames"] = states[0]["frames"]  # same leftover (both consumed a multiple of 4 frames)
    _, fresh = run_stream(onnx_model, feats[1:2], 13)
    batched, outs = onnx_model.stack_states(states), []
    for start in range(0, 400, 13):
        logprobs, batched = onnx_model.step(feats[:, start:start + 13], batched, final=start + 13 >= 400)
        outs.append(logprobs)  # final: a lookahead model computes its last, partial chunk
    together = np.concatenate(outs, axis=1)
    np.testing.assert_allclose(together[0:1], alone[0], atol=1e-4, rtol=0)
    np.testing.assert_allclose(together[2:3], alone[2], atol=1e-4, rtol=0)
    assert not np.allclose(together[1:2], alone[1], atol=1e-4)  # row 1 remembers its earlier audio
    rows = onnx_model.split_states(batched)
    assert len(rows) == 3 and all(row["key_0"].shape[0] == 1 for row in rows)
    np.testing.assert_array_equal(rows[2]["invalid"], [0])


def test_streams_of_different_lengths_share_one_graph_run(default_export):
    """step_many pads the streams' frames into one run of the graph, and each stream gets what the torch
    model gives it alone, whatever its chunk lengths (whole chunks, early steps, too short for a frame)."""
    torch_model, folder = default_export
    onnx_model, _, _ = load_onnx(folder)
    runs = []
    session_run = onnx_model.session.run
    onnx_model.session.run = lambda *args: runs.append(1) or session_run(*args)
    feats = speechlike_feats(torch_model, 600, batch=5, seed=4)
    rng = np.random.default_rng(4)
    onnx_states = [onnx_model.initial_state() for _ in range(5)]
    torch_states = [torch_model.initial_state() for _ in range(5)]
    used = [0] * 5
    for _ in range(10):
        sizes = [int(rng.choice([50, 50, 16, 3, 0])) for _ in range(5)]
        chunks = [feats[i, used[i]:used[i] + n] for i, n in enumerate(sizes)]
        runs.clear()
        together = onnx_model.step_many(chunks, onnx_states)
        assert len(runs) == (1 if any(len(r[0]) for r in together) else 0)
        for i, (chunk, (logprobs, state)) in enumerate(zip(chunks, together)):
            expected, torch_states[i] = torch_model.step(chunk[None], torch_states[i])
            assert logprobs.shape == expected[0].shape
            np.testing.assert_allclose(logprobs, expected[0], atol=1e-4, rtol=0)
            onnx_states[i], used[i] = state, used[i] + len(chunk)


def test_int8_stays_close_to_fp32(default_export):
    torch_model, folder = default_export
    fp32, _, _ = load_onnx(folder)
    int8, _, _ = load_onnx(folder, int8=True)
    assert (folder / "encoder.int8.onnx").stat().st_size < (folder / "encoder.onnx").stat().st_size / 3
    feats = speechlike_feats(torch_model, 600, seed=3)
    a, b = run_stream(fp32, feats, 50)[0], run_stream(int8, feats, 50)[0]
    assert 0 < np.abs(a - b).max()  # really quantised
    assert (a.argmax(-1) == b.argmax(-1)).mean() > 0.9


@pytest.mark.parametrize("overrides", [
    dict(subsampling=1, subsampling_kernel=1, conv_kernel=0),
    dict(subsampling=2, subsampling_kernel=4, conv_kernel=3),
    dict(subsampling=4, frontend="conv2d", frontend_channels=4, conv_kernel=5, window=16),
    dict(subsampling=4, subsampling_kernel=8, window=1, conv_kernel=2),
    dict(subsampling=8, frontend="conv2d", frontend_channels=4, conv_kernel=3, window=8),
    dict(subsampling=2, frontend="whisper", features="whisper", conv_kernel=3, window=8, chunk=5),  # lookahead
    dict(subsampling=1, subsampling_kernel=1, window=8, chunk=3, max_chunk=6),  # a shorter chunk than its biases
])
def test_every_architecture_exports_exactly(tmp_path, overrides):
    encoder = tiny_encoder(2, **overrides)
    export_onnx(encoder, Tokenizer("char"), {}, tmp_path)
    onnx_model, _, _ = load_onnx(tmp_path)
    torch_model = TorchModel(encoder)
    feats = np.random.default_rng(0).standard_normal((2, 97, 80)).astype(np.float32) * 2
    for chunk in (1, 7, 50):
        expected, _ = run_stream(torch_model, feats, chunk)
        got, _ = run_stream(onnx_model, feats, chunk)
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0, err_msg=f"{overrides} chunk {chunk}")


def test_export_is_deterministic(default_export, tmp_path):
    torch_model, folder = default_export
    encoder, tokenizer, info = load_model()
    export_onnx(encoder, tokenizer, info, tmp_path, int8=True)
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(p.name for p in tmp_path.iterdir())
    assert names == ["README.md", "encoder.int8.onnx", "encoder.onnx", "model.json", "tokenizer.bin"]
    for name in names:
        assert (folder / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_model_json_is_plain_json_with_the_contract(default_export):
    torch_model, folder = default_export
    meta = json.loads((folder / "model.json").read_text())
    assert meta["config"]["window"] == torch_model.cfg.window
    np.testing.assert_allclose(meta["cmvn"]["mean"], torch_model.encoder.cmvn.mean.numpy(), rtol=1e-6)
    assert meta["state"]["names"][:3] == ["frames", "invalid", "key_0"]
    assert "new_key_0" in (folder / "README.md").read_text()


def test_bad_folders_raise_one_clear_error(tmp_path):
    with pytest.raises(OnnxModelError, match="no such ONNX model folder"):
        load_onnx(tmp_path / "missing")
    with pytest.raises(OnnxModelError, match="model.json"):
        load_onnx(tmp_path)
    (tmp_path / "model.json").write_text('{"format": "something else"}')
    with pytest.raises(OnnxModelError, match="not an asr ONNX export"):
        load_onnx(tmp_path)


def test_broken_graph_is_refused(default_export, tmp_path):
    _, folder = default_export
    for name in ("model.json", "tokenizer.bin"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    (tmp_path / "encoder.onnx").write_bytes(b"not a graph")
    with pytest.raises(OnnxModelError, match="not a usable asr ONNX export"):
        load_onnx(tmp_path)
    meta = json.loads((tmp_path / "model.json").read_text())
    meta["files"]["int8"] = None
    (tmp_path / "model.json").write_text(json.dumps(meta))
    with pytest.raises(OnnxModelError, match="no int8 graph"):
        load_onnx(tmp_path, int8=True)


def test_runtime_never_imports_torch(default_export):
    _, folder = default_export
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np\n"
            "from asr.model.backend import load_backend\n"
            f"model, tokenizer, info = load_backend({str(folder)!r}, backend='onnx')\n"
            "logprobs, state = model.step(np.zeros((1, 40, 80), np.float32), model.initial_state(), final=True)\n"
            "assert logprobs.shape == (1, 10, model.cfg.vocab_size), logprobs.shape\n"
            "assert not any(m == 'torch' or m.startswith('torch.') for m in sys.modules if sys.modules[m])\n"
            "print('ok')\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_export_cli_and_bad_model(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"nothing")
    result = subprocess.run([sys.executable, "-m", "asr.export", "--onnx", str(tmp_path / "out"), "--model", str(bad)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "asr.export:" in result.stderr and "bad.safetensors" in result.stderr


def test_bundled_export_is_the_bundled_model(default_export):
    torch_model, _ = default_export
    bundled, tokenizer, info = load_onnx()  # asr/pretrained/onnx, shipped in the package
    _, _, torch_info = load_model()
    assert bundled.cfg == torch_model.cfg
    assert {k: v for k, v in info.items() if k != "onnx"} == torch_info  # the export of this very model file
    feats = speechlike_feats(torch_model, 300, seed=4)
    np.testing.assert_allclose(run_stream(bundled, feats, 50)[0], run_stream(torch_model, feats, 50)[0],
                               atol=1e-4, rtol=0, err_msg="re-export: python -m asr.export --onnx asr/pretrained/onnx --int8")
    int8, _, _ = load_onnx(int8=True)
    assert int8.session is not bundled.session


def test_the_optimised_graph_is_cached_with_the_same_outputs(default_export, tmp_path, monkeypatch):
    torch_model, folder = default_export
    graph = tmp_path / "export" / "encoder.onnx"
    shutil.copytree(folder, graph.parent)
    monkeypatch.setenv("ASR_CACHE_DIR", str(tmp_path / "cache"))
    cached = optimised(graph)
    assert cached.parent == tmp_path / "cache" / "onnx" and cached.read_bytes() != graph.read_bytes()
    assert optimised(graph) == cached and [p.name for p in cached.parent.iterdir()] == [cached.name]
    feats = speechlike_feats(torch_model, 300, seed=5)
    from_cache = run_stream(load_onnx(graph.parent)[0], feats, 50)[0]
    monkeypatch.setenv("ASR_CACHE_DIR", str(graph))  # a file: no cache can be made under it
    assert optimised(graph) == graph
    np.testing.assert_array_equal(from_cache, run_stream(load_onnx(graph.parent)[0], feats, 50)[0])
    monkeypatch.setenv("ASR_CACHE_DIR", str(tmp_path / "cache"))
    os.utime(graph, ns=(0, 0))  # exported again: a new file replaces the old
    again = optimised(graph)
    assert again != cached and [p.name for p in cached.parent.iterdir()] == [again.name]
    for n in range(CACHED_GRAPHS + 2):  # other graphs: only the most recently used stay
        other = tmp_path / f"other{n}" / "encoder.onnx"
        other.parent.mkdir()
        shutil.copyfile(graph, other)
        optimised(other)
    assert len(list(cached.parent.glob("*.onnx"))) == CACHED_GRAPHS and not again.exists()
