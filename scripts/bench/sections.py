"""RESULTS.md's sections from other benchmark scripts: each runs on its own and writes OUT/<folder>/<name>.md and .json
(the folder of the question it answers, FOLDER), which the page takes in (headings moved under its own), and the
robustness benchmark's tables where its JSON is there."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

from bench.data import ROOT

PAGES = (("7. Torch, ONNX fp32 and ONNX int8", "onnx"), ("8. The streaming server", "serve"),
         ("8b. The streaming server on the onnx backend", "serve_onnx"),
         ("8c. The most streams the cores could carry", "serve_ceiling"),
         ("8d. The streaming server with two uploads running beside it", "serve_uploads"),
         ("9. Transcription under CPU load", "load"), ("10. Casing and punctuation", "restorer"),
         ("11. Hotwords", "hotwords"), ("12. Batched transcription", "batched"))
FOLDER = {"onnx": "onnx", "serve": "serve", "serve_onnx": "serve", "serve_ceiling": "serve", "serve_uploads": "serve",
          "load": "transcribe", "batched": "transcribe", "restorer": "restorer", "hotwords": "hotwords", "lm": "lm"}


def body(markdown: str) -> str:
    """A report's text without its own top-level title (RESULTS.md gives it a numbered one)."""
    return markdown.split("\n", 1)[1].lstrip() if markdown.startswith("# ") else markdown


def run(out: Path, limit: int | None, log: Callable[[str], None]) -> dict:
    """The deployment, serving and load benchmarks into `out` (the load was checked by the caller: each is told
    --allow-load); their figures, and their pages as `sections` [(title, text)]."""
    from bench import (batched as batched_bench, ceiling as ceiling_bench, hotwords as hotwords_bench,  # noqa: PLC0415
                       load as load_bench, onnx as onnx_bench, restorer as restorer_bench, serve as serve_bench)
    results: dict = {}
    log("onnx: torch vs ONNX fp32 vs ONNX int8")
    results["onnx"] = onnx_bench.run(limit=limit, out=out / FOLDER["onnx"])
    serve = out / FOLDER["serve"]
    log("serve: concurrent real-time streams")
    serve_bench.main(["--out", str(serve), "--server-args=--backend torch", "--allow-load"])
    results["serve"] = json.loads((serve / "serve.json").read_text())
    log("serve: the same with --backend onnx")
    serve_bench.main(["--out", str(serve), "--server-args=--backend onnx", "--name", "serve_onnx", "--allow-load"])
    results["serve_onnx"] = json.loads((serve / "serve_onnx.json").read_text())
    log("serve: the onnx server's streams with two uploads running beside them")
    serve_bench.main(["--out", str(serve), "--server-args=--backend onnx", "--uploads", "2", "--name",
                      "serve_uploads", "--allow-load"])
    log("serve: the most streams the cores could carry")
    ceiling_bench.main(["--out", str(serve), "--allow-load"])
    results["serve_ceiling"] = json.loads((serve / "serve_ceiling.json").read_text())
    log("transcription under CPU load")
    load_bench.main(["--out", str(out / FOLDER["load"]), "--allow-load"])
    results["load"] = json.loads((out / FOLDER["load"] / "load.json").read_text())
    log("restorer: casing and punctuation of held-out sentences")
    held = ROOT / "data" / "restorer" / "held.txt"
    if not held.exists():
        subprocess.run([sys.executable, str(ROOT / "recipes" / "restorer" / "prepare.py")], check=True)
    restorer_bench.main(["--text", str(held), "--out", str(out / FOLDER["restorer"]), "--allow-load"])
    log("hotwords: recall of listed names, and what a list costs on dev")
    hotwords_bench.main(["--out", str(out / FOLDER["hotwords"]), "--allow-load"])
    log("batched transcription against the per-file path")
    batched_bench.main(["--out", str(out / FOLDER["batched"]), "--allow-load"])
    results["batched"] = json.loads((out / FOLDER["batched"] / "batched.json").read_text())
    results["sections"] = [(title, body((out / FOLDER[name] / f"{name}.md").read_text())) for title, name in PAGES]
    lm = newest_lm_page(out / FOLDER["lm"])
    if lm is not None:  # scripts/bench/lm.py's, run on its own (it compares two LMs)
        results["sections"].append(("13. What the word LM costs", body(lm.read_text())))
    return results


def newest_lm_page(folder: Path) -> Path | None:
    """The newest page `scripts/bench/lm.py` wrote in `folder` (each run names its own, --name; the dates in their
    JSON say which is newest), None where it has none."""
    pages = []
    for record in folder.glob("*.json"):
        data = json.loads(record.read_text())
        date = data.get("date") if isinstance(data, dict) else None
        if isinstance(date, str) and "lm" in data and record.with_suffix(".md").is_file():
            pages.append((date, record.with_suffix(".md")))
    return max(pages)[1] if pages else None


def robustness(folder: Path, out: Path) -> tuple[str, str] | None:
    """The robustness benchmark's tables (`scripts/bench/robustness.py`), rendered from its robustness.json by its own
    `bench.robustness_report.markdown`, as a section of the page in `out` (headings one level down); None where
    `folder` has no robustness.json."""
    record = folder / "robustness.json"
    if not record.is_file():
        return None
    from bench.robustness_report import markdown  # noqa: PLC0415 (its renderer, only where its figures are)
    lines = [("#" + line if line.startswith("#") else line) for line in markdown(json.loads(record.read_text()))[1:]]
    if (folder / "robustness.png").is_file():
        lines.append(f"![ratio to clean per condition]({os.path.relpath(folder / 'robustness.png', out)})")
    shown = record.resolve().relative_to(ROOT) if record.resolve().is_relative_to(ROOT) else record
    return f"14. Robustness (`{shown}`)", "\n".join(lines).strip() + "\n"
