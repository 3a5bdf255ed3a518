"""The README's Python example runs as printed (on a shipped example instead of talk.wav)."""
from __future__ import annotations

import re

from helpers import ROOT


def test_readme_python_example_runs(capsys) -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    example = next(b for b in blocks if "Decoder.load" in b)
    audio = ROOT / "asr" / "examples" / "synthetic_slt.flac"
    exec(compile(example.replace('"talk.wav"', repr(str(audio))), "README.md", "exec"), {})
    lines = capsys.readouterr().out.strip().splitlines()
    partials, final = lines[:-1], lines[-1]
    assert len(partials) == 6  # one per 500 ms chunk of the 2.95 s example
    text, words = final.split(" [", 1)  # the final's text, then its words with their times
    assert text and re.findall(r"Word\(word='([A-Z']+)', start=", words) == text.split()
