"""The phone arms' starting states (recipes/phones/README.md): `python recipes/phones/start.py ARM`.

    python recipes/phones/start.py a                              # the shipped character model, as it is
    python recipes/phones/start.py b --minutes 20 -- threads=1   # shipped encoder, new phone layer, trained alone
    python recipes/phones/start.py c                              # phones from scratch at the shipped shapes

Each writes `recipes/phones/ARM/start/` (model.safetensors, float16, and state.json), the folder that the arm's
first `recipes/voices/continue.py --fork-from ... --new-schedule` period starts from. a: the shipped model
(the reference). b and c: the model's tokenizer is kind "phone" (`--no-word-boundary`: without the "|" unit)
and carries the lexicon (`--lexicon`, built by `python -m asr.training.g2p.lexicon`); the bundled G2P spells the
words it lacks.

b: the shipped model's tensors (CMVN, front end, blocks, final norm) under a new output layer over the phones,
which alone trains for `--minutes` (conf/experiment/phones_head.yaml: everything else frozen); the arm's
periods then train everything. c: new weights at the shipped model's shapes (seeded), with the shipped CMVN
statistics (the training audio's mean and spread: data statistics, not learned weights).
The state continues the Kokoro slices after arm a's of the native A/B (recipes/native/a/state), so a phone arm's
first period renders sentences no arm has heard.

"The shipped model" is the character model shipped when the A/B began (2026-12-02), whatever the package ships
now: git keeps it as the blob REFERENCE_BLOB (that file's content at the time, named by its hash), which
`shipped_model()` writes to `recipes/phones/a/start/model.safetensors` (git-ignored) on first use.
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.model.encoder import Encoder  # noqa: E402
from asr.model.loader import load_model, save_model  # noqa: E402
from asr.text.g2p import bundled_g2p  # noqa: E402
from asr.text.lexicon import Lexicon  # noqa: E402
from asr.text.tokenizer import Tokenizer  # noqa: E402

FROZEN_OUT = "ctc."  # the output layer: the only tensors that do not come from the shipped model in arm b
REFERENCE = ROOT / "recipes" / "phones" / "a" / "start" / "model.safetensors"  # arm a's start: the A/B's shipped model
REFERENCE_BLOB = "eaf03704b834de9d47756436366f0270e6b3275f"  # git's hash of asr/pretrained/default.safetensors then


def shipped_model() -> tuple[Encoder, Tokenizer, dict]:
    """The character model shipped when the A/B began, from git's history (written to REFERENCE once)."""
    if not REFERENCE.is_file():
        blob = subprocess.run(["git", "cat-file", "blob", REFERENCE_BLOB], cwd=ROOT, capture_output=True)
        if blob.returncode:
            sys.exit(f"start: error: git has no blob {REFERENCE_BLOB} (the A/B's shipped model): a full clone keeps it")
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_bytes(blob.stdout)
    return load_model(REFERENCE)


def phone_model(arm: str, lexicon: Path, word_boundary: bool, seed: int = 0) -> tuple[Encoder, Tokenizer]:
    """Arm b's or c's model before any training (see the module doc)."""
    shipped, _, _ = shipped_model()
    tokenizer = Tokenizer("phone", word_boundary=word_boundary).with_lexicon(Lexicon.load(lexicon, g2p=bundled_g2p()))
    torch.manual_seed(seed)
    encoder = Encoder(replace(shipped.cfg, vocab_size=tokenizer.vocab_size))
    source = shipped.state_dict()
    taken = {k: v for k, v in source.items() if not k.startswith(FROZEN_OUT)} if arm == "b" else \
        {k: v for k, v in source.items() if k.startswith("cmvn.")}
    encoder.load_state_dict(taken, strict=False)
    return encoder, tokenizer


