"""The package's layout, read from its source without importing it: no import circle (in the package nor in scripts/),
nothing on the inference path imports `asr.training` or the developer tools, the onnx path never imports torch, the
top level holds only the entry points, the API and one subpackage a stage, and `asr.training` is a folder per trained
thing, each with its README.

Every `import` and `from ... import` statement of every module under asr/ is an edge: at module level (run when
the module loads), inside a function (run when it is called) or under `if TYPE_CHECKING:` (read by type checkers).
A circle counts edges of every kind; the onnx path follows what loads with a module (module level, and the
packages above it), since the torch backend is only imported inside the function that chooses it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import ROOT

PACKAGE = ROOT / "asr"
ENTRY_POINTS = ("stream", "transcribe", "evaluate", "serve", "export", "manifest")  # python -m asr.X
TRAINING_SIDE = ("asr.training", "asr.finetune")  # off the inference path: they may import anything, the rest not them
DEVELOPER_TOOLS = ("asr.tools", "scripts", "bench", "recipes")  # benches and recipes live outside the package
TORCH_STACK = ("torch", "torchaudio", "lightning", "safetensors.torch", "onnx", "hydra")  # none of it is in [onnx]
ONNX_PATH = ("asr.model.onnx_backend", "asr.api", "asr.cli", "asr.server.worker",  # a worker imports its app when it runs
             *(f"asr.{name}" for name in ENTRY_POINTS))
MAX_TOP_LEVEL = 20  # entries of asr/ besides __init__.py
SCRIPTS = ROOT / "scripts"  # on sys.path when a script runs: its modules are `benchmark`, `bench.serve`...
TRAINING = PACKAGE / "training"
TRAINING_SHARED = {  # the modules of asr/training's own folder, and why each is there rather than in a trained thing's
    "__init__.py": "the package: which folder trains what",
    "__main__.py": "python -m asr.training experiment=NAME, the acoustic model's Hydra entry point that every recipe, "
                   "doc and carried run calls",
    "hardware.py": "the machine training runs on: acoustic/train.py, lm/neural.py and recipes/voices/continue.py",
    "recipe.py": "a recipe's resumable steps, for any trained thing (recipes/mixture/reproduce.py, "
                 "recipes/voices/probes.py)",
}
TRAINED = {  # a folder per trained thing -> the rest of asr.training it imports
    "acoustic": {"hardware"},  # the acoustic model (python -m asr.training)
    "lm": {"hardware"},  # the word LMs: n-gram, its tuning, the second pass's neural LM
    "g2p": set(),  # the pronunciation lexicon and the G2P
    "restorer": {"acoustic"},  # casing and punctuation; the acoustic trainer's optimiser config and schedule
    "finetune": {"acoustic", "lm"},  # python -m asr.finetune: the acoustic model fine-tuned, its word LM mixed
}


@dataclass(frozen=True)
class Edge:
    source: str  # the importing module
    target: str  # an imported module: one of the package's, or any other (torch, numpy...)
    when: str  # "load" (module level), "call" (inside a function) or "typing" (under TYPE_CHECKING)
    line: int


def modules(package: Path, root: Path | None = None) -> dict[str, Path]:
    """Dotted name -> file, for every module under `package` (a package is named by its __init__.py), named from
    `root`, the folder on sys.path (the package's parent unless given)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent if root is None else root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.Module):
    """(import statement, when) for every import in the module, wherever it stands."""
    def walk(nodes: list[ast.stmt], when: str):
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node, when
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(node.body, "call" if when == "load" else when)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from walk(node.body, "typing")
                yield from walk(node.orelse, when)
            else:
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    children = getattr(node, field, None) or []
                    for child in children:
                        body = child.body if isinstance(child, (ast.ExceptHandler, ast.match_case)) else [child]
                        yield from walk(body, when)
    yield from walk(tree.body, "load")


def edges(package: Path, root: Path | None = None) -> list[Edge]:
    """Every import of every module under `package` (named from `root`, as `modules`), resolved to the modules it
    names."""
    known = modules(package, root)
    out = []
    for name, path in known.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]  # for relative imports
        for node, when in _statements(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
                named = len(submodules) < len(node.names)  # some name is the module's own (a class, a constant)
                targets = submodules + ([base] if named or not submodules else [])
            out.extend(Edge(name, target, when, node.lineno) for target in targets)
    return out


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def cycles(found: list[Edge], known: set[str]) -> list[list[str]]:
    """The import circles among `known` modules (strongly connected groups of more than one), each sorted. A
    module's import of a package above it is no edge: that package has loaded before it, whatever it imports."""
    graph: dict[str, set[str]] = {name: set() for name in known}
    for edge in found:
        if edge.target in known and edge.target != edge.source and not edge.source.startswith(edge.target + "."):
            graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def leaks(found: list[Edge]) -> list[str]:
    """Imports of the training side or of developer tools by a module outside the training side, of any kind."""
    return [f"{e.source}:{e.line} imports {e.target} ({e.when})" for e in found
            if not within(e.source, TRAINING_SIDE) and within(e.target, TRAINING_SIDE + DEVELOPER_TOOLS)]


def loaded_with(roots: tuple[str, ...], found: list[Edge], known: set[str]) -> set[str]:
    """The package's modules that load when `roots` load: module-level imports, followed, and every package above
    each module (its __init__ runs first)."""
    by_source: dict[str, set[str]] = {}
    for edge in found:
        if edge.when == "load":
            by_source.setdefault(edge.source, set()).add(edge.target)
    seen, todo = set(), [root for root in roots if root in known]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo.extend(t for t in [*by_source.get(name, ()), *parents] if t in known)
    return seen


def torch_on_onnx_path(found: list[Edge], known: set[str], roots: tuple[str, ...] = ONNX_PATH) -> list[str]:
    """Imports of the torch stack that run on the onnx path: at module level in anything that loads with `roots`,
    and anywhere in the onnx backend itself (what it imports when a graph loads)."""
    path = loaded_with(roots, found, known)
    return [f"{e.source}:{e.line} imports {e.target} ({e.when})" for e in found
            if within(e.target, TORCH_STACK) and e.when != "typing"
            and ((e.source in path and e.when == "load") or e.source == "asr.model.onnx_backend")]


@pytest.fixture(scope="module")
def package() -> tuple[list[Edge], set[str]]:
    return edges(PACKAGE), set(modules(PACKAGE))


def test_no_import_circle(package: tuple[list[Edge], set[str]]) -> None:
    found, known = package
    assert cycles(found, known) == []


def test_no_import_circle_in_the_scripts() -> None:
    """scripts/*.py and the `bench` package they share (scripts/bench/), named as a script sees them."""
    found, known = edges(SCRIPTS, SCRIPTS), set(modules(SCRIPTS, SCRIPTS))
    assert {"benchmark", "bench", "bench.serve", "bench.soak"} <= known
    assert cycles(found, known) == []


def trained_thing(module: str) -> str | None:
    """The part of asr.training a module is in: a folder's name, a shared module's, or None outside it."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["asr", "training"] and len(parts) > 2 else None


def test_training_is_a_folder_per_trained_thing(package: tuple[list[Edge], set[str]]) -> None:
    """asr/training holds the shared modules and one folder per trained thing, each with a README that names its
    modules; a folder imports only the parts of asr.training that TRAINED gives it."""
    entries = {p.name for p in TRAINING.iterdir() if p.name != "__pycache__" and _holds_files(p)}
    assert entries - set(TRAINED) == set(TRAINING_SHARED), "loose modules: put each in its trained thing's folder"
    assert entries >= set(TRAINED)
    folders = [p for name in TRAINED for p in [TRAINING / name, *(TRAINING / name).rglob("*")]
               if p.is_dir() and p.name != "__pycache__" and _holds_files(p)]
    for folder in folders:
        assert (folder / "__init__.py").is_file(), folder
        readme = (folder / "README.md").read_text()
        unnamed = [p.name for p in folder.glob("*.py") if p.name != "__init__.py" and p.name not in readme]
        assert not unnamed, f"{folder.relative_to(ROOT)}/README.md does not name {unnamed}"
    found, _ = package
    imports: dict[str, set[str]] = {}
    for edge in found:
        source, target = trained_thing(edge.source), trained_thing(edge.target)
        if source in TRAINED and target and target != source:
            imports.setdefault(source, set()).add(target)
    assert {name: imports.get(name, set()) for name in TRAINED} == TRAINED


def test_inference_path_imports_neither_training_nor_developer_tools(package: tuple[list[Edge], set[str]]) -> None:
    found, _ = package
    assert leaks(found) == []


def test_onnx_path_never_imports_torch(package: tuple[list[Edge], set[str]]) -> None:
    found, known = package
    path = loaded_with(ONNX_PATH, found, known)
    assert {"asr.model.onnx_backend", "asr.model.recognizer", "asr.decoding.decoder", "asr.server.app"} <= path
    assert "asr.model.torch_backend" not in path and "asr.model.encoder" not in path  # torch: chosen inside a call
    assert torch_on_onnx_path(found, known) == []


def _holds_files(path: Path) -> bool:
    """A file, or a folder with a file outside __pycache__ (what an old checkout leaves of a moved folder)."""
    if path.is_file():
        return path.suffix != ".pyc"
    return any(p.is_file() and "__pycache__" not in p.parts for p in path.rglob("*"))


def test_top_level_is_entry_points_api_and_one_subpackage_a_stage() -> None:
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__init__.py" and _holds_files(p))
    assert len(entries) <= MAX_TOP_LEVEL, entries
    for name in ENTRY_POINTS:  # python -m asr.X for each, and its console script's main
        source = (PACKAGE / f"{name}.py").read_text()
        assert "\ndef main(" in source and 'if __name__ == "__main__":' in source, name
    assert "tools" not in entries  # developer tools live in scripts/bench/


def _fake_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "asr"


def test_the_checks_catch_a_circle_a_training_import_and_torch_on_the_onnx_path(tmp_path: Path) -> None:
    """The same checks on a small made-up package, which breaks each rule once (and keeps to it once)."""
    fake = _fake_package(tmp_path, {
        "asr/__init__.py": "",
        "asr/api.py": "from asr.model import onnx_backend\n",
        "asr/audio/__init__.py": "SAMPLE_RATE = 16000\n",
        "asr/audio/files.py": "from asr.audio import SAMPLE_RATE\n",  # its own package: no circle
        "asr/model/__init__.py": "",
        "asr/model/onnx_backend.py": "import numpy\nfrom . import errors\n\ndef load():\n    import torch\n",
        "asr/model/errors.py": "from typing import TYPE_CHECKING\n"
                               "if TYPE_CHECKING:\n    from asr.model.onnx_backend import x\n",
        "asr/model/torch_backend.py": "import torch\n",  # not on the onnx path: nothing loads it at module level
        "asr/decoding/__init__.py": "",
        "asr/decoding/beam.py": "from asr.decoding.biasing import Biasing\n",
        "asr/decoding/biasing.py": "def f():\n    from asr.decoding import beam\n",  # a circle through a function
        "asr/decoding/lm.py": "from asr.training.lm import build\n",  # the inference path importing training
        "asr/training/__init__.py": "",
        "asr/training/lm.py": "import torch\nfrom asr.decoding import beam\n",  # the training side may
    })
    found, known = edges(fake), set(modules(fake))
    assert cycles(found, known) == [["asr.decoding.beam", "asr.decoding.biasing"],
                                    ["asr.model.errors", "asr.model.onnx_backend"]]  # a TYPE_CHECKING import counts
    assert leaks(found) == ["asr.decoding.lm:1 imports asr.training.lm (load)"]
    assert loaded_with(("asr.api",), found, known) == {"asr", "asr.api", "asr.model", "asr.model.onnx_backend",
                                                        "asr.model.errors"}
    assert torch_on_onnx_path(found, known, ("asr.api",)) == ["asr.model.onnx_backend:5 imports torch (call)"]
