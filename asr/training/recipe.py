"""Resumable multi-step recipes: a list of commands, each run once.

A finished step leaves `<markers>/<name>.done` (holding its command) and is skipped from then on; a
training step that was cut off resumes from its own last checkpoint, so after an interruption the same
recipe command simply runs again. Used by recipes/mixture/reproduce.py and recipes/voices/probes.py.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Step:
    name: str
    command: list[str]


def pending_steps(steps: list[Step], markers: Path, skip: list[str] = ()) -> list[Step]:
    """The steps not yet done and not skipped, in order."""
    return [s for s in steps if s.name not in skip and not (markers / f"{s.name}.done").exists()]


def list_steps(steps: list[Step], markers: Path, prog: str, skip: list[str] = ()) -> None:
    """Print one line per step: its number, name, state and command."""
    pending = pending_steps(steps, markers, skip)
    for number, step in enumerate(steps, 1):
        state = "skipped" if step.name in skip else "pending" if step in pending else "done"
        print(f"{prog}: {number:2d}/{len(steps)} {step.name:<13} {state:<7} {shlex.join(step.command)}", flush=True)


def run_steps(steps: list[Step], markers: Path, cwd: Path, prog: str, skip: list[str] = ()) -> int:
    """Run the pending steps in order; stop at the first failure and return its exit code (0 when all ran)."""
    markers.mkdir(parents=True, exist_ok=True)
    for step in pending_steps(steps, markers, skip):
        print(f"{prog}: running {step.name}", flush=True)
        code = subprocess.run(step.command, cwd=cwd).returncode
        if code != 0:
            print(f"{prog}: error: step {step.name} failed (exit {code}); run the same command again to "
                  "resume from there", file=sys.stderr)
            return code
        (markers / f"{step.name}.done").write_text(shlex.join(step.command) + "\n")
    return 0
