"""asr: streaming English speech recognition with a sliding-window causal Transformer and CTC."""
import os

# numpy's OpenBLAS starts a thread per core when it loads, and after each small matrix product (the
# log-mel filterbank of a chunk) those threads spin waiting for more. The runtime is one thread per
# stream by design (`--threads`), so it keeps numpy's BLAS to one thread unless told otherwise; this has
# to happen before numpy loads. Measured 2026-11-27 on 2 cores: `asr.transcribe` of the two examples
# 1.68 -> 1.22 s of user CPU, and an `asr.serve` worker lost the ~40% of a core its spinning thread took.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
