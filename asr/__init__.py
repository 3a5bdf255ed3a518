"""asr: streaming English speech recognition with a sliding-window causal Transformer and CTC."""
import os

# numpy's OpenBLAS starts a thread per core when it loads, and after each small matrix product (the
# log-mel filterbank of a chunk) those threads spin waiting for more. The runtime is one thread per
# stream by design (`--threads`), so it keeps numpy's BLAS to one thread unless told otherwise; this has
# to happen before numpy loads. Measured 2026-11-27 on 2 cores: `asr.transcribe` of the two examples took
# 1.68 s of user CPU with numpy's default and 1.22 s with this; each `asr.serve` worker (2 workers, 40
# clients) had, beside its model thread, an OpenBLAS thread busy 38-41% of a core.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def load(model=None, **options):
    """A model ready to transcribe files and arrays and to stream live audio: `asr.api.load`, which lists its
    options (the command-line flags of the same names).

        import asr
        print(asr.load().transcribe("talk.m4a").text)
    """
    from asr import api  # imported on first use: `import asr.audio` alone stays light
    return api.load(model, **options)
