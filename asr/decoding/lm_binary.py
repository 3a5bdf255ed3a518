"""A word LM's fast form: KenLM's binary format, which KenLM memory-maps instead of parsing the ARPA text.

KenLM (and so flashlight's wrapper) reads either form and tells them apart itself; the scores are the same (the
"trie" structure stores the ARPA's probabilities and back-offs as they are, unquantised). The ARPA stays the
source: the LM build and a fine-tune's mixing read and write ARPA, and this module converts it with KenLM's own
`build_binary`, which `scripts/build_kenlm.sh` compiles from kenlm's source distribution (scripts/setup.sh runs it).

    python -m asr.decoding.lm_binary lm.arpa.gz          # writes lm.klm (and lm.klm.json) beside it

Where the search looks for an ARPA's binary (`fast_form`): beside it (`X.arpa.gz` -> `X.klm`, as the bundled LM and
a fine-tuned folder ship it), then in the cache (`cache_dir()`); where neither matches the ARPA and `build_binary`
is installed, it converts an ARPA of `CONVERT_FROM` bytes or more into the cache on first use; where it is not, KenLM reads the ARPA as before.
A binary matches its ARPA when its stamp (`X.klm.json`: the ARPA's size and a digest of its first and last MiB)
says so, so a replaced ARPA is never scored with an old binary.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from asr.pretrained import cache_dir, path_key

TOOL = "build_binary"
SUFFIX = ".klm"
MAGIC = b"mmap lm "  # how a KenLM binary file starts
_SAMPLE = 1 << 20  # bytes read from each end of the ARPA for its stamp
CONVERT_FROM = 4 << 20  # ARPA files this large or larger are converted on first use; KenLM parses a smaller one in
# well under a second, and the cache does not fill with a binary of every small test LM


class LMError(ValueError):
    """A word LM file that cannot be used; the message names the file and the reason."""


def open_kenlm(lm: Path, words):
    """flashlight's KenLM over `lm` (its fast form: `fast_form`), its words looked up by the labels of `words` (a
    flashlight Dictionary); LMError where KenLM cannot read the file."""
    from flashlight.lib.text.decoder.kenlm import KenLM  # noqa: PLC0415 (the search's, loaded with it)

    try:
        with _quiet_stderr():
            return KenLM(str(fast_form(Path(lm))), words)
    except RuntimeError as err:
        raise LMError(f"{lm}: KenLM cannot read it ({str(err).splitlines()[0][:200]})") from None


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (KenLM draws a progress bar on it while it reads)."""
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def is_binary(path: Path) -> bool:
    """Whether `path` is a KenLM binary (rather than ARPA text, plain or gzipped)."""
    with open(path, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def stamp(arpa: Path) -> str:
    """The ARPA's identity, cheap to take at every load: its size and a digest of its first and last MiB (the
    header's n-gram counts and the last n-grams)."""
    size = arpa.stat().st_size
    digest = hashlib.blake2b(digest_size=16)
    with open(arpa, "rb") as f:
        digest.update(f.read(_SAMPLE))
        f.seek(max(size - _SAMPLE, 0))
        digest.update(f.read(_SAMPLE))
    return f"{size}-{digest.hexdigest()}"


def beside(arpa: Path) -> Path:
    """The binary's place beside its ARPA: lm.arpa.gz, lm.arpa -> lm.klm."""
    name = arpa.name.removesuffix(".gz").removesuffix(".arpa")
    return arpa.with_name(name + SUFFIX)


def cached(arpa: Path) -> Path:
    """The binary's place in the cache, one per ARPA path."""
    return cache_dir() / "lm" / f"{arpa.name.removesuffix('.gz').removesuffix('.arpa')}-{path_key(arpa)}{SUFFIX}"


def forget(arpa: Path) -> None:
    """Remove the cached binary of `arpa` (one about to be deleted), if there is one."""
    for path in (cached(arpa), _stamp_file(cached(arpa))):
        path.unlink(missing_ok=True)


def find_tool(name: str = TOOL) -> Path | None:
    """One of KenLM's tools (build_binary, lmplz): beside this Python (a venv's bin/, where scripts/build_kenlm.sh
    puts them), else on PATH."""
    here = Path(sys.executable).parent / name
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which(name)
    return Path(found) if found else None


def _stamp_file(binary: Path) -> Path:
    return binary.with_name(binary.name + ".json")


def matches(binary: Path, arpa_stamp: str) -> bool:
    """Whether `binary` exists and was built from the ARPA whose stamp is `arpa_stamp`."""
    try:
        return binary.is_file() and json.loads(_stamp_file(binary).read_text())["arpa"] == arpa_stamp
    except (OSError, ValueError, KeyError, TypeError):
        return False


def write_binary(arpa: Path, out: Path | None = None, tool: Path | None = None, quantized: bool = False) -> Path:
    """Convert `arpa` to KenLM's binary trie at `out` (beside it by default), with its stamp; RuntimeError where
    build_binary is missing or fails. Written under a temporary name first, so a reader never sees half a file.
    `quantized`: probabilities and back-offs in 8 bits each (about half the size; the scores rounded), for the
    second pass's larger LM."""
    arpa, out = Path(arpa), Path(out) if out else beside(Path(arpa))
    tool = tool or find_tool()
    if tool is None:
        raise RuntimeError(f"KenLM's {TOOL} is not installed (bash scripts/build_kenlm.sh builds it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    arpa_stamp = stamp(arpa)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".klm-") as work:
        part = Path(work) / out.name
        # trie: the ARPA's values unquantised (the same scores) unless `quantized` (8 bits each for probabilities
        # and back-offs), -a 64: its pointers compressed as far as they go
        values = ["-q", "8", "-b", "8"] if quantized else []
        done = subprocess.run([str(tool), "-a", "64", *values, "-T", work, "trie", str(arpa), str(part)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{TOOL} failed on {arpa}: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
        _stamp_file(part).write_text(json.dumps({"arpa": arpa_stamp}) + "\n")
        os.replace(part, out)
        os.replace(_stamp_file(part), _stamp_file(out))
    return out


def fast_form(lm: Path) -> Path:
    """The file KenLM should load for the word LM `lm`: its matching binary (beside it, or cached, or converted into
    the cache now where build_binary is installed and the ARPA is large), else `lm` itself (an ARPA KenLM parses, or already a binary)."""
    if is_binary(lm):
        return lm
    arpa_stamp = stamp(lm)
    for candidate in (beside(lm), cached(lm)):
        if matches(candidate, arpa_stamp):
            return candidate
    tool = find_tool()
    if tool is None or lm.stat().st_size < CONVERT_FROM:
        return lm
    try:
        print(f"asr: converting {lm} to KenLM's binary form once, into {cached(lm).parent}", file=sys.stderr)
        return write_binary(lm, cached(lm), tool)
    except (RuntimeError, OSError) as err:  # an unwritable cache, a file build_binary rejects: KenLM reads the ARPA
        print(f"asr: {err}; reading the ARPA instead", file=sys.stderr)
        return lm


def main(argv: list[str] | None = None) -> int:
    import argparse  # noqa: PLC0415 (the command line only)

    parser = argparse.ArgumentParser(prog="python -m asr.decoding.lm_binary", description=__doc__.split("\n\n")[0])
    parser.add_argument("arpa", type=Path, help="an ARPA file (.arpa or .arpa.gz)")
    parser.add_argument("--out", type=Path, help="the binary to write (default: beside the ARPA, .klm)")
    args = parser.parse_args(argv)
    try:
        out = write_binary(args.arpa, args.out)
    except (RuntimeError, OSError) as err:
        print(f"asr.decoding.lm_binary: error: {err}", file=sys.stderr)
        return 1
    print(f"{out}: {out.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
