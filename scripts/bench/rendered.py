"""The robustness benchmark's audio, rendered once into a cache folder (under data/, git-ignored) and read from
there by every system: ours through `asr.evaluate`'s path, the peers through their worker. So all hear exactly
the same samples, and a second run (another model, an arm of an A/B) renders nothing.

    <cache>/render-v<VERSION>-seed<SEED>/<set>/<condition>/<utterance>.wav   16 kHz float32 wav, the utterance's length
    <cache>/render-v<VERSION>-seed<SEED>/<set>/<condition>/manifest.jsonl    name, file, text, seconds, drawn
    <cache>/render-v<VERSION>-seed<SEED>/noise-alone-<S>s/<item>.wav         noise alone, S seconds at most (+ manifest)
    <cache>/render-v<VERSION>-seed<SEED>/peers/<peer>/<set>.jsonl            each peer's text of those files

A file is rendered when it is missing, written under a temporary name and then renamed, so a stopped run leaves
no half file. Change VERSION when a condition changes how it sounds: the old renderings are then left alone.
"""
from __future__ import annotations

import json
import multiprocessing
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from asr.audio import SAMPLE_RATE
from asr.audio.files import load_audio
from asr.corpus.manifest import Utterance

from bench.conditions import BY_NAME, SEED, Condition, NoiseItem, Sources, Speech, render, render_noise

VERSION = 1
NOISE_SET = "noise-alone"  # the pseudo-set that noise alone is listed under


@dataclass
class Item:
    """One rendered file: what it is (set, condition, name), where (audio), its reference and length."""

    set: str
    condition: str
    name: str
    audio: str  # absolute path
    text: str
    seconds: float
    drawn: str = ""  # what the condition drew (room, microphone, noise and SNR, talkers)

    @property
    def key(self) -> str:
        """The item's key in the peers' caches: condition/name (the set is the cache file)."""
        return f"{self.condition}/{self.name}"


def root(cache: Path) -> Path:
    """The cache's folder for this rendering (VERSION and the conditions' SEED)."""
    return cache / f"render-v{VERSION}-seed{SEED}"


def file_name(name: str) -> str:
    """A flat wav name for an utterance's relative path (dev-clean-2/1272/x.opus -> dev-clean-2__1272__x.wav)."""
    return str(Path(name).with_suffix("")).replace(os.sep, "__") + ".wav"


def _write(path: Path, wave: np.ndarray) -> None:
    tmp = path.with_name(path.stem + ".tmp.wav")
    sf.write(str(tmp), wave, SAMPLE_RATE, subtype="FLOAT")
    os.replace(tmp, path)


def _read_manifest(path: Path) -> dict[str, dict]:
    rows = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["name"]] = row
    return rows


def _write_manifest(path: Path, rows: dict[str, dict]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(rows[name]) + "\n" for name in sorted(rows)))  # the same file every run
    os.replace(tmp, path)


_SOURCES: Sources | None = None  # the worker's (forked from the parent, which loaded the pools)


def _render_one(task: tuple[str, str, str, str, list[tuple[str, str]]]) -> list[dict]:
    """Render one utterance through the conditions it lacks: task = (set, name, speaker, audio, [(condition,
    path)]); returns the manifest rows (without text)."""
    set_name, name, speaker, audio, todo = task
    speech = Speech(set_name, name, speaker, load_audio(audio))
    rows = []
    for condition, path in todo:
        wave, drawn = render(BY_NAME[condition], _SOURCES, speech)
        _write(Path(path), wave)
        rows.append({"condition": condition, "name": name, "file": Path(path).name,
                     "seconds": len(wave) / SAMPLE_RATE, "drawn": drawn})
    return rows


def render_speech(cache: Path, sources: Sources, subsets: dict[str, list[Utterance]],
                  conditions: list[Condition], jobs: int = 1) -> list[Item]:
    """Every utterance of `subsets` (set -> utterances) through every condition, rendered where missing (in `jobs`
    processes); the items in set, condition, utterance order."""
    global _SOURCES
    _SOURCES = sources
    sources.pools  # loaded once here, before any fork
    manifests, tasks = {}, []
    for set_name, utterances in subsets.items():
        for condition in conditions:
            folder = root(cache) / set_name / condition.name
            folder.mkdir(parents=True, exist_ok=True)
            manifests[set_name, condition.name] = _read_manifest(folder / "manifest.jsonl")
        for utt in utterances:
            name = sources.name(set_name, utt)
            todo = []
            for condition in conditions:
                path = root(cache) / set_name / condition.name / file_name(name)
                if name not in manifests[set_name, condition.name] or not path.is_file():
                    todo.append((condition.name, str(path)))
            if todo:
                tasks.append((set_name, name, utt.speaker, str(utt.audio), todo))
    if jobs > 1 and len(tasks) > 1 and "fork" in multiprocessing.get_all_start_methods():
        with multiprocessing.get_context("fork").Pool(min(jobs, len(tasks))) as pool:
            done = pool.map(_render_one, tasks, chunksize=1)
    else:
        done = [_render_one(task) for task in tasks]
    texts = {(s, sources.name(s, u)): u.text for s, us in subsets.items() for u in us}
    for (set_name, *_), rows in zip(tasks, done):
        for row in rows:
            condition = row.pop("condition")
            manifests[set_name, condition][row["name"]] = {**row, "text": texts[set_name, row["name"]]}
    for (set_name, condition), rows in manifests.items():
        _write_manifest(root(cache) / set_name / condition / "manifest.jsonl", rows)
    items = []
    for set_name, utterances in subsets.items():
        for condition in conditions:
            folder = root(cache) / set_name / condition.name
            for utt in utterances:
                row = manifests[set_name, condition.name][sources.name(set_name, utt)]
                items.append(Item(set_name, condition.name, row["name"], str((folder / row["file"]).resolve()),
                                  utt.text, row["seconds"], row.get("drawn", "")))
    return items


def render_noise_alone(cache: Path, sources: Sources, noise: list[NoiseItem], seconds: float) -> list[Item]:
    """Each noise item rendered where missing; its items (empty reference: every word is invented), their
    condition the length asked for (so that a peer's cached text belongs to the same audio)."""
    folder = root(cache) / f"{NOISE_SET}-{seconds:g}s"
    folder.mkdir(parents=True, exist_ok=True)
    rows = _read_manifest(folder / "manifest.jsonl")
    items = []
    for item in noise:
        path = folder / f"{item.name}.wav"
        if item.name not in rows or not path.is_file():
            wave = render_noise(item, sources, seconds)
            _write(path, wave)
            rows[item.name] = {"name": item.name, "file": path.name, "seconds": len(wave) / SAMPLE_RATE,
                               "drawn": item.source, "text": ""}
        row = rows[item.name]
        items.append(Item(NOISE_SET, f"{seconds:g}s", item.name, str(path.resolve()), "", row["seconds"], row["drawn"]))
    _write_manifest(folder / "manifest.jsonl", rows)
    return items


def as_rows(items: list[Item]) -> list[dict]:
    """The items as JSON rows (for a peer worker's manifest, with its "set" and "name")."""
    return [{**asdict(item), "name": item.key} for item in items]
