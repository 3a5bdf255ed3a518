"""A model folder (asr.model.folder: model.safetensors, onnx/, lm.arpa) is what every tool's --model and
asr.load take: its export runs on onnx where it has one, its weights on torch, and its LM is the default search."""
from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import asr
from asr import cli
from asr.model.errors import ModelError, installed
from asr.model.folder import RESCORE, folder_lm, folder_rescore_lm, model_folder
from asr.model.loader import load_model
from asr.training.lm.build import build_arpa
from conftest import run_module


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A model folder with weights and a word LM, and its ONNX export."""
    from asr.model.export import export_onnx

    root = tmp_path_factory.mktemp("model_folder") / "mine"
    root.mkdir()
    shutil.copyfile(model_path, root / "model.safetensors")
    (root / "lm.arpa").write_text(build_arpa(["THE ZORBLAX PRO", "A ZORBLAX"]))
    export_onnx(*load_model(root)[:2], {}, root / "onnx")
    return root


def decoder_kind(model: str, **flags) -> str:
    options = dict(beam_size=8, beam_threshold=15.0, lm_weight=1.0, word_score=0.0, onnx_dir=None, greedy=False,
                   beam=False, lm=None)
    tokenizer = load_model(model)[1]
    decoder = cli.load_decoder(SimpleNamespace(model=model, **{**options, **flags}), SimpleNamespace(tokenizer=tokenizer))
    return decoder.kind if decoder.lm is None else str(decoder.lm.path)


def test_a_model_folder_is_told_apart_from_a_file_and_an_export(folder: Path, model_path: Path) -> None:
    assert model_folder(folder).weights == folder / "model.safetensors"
    assert model_folder(folder).onnx == folder / "onnx" and folder_lm(folder) == folder / "lm.arpa"
    assert model_folder(folder / "onnx") is None  # an ONNX export stays what --backend onnx reads
    assert model_folder(model_path) is None and model_folder(None) is None
    assert model_folder(folder.parent) is None  # a folder with neither weights nor an export


def test_every_loader_takes_the_folder(folder: Path) -> None:
    encoder, tokenizer, _ = load_model(folder)
    assert encoder.cfg.n_layers == 2 and tokenizer.kind == "char"
    model = asr.load(folder)
    assert type(model.recognizer.model).__name__ == ("OnnxModel" if installed("onnxruntime") else "TorchModel")
    assert model.decoder.lm is not None and model.decoder.lm.path == folder / "lm.arpa"  # its own LM, not the bundled
    torch_model = asr.load(folder, backend="torch", greedy=True)
    assert type(torch_model.recognizer.model).__name__ == "TorchModel" and torch_model.decoder.kind == "greedy"


def test_the_tools_search_with_the_folders_lm_unless_told(folder: Path, tmp_path: Path) -> None:
    assert decoder_kind(str(folder)) == str(folder / "lm.arpa")
    assert decoder_kind(str(folder), greedy=True) == "greedy"
    other = tmp_path / "other.arpa"
    other.write_text(build_arpa(["ANOTHER TEXT"]))
    assert decoder_kind(str(folder), lm=str(other)) == str(other)
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copyfile(folder / "model.safetensors", bare / "model.safetensors")  # a training run folder: no LM
    assert decoder_kind(str(bare)) == "greedy"


def test_a_folder_without_weights_is_one_clear_line_on_torch(folder: Path, tmp_path: Path) -> None:
    only_export = tmp_path / "only_export"
    shutil.copytree(folder / "onnx", only_export / "onnx")
    with pytest.raises(ModelError, match="has no model.safetensors"):
        load_model(only_export)
    if installed("onnxruntime"):
        assert type(asr.load(only_export, greedy=True).recognizer.model).__name__ == "OnnxModel"


def test_transcribe_takes_the_folder(folder: Path, speech_wav: Path) -> None:
    done = run_module("asr.transcribe", "--model", str(folder), "--plain", str(speech_wav))
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) <= {"THE", "ZORBLAX", "PRO", "A"}  # the search outputs only its LM's words


def test_a_folders_second_pass_runs_after_its_own_lm(folder: Path, tmp_path: Path) -> None:
    """rescore.safetensors beside the folder's LM is its second pass (loaded on the first final), for every tool."""
    mine = tmp_path / "mine"
    shutil.copytree(folder, mine)
    assert folder_rescore_lm(mine) is None and asr.load(mine).decoder.rescorer is None
    (mine / RESCORE).write_bytes(b"read on the first final only")
    assert folder_rescore_lm(mine) == mine / RESCORE
    assert asr.load(mine).decoder.rescorer.cfg.lm == str(mine / RESCORE)
    tokenizer = load_model(mine)[1]
    options = dict(beam_size=8, beam_threshold=15.0, lm_weight=1.0, word_score=0.0, onnx_dir=None, greedy=False,
                   beam=False, lm=None, model=str(mine))
    made = cli.load_decoder(SimpleNamespace(**options), SimpleNamespace(tokenizer=tokenizer))
    assert made.rescorer.cfg.lm == str(mine / RESCORE)
    assert cli.load_decoder(SimpleNamespace(**options, no_rescore=True), SimpleNamespace(tokenizer=tokenizer)).rescorer is None
    (mine / "lm.arpa").unlink()
    assert folder_rescore_lm(mine) is None  # without its own LM there is nothing for it to follow
