"""Find figures in the docs that belong to a model no longer shipped without saying so.

    python scripts/check_figures.py        # one line per problem (FILE:LINE: why: the paragraph's start); exit 1 if any

`docs/figures.json` names the shipped default (its file's sha256, the date it shipped, its headline figures) and the
models that shipped before it (the names the docs call each by, and figures of theirs that identify them). The
docs are README.md, docs/*.md and asr/pretrained/MODEL_CARD.md, read as paragraphs (blocks between blank lines; a
table or a code block also reads the paragraph just before it, its caption), each with the headings above it:

1. the shipped file's sha256 is the registry's (a new default makes the registry, and so this check, current);
2. the shipped default's headline figures are in README.md and the model card;
3. a paragraph with a figure (a %, MB, GB or ms value, or a number with two decimals) whose newest date is before the
   shipped default's date was measured on another model: it, or a heading above it, names the model that shipped on
   that date (the registry's `shipped` ranges), or says it is a model that never shipped (a probe, a candidate);
4. a paragraph quoting a figure the registry lists for a retired model names that model and carries a date.

A paragraph without a date is not held to rule 3: date every figure you add.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "docs" / "figures.json"
FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|MB|GB|ms)(?!\w)|(?<![\w.-])\d+\.\d\d(?![\d.])")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the block's start
    text: str
    headings: list[str] = field(default_factory=list)  # the headings it sits under, outermost first
    caption: str = ""  # a table's or code block's preceding paragraph

    @property
    def context(self) -> str:
        return "\n".join([*self.headings, self.caption, self.text])

    def where(self) -> str:
        first = " ".join(self.text.split())[:100]
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}: {first}"


def blocks(path: Path) -> list[Block]:
    """The file's paragraphs (code blocks whole), each with its headings and, for a table or code block, its caption."""
    out: list[Block] = []
    headings: list[tuple[int, str]] = []
    lines: list[str] = []
    start, fence = 0, False

    def close() -> None:
        nonlocal lines
        if lines:
            text = "\n".join(lines)
            caption = out[-1].text if out and text.lstrip().startswith(("|", "```")) else ""
            out.append(Block(path, start, text, [h for _, h in headings], caption))
        lines = []

    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            if not fence:
                close()
                start = number
            fence = not fence
            lines.append(line)
            if not fence:
                close()
            continue
        if fence:
            lines.append(line)
        elif (heading := re.match(r"(#+)\s+(.*)", line)):
            close()
            level = len(heading.group(1))
            headings = [(lv, h) for lv, h in headings if lv < level] + [(level, heading.group(2))]
        elif not line.strip():
            close()
        else:
            if not lines:
                start = number
            lines.append(line)
    close()
    return out


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "asr" / "pretrained" / "MODEL_CARD.md"]


def names(context: str, labels: list[str]) -> bool:
    lowered = context.lower()
    return any(label.lower() in lowered for label in labels)


def shipped_on(retired: dict, date: str) -> list[str]:
    """The retired models that were the shipped default on `date` (two on the day one replaced the other)."""
    return [model for model, info in retired.items() if info["shipped"]["from"] <= date <= info["shipped"]["to"]]


def problems(registry: dict, docs: list[Path], root: Path = ROOT) -> list[str]:
    """Every breach of the four rules (see the module's docstring), one line each."""
    shipped, retired = registry["shipped"], registry["retired"]
    never = registry.get("never shipped", {}).get("labels", [])
    found = []
    digest = hashlib.sha256((root / shipped["file"]).read_bytes()).hexdigest()
    if digest != shipped["sha256"]:
        found.append(f"{shipped['file']}: sha256 {digest} is not {REGISTRY.name}'s ({shipped['sha256']}): a new "
                     "default ships; update docs/figures.json (move the old one to 'retired') and the figures")
    texts = {path.name: path.read_text(encoding="utf-8") for path in docs}
    for what, figure in shipped["figures"].items():
        for name in ("README.md", "MODEL_CARD.md"):
            if name in texts and not re.search(rf"(?<![\d.]){re.escape(figure)}(?!\d)", texts[name]):
                found.append(f"{name}: the shipped default's {what} ({figure}) is not in it")
    for path in docs:
        for block in blocks(path):
            context = block.context
            dates = DATE.findall(context)
            if FIGURE.search(block.text) and dates and max(dates) < shipped["since"]:
                then = shipped_on(retired, max(dates))
                if not any(names(context, retired[model]["labels"]) for model in then) and not names(context, never):
                    found.append(f"{block.where()} -- figures dated {max(dates)}, before {shipped['name']} shipped "
                                 f"({shipped['since']}): name the model they were measured on "
                                 f"({' or '.join(then) or 'none in the registry shipped then'})")
            for model, info in retired.items():
                quoted = [f for f in info["figures"] if re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", block.text)]
                if quoted and not (names(context, info["labels"]) and dates):
                    found.append(f"{block.where()} -- {', '.join(quoted)} is {model}'s: name it "
                                 f"({' / '.join(info['labels'][:2])}) and date it")
    return found


def main() -> int:
    found = problems(json.loads(REGISTRY.read_text()), documents())
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
