"""The word LM of the native-speech A/B: the training side of the text pool and every transcript of the
mixture's real corpora, nothing of a dev set.

    python recipes/native/lm.py --out data/lm/native.arpa [--experiment native_continue] [--data-root DIR]

Its text is `data/synthetic/train_text.txt` (recipes/synthetic/prepare.py writes it: the pool's training
side, where a text file holding any dev transcript is left out whole) and the transcripts of the
experiment's sources under `data.root` (speechocean762 train, the FSDD train split, LibriSpeech, VCTK), with
their `split` and `speakers_out` applied, so a held-out speaker's words stay out too. The synthetic
manifests are renderings of the pool's sentences and add nothing. A trigram with n-grams seen once
unlisted (`--min-count 2`), as the bundled LM.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402
from asr.training.acoustic.config import compose_config  # noqa: E402
from asr.training.lm.build import build_arpa, read_sentences  # noqa: E402


def real_sources(experiment: str, data_root: Path) -> list:
    """The experiment's training sources that lie under data_root (the composed Hydra config's)."""
    cfg = compose_config([f"experiment={experiment}", f"data.root={data_root}"])
    return [s for s in cfg.data.train if Path(s.manifest).resolve().is_relative_to(data_root.resolve())]


def sentences(experiment: str, data_root: Path, pool: Path) -> list[str]:
    """The LM's normalised sentences: the text pool's training side, then each real source's transcripts."""
    found = read_sentences(pool)
    for source in real_sources(experiment, data_root):
        rows = read_manifest(source.manifest, source.split)
        kept = [normalize(u.text) for u in rows if u.speaker not in set(source.speakers_out)]
        print(f"lm: {source.manifest}: {len(kept)} transcripts", file=sys.stderr)
        found += [s for s in kept if s]
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="ARPA file to write")
    p.add_argument("--experiment", default="native_continue", help="the mixture whose real transcripts it reads")
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--pool", type=Path, default=ROOT / "data" / "synthetic" / "train_text.txt",
                   help="the text pool's training side (recipes/synthetic/prepare.py --text-only writes it)")
    p.add_argument("--min-count", type=int, default=2)
    a = p.parse_args(argv)
    if not a.pool.is_file():
        p.error(f"--pool {a.pool}: no such file (python recipes/synthetic/prepare.py --text-only writes it)")
    text = sentences(a.experiment, a.data_root, a.pool)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(build_arpa(text, order=3, min_count=a.min_count), encoding="utf-8")
    print(f"lm: {len(text)} sentences -> {a.out} ({a.out.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
