"""The bundled casing and punctuation restorer on held-out sentences, against the trivial baseline.

    python scripts/bench/restorer.py [--text data/restorer/held.txt] [--out benchmarks/restorer]

The text is the restorer's held-out split (`python recipes/restorer/prepare.py` writes it; never
trained on). Scores F1 per mark and casing accuracy for the restorer run by onnxruntime and by torch
(the same network: they must agree), and for the baseline (capitalise the first word, end with a
period); times one restore per sentence at 1 thread, which is what each final costs. Prints a markdown
table; writes OUT/restorer.md and OUT/restorer.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from asr.text.restore.labels import labelled  # noqa: E402
from asr.text.restore.metrics import score_baseline, score_restorer, time_restore  # noqa: E402
from asr.text.restore.restorer import load_restorer  # noqa: E402

COLUMNS = [("period_f1", "period F1"), ("comma_f1", "comma F1"), ("question_f1", "question F1"),
           ("exclaim_f1", "exclamation F1"), ("case_accuracy", "casing accuracy %")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text", type=Path, default=ROOT / "data" / "restorer" / "held.txt")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "restorer")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: bench.quiet, the load guard
    from bench import quiet  # noqa: PLC0415

    quiet.add_allow_load(p)
    a = p.parse_args(argv)
    quiet.guard(a.allow_load, a.out, "restorer")  # committed figures: only on a quiet machine
    if not a.text.is_file():
        p.error(f"{a.text}: no held-out text (python recipes/restorer/prepare.py writes it)")
    sentences = [s for line in a.text.read_text(encoding="utf-8").splitlines() if (s := labelled(line))]
    rows = {"baseline": score_baseline(sentences).summary()}
    cost = {}
    for backend in ("onnx", "torch"):
        restorer = load_restorer(backend, threads=1)
        rows[f"restorer ({backend})"] = score_restorer(sentences, restorer.labels).summary()
        cost[backend] = time_restore(restorer.restore, sentences)
    lines = [f"# Casing and punctuation ({datetime.date.today().isoformat()}, bundled restorer)", "",
             f"{len(sentences)} held-out sentences ({a.text.name}); marks and case per word. "
             "Cost: one restore per sentence, as once per final, 1 thread.", "",
             "| | " + " | ".join(title for _, title in COLUMNS) + " | ms per final: median / p95 |",
             "|---|" + "---:|" * (len(COLUMNS) + 1)]
    for name, summary in rows.items():
        backend = name[name.find("(") + 1:-1] if "(" in name else None
        timing = f"{cost[backend]['median']:.2f} / {cost[backend]['p95']:.2f}" if backend else "-"
        lines.append(f"| {name} | " + " | ".join(f"{summary[key]:.2f}" for key, _ in COLUMNS) + f" | {timing} |")
    report = "\n".join(lines) + "\n"
    print(report)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "restorer.md").write_text(report)
    (a.out / "restorer.json").write_text(json.dumps({"sentences": len(sentences), "scores": rows,
                                                     "ms_per_final": cost}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
