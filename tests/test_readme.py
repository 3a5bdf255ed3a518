"""The Python examples of the README and docs/usage.md run as printed (on a shipped example instead of talk.*)."""
from __future__ import annotations

import re

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
