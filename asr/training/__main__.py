"""python -m asr.training experiment=NAME [overrides]: compose the config from conf/ and train."""
import os

# One BLAS/OpenMP thread in each process unless told otherwise, set before numpy and torch load: each loader
# process (data.num_workers) would otherwise start a BLAS thread per core, and they starve the main process
# (an H100 machine with 16 cores, 2026-11-27: 14 loader processes gave 426 steps in 7 min; 12 with one
# thread each, 1636 steps in 2.5 min).
# The main process's own torch threads are set from the config (`threads`).
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import sys  # noqa: E402

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from asr.corpus.manifest import ManifestError  # noqa: E402
from asr.text.g2p import G2PError  # noqa: E402
from asr.text.lexicon import LexiconError  # noqa: E402
from asr.training.acoustic.train import train  # noqa: E402


@hydra.main(config_path="../../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        train(cfg)
    except (ManifestError, LexiconError, G2PError) as err:  # a missing manifest, a broken line, unreadable audio,
        sys.exit(f"asr.training: error: {err}")             # a phone model's missing lexicon: one line, no traceback


main()
