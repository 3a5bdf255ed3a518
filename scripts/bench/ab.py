"""The A/B of starting points and lookahead (issue #44): one table and one curve from the arms' progress rows.

    python scripts/bench/ab.py [--benchmarks benchmarks]

Each arm is a carried run of recipes/voices/continue.py whose periods append a row to its own JSON Lines file
(recipes/voices/README.md, "Starting points and lookahead"); the reference arm (a) is the carried run itself,
its rows after FORK_PERIOD. Writes the table between the markers in benchmarks/ab/README.md and the curve
benchmarks/ab/curve.png: each arm's WER against its own hours of training since the A/B began (arms a and b
start at FORK_PERIOD's scores; c and d from Whisper's encoder, with no score before their first period).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORK_PERIOD = 12  # the carried run's last period before the A/B: arms a and b go on from its state
ARMS = [  # letter, what, progress rows (relative to --benchmarks), starts from the fork's scores
    ("a", "the carried run, continued", "training_progress.jsonl", True),
    ("b", "+ lookahead inside 480 ms chunks", "ab/lookahead.jsonl", True),
    ("c", "Whisper tiny.en's encoder", "ab/whisper_tiny.jsonl", False),
    ("d", "Whisper base's encoder (or base teaching c)", "ab/whisper_base.jsonl", False),
]
COLUMNS = [("dev_greedy", "dev greedy"), ("dev_beam", "dev beam + LM"), ("kokoro_check_beam", "Kokoro check"),
           ("synthetic_check_beam", "synthetic check"), ("fsdd_beam", "FSDD test")]
BEGIN, END = "<!-- ab table: scripts/bench/ab.py -->", "<!-- end of ab table -->"


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def arm_rows(benchmarks: Path) -> tuple[dict, dict[str, list[dict]]]:
    """(the fork's row, arm letter -> its rows after the fork, each with `ab_hours`: its training hours so far)."""
    carried = read_rows(benchmarks / "training_progress.jsonl")
    fork = next(r for r in carried if r["period"] == FORK_PERIOD)
    arms = {}
    for letter, _, name, _ in ARMS:
        rows = [r for r in read_rows(benchmarks / name) if r["period"] > FORK_PERIOD or letter not in "ab"]
        hours = 0.0
        for row in rows:
            hours += row["phase_minutes"]["train"] / 60
            row["ab_hours"] = round(hours, 2)
        arms[letter] = rows
    return fork, arms


def table(fork: dict, arms: dict[str, list[dict]]) -> str:
    lines = ["| arm | periods | training hours | steps | " + " | ".join(label for _, label in COLUMNS) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(COLUMNS),
             f"| start: the carried run's period {FORK_PERIOD} | | | {fork['steps']} | "
             + " | ".join(f"{fork[c]:.1f}" for c, _ in COLUMNS) + " |"]
    for letter, what, _, from_fork in ARMS:
        rows = arms[letter]
        if not rows:
            lines.append(f"| {letter}: {what} | 0 | | | " + " | ".join("" for _ in COLUMNS) + " |")
            continue
        last = rows[-1]
        steps = last["steps"] - (fork["steps"] if from_fork else 0)
        lines.append(f"| {letter}: {what} | {len(rows)} | {last['ab_hours']:.2f} | {steps} | "
                     + " | ".join(f"{last[c]:.1f}" for c, _ in COLUMNS) + " |")
    return "\n".join(lines)


def plot(fork: dict, arms: dict[str, list[dict]], out: Path) -> None:
    import matplotlib  # noqa: PLC0415 (the train extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for (letter, what, _, from_fork), color in zip(ARMS, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        rows = ([{**fork, "ab_hours": 0.0}] if from_fork else []) + arms[letter]
        if len(rows) <= (1 if from_fork else 0):
            continue
        hours = [r["ab_hours"] for r in rows]
        ax.plot(hours, [r["dev_beam"] for r in rows], "o-", color=color, label=f"{letter}: {what} (beam + LM)")
        ax.plot(hours, [r["dev_greedy"] for r in rows], "o--", color=color, alpha=0.6, label=f"{letter}: greedy")
    ax.set_xlabel("hours of training since the A/B began (each arm its own)")
    ax.set_ylabel("speechocean762 dev WER (%)")
    ax.set_title("Starting points and lookahead: the arms at equal training time")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/bench/ab.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmarks", type=Path, default=ROOT / "benchmarks")
    args = parser.parse_args(argv)
    readme = args.benchmarks / "ab" / "README.md"
    text = readme.read_text() if readme.exists() else ""
    if BEGIN not in text or END not in text:
        parser.error(f"{readme}: no '{BEGIN}' ... '{END}' markers to write the table between")
    fork, arms = arm_rows(args.benchmarks)
    head, rest = text.split(BEGIN, 1)
    readme.write_text(head + BEGIN + "\n" + table(fork, arms) + "\n" + END + rest.split(END, 1)[1])
    plot(fork, arms, args.benchmarks / "ab" / "curve.png")
    print(f"ab: wrote {readme} and {args.benchmarks / 'ab' / 'curve.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