def native_slices() -> dict:
    """The Kokoro slices the native A/B's arm a has heard (so the phone arms' first slice is a fresh one)."""
    path = ROOT / "recipes" / "native" / "a" / "state" / "state.json"
    state = json.loads(path.read_text()) if path.exists() else {}
    return {"kokoro_slices": state.get("kokoro_slices", []), "kokoro_hours_seen": state.get("kokoro_hours_seen", 0.0)}


def write_start(out: Path, encoder: Encoder, tokenizer: Tokenizer, info: dict, steps: int, minutes: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    save_model(out / "model.safetensors", encoder, tokenizer, info, half=True)
    state = {"period": 0, "date": datetime.date.today().isoformat(), "steps": steps,
             "schedule": {"next_step_offset": 0, "rewarm_steps": 0}, "schedule_start": steps,
             "train_minutes": minutes, **native_slices(), "layers": encoder.cfg.n_layers, "candidate_carried": False,
             "start": info}
    (out / "state.json").write_text(json.dumps(state, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("arm", choices=["a", "b", "c"])
    p.add_argument("--minutes", type=float, default=20.0, help="b: wall minutes of training the new layer alone")
    p.add_argument("--lexicon", type=Path, default=ROOT / "data" / "lexicon" / "cmudict.txt")
    p.add_argument("--no-word-boundary", action="store_true", help="phones only, no '|' unit ending each word")
    p.add_argument("--out", type=Path, help="the start folder (default recipes/phones/ARM/start)")
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "phones")
    p.add_argument("overrides", nargs="*", help="arm b: extra Hydra overrides for the head's training (after --)")
    a = p.parse_intermixed_args(argv)
    out = a.out or ROOT / "recipes" / "phones" / a.arm / "start"
    if a.arm == "a":
        shipped, tokenizer, info = shipped_model()
        write_start(out, shipped, tokenizer, {"arm": "a", "from": "asr/pretrained/default.safetensors", **info}, 0, 0.0)
        print(f"start: {out} (arm a: the shipped model)", file=sys.stderr)
        return 0
    if not a.lexicon.is_file():
        p.error(f"--lexicon {a.lexicon}: no such file (python -m asr.training.g2p.lexicon --out {a.lexicon})")
    encoder, tokenizer = phone_model(a.arm, a.lexicon, not a.no_word_boundary)
    info = {"arm": a.arm, "from": "asr/pretrained/default.safetensors" if a.arm == "b" else "new weights, shipped CMVN",
            "word_boundary": tokenizer.word_boundary, "lexicon_words": len(tokenizer.lexicon)}
    if a.arm == "c" or a.minutes <= 0:
        write_start(out, encoder, tokenizer, info, 0, 0.0)
        print(f"start: {out} (arm {a.arm}, untrained {'output layer' if a.arm == 'b' else 'model'})", file=sys.stderr)
        return 0
    run_dir = a.work / "b_head"
    run_dir.mkdir(parents=True, exist_ok=True)
    save_model(run_dir / "start.safetensors", encoder, tokenizer, info)
    command = [sys.executable, "-m", "asr.training", "experiment=phones_head", f"run_dir={run_dir}",
               f"init_from={run_dir / 'start.safetensors'}", f"stop_after_minutes={a.minutes}", *a.overrides]
    print(f"start: $ {' '.join(command)}", file=sys.stderr, flush=True)
    with open(run_dir / "train.log", "a") as log:
        if subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode:
            sys.exit(f"start: error: the head's training failed (log: {run_dir / 'train.log'}); the same command resumes")
    trained, tokenizer, trained_info = load_model(run_dir / "model.safetensors")
    frozen = {k: v for k, v in trained.state_dict().items() if not k.startswith(FROZEN_OUT)}
    assert all(torch.equal(v, encoder.state_dict()[k]) for k, v in frozen.items()), "a frozen tensor moved"
    write_start(out, trained, tokenizer, {**info, "head_steps": trained_info.get("steps")}, trained_info.get("steps", 0),
                a.minutes)
    print(f"start: {out} (arm b: the phone layer trained alone for {trained_info.get('steps')} steps)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
