"""No figure in README.md, docs/ or the model card belongs to a model other than the shipped default unless it says so
(scripts/check_figures.py, docs/figures.json); and the check finds each kind of figure it is there for."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from helpers import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import check_figures  # noqa: E402


def test_every_figure_in_the_docs_is_the_shipped_models_or_says_whose() -> None:
    registry = json.loads(check_figures.REGISTRY.read_text())
    assert check_figures.problems(registry, check_figures.documents()) == []


def fake_project(tmp_path: Path, page: str, readme: str = "28.52 on dev (2026-12-03).") -> tuple[dict, list[Path]]:
    """A project with a shipped model file, a registry, README.md, a model card and docs/page.md holding `page`."""
    (tmp_path / "docs").mkdir(parents=True)
    (tmp_path / "asr" / "pretrained").mkdir(parents=True)
    (tmp_path / "model.bin").write_bytes(b"the shipped weights")
    (tmp_path / "README.md").write_text(readme + "\n")
    (tmp_path / "asr" / "pretrained" / "MODEL_CARD.md").write_text("# Card\n\nIt scores 28.52 (2026-12-03).\n")
    (tmp_path / "docs" / "page.md").write_text(page)
    registry = {
        "shipped": {"name": "the new model", "file": "model.bin", "since": "2026-12-03", "figures": {"dev WER": "28.52"},
                    "sha256": hashlib.sha256(b"the shipped weights").hexdigest()},
        "retired": {"the old model": {"shipped": {"from": "2026-12-01", "to": "2026-12-03"}, "labels": ["old model"],
                                      "figures": ["48.16"]},
                    "the first model": {"shipped": {"from": "2026-11-20", "to": "2026-12-01"},
                                        "labels": ["first model"], "figures": []}},
        "never shipped": {"labels": ["probe"]}}
    return registry, check_figures.documents(tmp_path)


def found(tmp_path: Path, page: str, **kwargs: str) -> list[str]:
    registry, docs = fake_project(tmp_path, page, **kwargs)
    return check_figures.problems(registry, docs, tmp_path)


def test_a_clean_page_passes_and_a_new_model_file_is_caught(tmp_path: Path) -> None:
    registry, docs = fake_project(tmp_path, "# Speed\n\nA chunk costs 19.0 ms (2026-12-03).\n")
    assert check_figures.problems(registry, docs, tmp_path) == []
    (tmp_path / "model.bin").write_bytes(b"other weights")
    assert "a new default ships" in " ".join(check_figures.problems(registry, docs, tmp_path))


def test_the_shipped_figures_must_be_in_the_readme(tmp_path: Path) -> None:
    problems = found(tmp_path, "", readme="Good enough (2026-12-03).")
    assert problems == ["README.md: the shipped default's dev WER (28.52) is not in it"]


def test_figures_dated_before_the_shipped_model_must_name_the_model_then(tmp_path: Path) -> None:
    stale = "# Memory\n\nPeak RSS 151-219 MB (2026-12-02).\n"
    problems = found(tmp_path, stale)
    assert len(problems) == 1 and "docs/page.md:3:" in problems[0] and "(the old model)" in problems[0]


def test_the_right_label_in_the_paragraph_or_a_heading_passes_and_the_wrong_one_does_not(tmp_path: Path) -> None:
    for i, page in enumerate(["Peak RSS 151 MB with the old model (2026-12-02).\n",
                              "# The old model's costs\n\nPeak RSS 151 MB (2026-12-02).\n",
                              "A probe's peak RSS: 151 MB (2026-12-02).\n",
                              "Peak RSS 151 MB with the old model (2026-12-02).\n\n| set | MB |\n|---|---|\n| a | 151 |\n"]):
        assert found(tmp_path / str(i), page) == [], page
    wrong = found(tmp_path / "wrong", "Peak RSS 151 MB with the first model (2026-12-02).\n")
    assert len(wrong) == 1 and "name the model they were measured on (the old model)" in wrong[0]


def test_a_retired_models_figure_must_name_it_and_be_dated(tmp_path: Path) -> None:
    for i, page in enumerate(["Dev WER is 48.16% with no list.\n",  # the hotwords paragraph of issue 79, undated
                              "Dev WER is 48.16% with the old model.\n",  # named, undated
                              "| set | WER |\n|---|---|\n| dev | 48.16 |\n"]):  # a table without a caption
        problems = found(tmp_path / str(i), page)
        assert len(problems) == 1 and "48.16 is the old model's" in problems[0], page
    assert found(tmp_path / "ok", "The old model: dev 48.16 (2026-12-02).\n") == []
