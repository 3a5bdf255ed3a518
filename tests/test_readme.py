"""The Python examples of the README and docs/usage.md run as printed (on a shipped example instead of talk.*), and
every path the README names is in the repository, its layout block the tree as it is."""
from __future__ import annotations

import glob
import re
import subprocess

from asr.audio.files import load_audio
from asr.audio.resample import resample
from helpers import ROOT

AUDIO = ROOT / "asr" / "examples" / "synthetic_slt.flac"


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.S)


def run(example: str, page: str, **names) -> None:
    code = example.replace('"talk.m4a"', repr(str(AUDIO))).replace('"talk.wav"', repr(str(AUDIO)))
    exec(compile(code, page, "exec"), dict(names))


def test_the_readme_first_example_prints_cased_text(capsys) -> None:
    example = python_blocks("README.md")[0]
    assert "asr.load()" in example  # the first screen's one-liner
    run(example, "README.md")
    text = capsys.readouterr().out.strip()
    assert text and text[0].isupper() and text != text.upper()


def test_the_api_example_runs(capsys) -> None:
    example = next(b for b in python_blocks("docs/usage.md") if "asr.load()" in b)
    run(example, "docs/usage.md", samples=resample(load_audio(AUDIO), 16000, 48000))
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] and lines[0][0].isupper()  # the cased text
    assert any(line.startswith("partial ") for line in lines) and lines[-1][0].isupper()  # the stream's final


def test_the_low_level_loop_runs(capsys) -> None:
    example = next(b for b in python_blocks("docs/usage.md") if "Decoder.load" in b)
    run(example, "docs/usage.md")
    lines = capsys.readouterr().out.strip().splitlines()
    partials, final = lines[:-1], lines[-1]
    assert len(partials) == 6  # one per 500 ms chunk of the 2.95 s example
    text, words = final.split(" [", 1)  # the final's text, then its words with their times
    assert re.findall(r"Word\(word='([A-Z']+)', start=", words) == text.split()


def test_the_docs_command_examples_step_in_chunks_the_bundled_model_takes() -> None:
    """`--compare-offline --chunk-ms 130` was shown, and the bundled model refuses chunks under its lookahead."""
    from asr.model.recognizer import Recognizer
    lookahead = Recognizer.load().lookahead_ms
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    shown = [(page.name, float(ms)) for page in pages
             for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S)
             for line in block.splitlines() if "--model" not in line  # another model, another chunk
             for ms in re.findall(r"--chunk-ms (\d+(?:\.\d+)?)", line)]
    assert shown and all(ms >= lookahead for _, ms in shown), (lookahead, shown)


TOP = ("asr", "scripts", "tests", "docs", "recipes", "benchmarks", "conf", ".ci")  # the repository's own folders
NAMED = re.compile(rf"(?<![\w./~$-])((?:{'|'.join(re.escape(t) for t in TOP)})/[\w./*-]*)")
EXTENSIONS = ("py", "sh", "md", "yaml", "json", "jsonl", "safetensors", "arpa.gz", "klm", "onnx", "flac", "png")
FILE = rf"[\w-]+(?:\.[\w-]+)*\.(?:{'|'.join(re.escape(e) for e in EXTENSIONS)})"  # a name with a known extension
ENTRY = re.compile(rf"(?<![\w./-])({FILE}|[\w-]+/)(?![\w/-])")  # a file or folder name standing alone


def ignored(path: str) -> bool:
    """Whether git ignores the path: something the tools make (.venv/, data/, runs/), not a file of the repository."""
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0


def test_every_repository_path_the_readme_names_is_there() -> None:
    """Links (but the web's), and the repository paths in backticks and code blocks."""
    page = (ROOT / "README.md").read_text()
    links = {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", page)
             if not re.match(r"\w+:", target) and not target.startswith("#")}
    quoted = {m.rstrip(".:,;") for span in re.findall(r"```.*?```|`[^`\n]+`", page, flags=re.S)
              for m in NAMED.findall(span)}
    assert links and quoted
    missing = sorted(p for p in links | quoted if not glob.glob(str(ROOT / p)) and not ignored(p))
    assert not missing, f"README.md names paths that are not in the repository: {missing}"


def layout() -> dict[str, str]:
    """The README's layout block: folder -> the text of its lines (a line that starts with a name ending in / opens
    it; the lines indented under it go on with it)."""
    page = (ROOT / "README.md").read_text()
    block = re.search(r"## Layout\n.*?```\n(.*?)```", page, flags=re.S).group(1)
    folders: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        if line and not line[0].isspace():
            current, line = line.split(maxsplit=1)[0], line.split(maxsplit=1)[1] if " " in line.strip() else ""
            assert current.endswith("/"), f"the layout's line {current!r} does not open a folder"
        folders[current] = folders.get(current, "") + " " + line
    return folders


def test_the_readme_layout_is_the_tree() -> None:
    """Every name the layout gives a folder is in that folder, every folder of the repository and every module of
    the package has its place, and every script and recipe is named."""
    folders = layout()
    wrong = [f"{folder}{name}" for folder, text in folders.items() for name in ENTRY.findall(text)
             if not (ROOT / folder / name).exists()]
    assert not wrong, f"the README's layout names what is not there: {wrong}"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    top = {f"{path.split('/')[0]}/" for path in tracked if "/" in path}
    assert top <= set(folders), f"folders the layout leaves out: {sorted(top - set(folders))}"
    named = {folder: set(ENTRY.findall(text)) for folder, text in folders.items()}
    modules = [path.relative_to(ROOT) for path in (ROOT / "asr").rglob("*.py")
               if path.name != "__init__.py" and "__pycache__" not in path.parts]
    unnamed = [str(m) for m in modules if m.name not in named.get(f"{m.parent}/", set())]
    assert not unnamed, f"modules the README's layout does not name (under their folder's line): {unnamed}"
    scripts = [p.name for p in (ROOT / "scripts").iterdir() if p.suffix in (".py", ".sh")]
    recipes = [f"{p.name}/" for p in (ROOT / "recipes").iterdir() if p.is_dir() and p.name != "__pycache__"]
    left_out = [f"scripts/{n}" for n in scripts if n not in named["scripts/"]]
    left_out += [f"recipes/{n}" for n in recipes if n not in named["recipes/"]]
    assert not left_out, f"the README's layout leaves out: {left_out}"
