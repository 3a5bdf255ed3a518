"""Train the second pass's neural word LM (`asr/pretrained/default.rescore.safetensors`) in one resumable command.

    python recipes/lm/neural.py [--data-root ../shared/data] [--work data/lm] [--state recipes/lm/neural/state]
                                [--minutes 60] [--steps 12000] [--from-stage N] [--to-stage N] [--out FILE]

1. text: the books and the in-domain text as normalised sentences, one a line: `recipes/lm/build.py`'s stage 1,
   shared with it (`<work>/text`; nothing of a dev set);
2. vocab: the text's most frequent words, most frequent first, after the boundary and <unk>
   (`<work>/neural/words.txt`, --vocab ids in all);
3. ids: every sentence as word ids after a boundary, one uint16 array (`<work>/neural/ids.npy`, ~90 MB), the
   books first and the in-domain text last (where it starts: `ids.json`);
4. train: `asr.training.lm.neural.train` for --minutes, from the state folder where it holds one (weights, step and
   schedule: the run goes on across working periods), which it writes back every --save-minutes and at the end;
   each save also scores the dev sets' transcripts (perplexity: validation, never trained on) into
   `<state>/log.jsonl`;
5. export: the state's weights in float16 with the config and words, to --out (`asr.decoding.neural_lm` reads it).

Stages 1-3 are skipped where their output exists (--from-stage N redoes N and later); 4 always trains on.
"""
from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from asr.decoding.neural_lm import BOUNDARY, UNK  # noqa: E402
from recipes.lm.build import dev_text, recipe_parser, text_files, text_stages  # noqa: E402


def log(message: str) -> None:
    print(f"neural lm: {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def stage_vocab(work: Path, size: int) -> None:
    counts: Counter = Counter()
    for path in text_files(work):
        with open(path, encoding="utf-8") as f:
            for line in f:
                counts.update(line.split())
    words = ["<s>", "<unk>"] + [w for w, _ in counts.most_common(size - 2)]
    total, kept = sum(counts.values()), sum(counts[w] for w in words[2:])
    out = work / "neural" / "words.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"{w}\n" for w in words), encoding="utf-8")
    log(f"{len(words)} ids: {len(counts)} distinct words in the text, {100 * (1 - kept / total):.2f}% of its "
        f"{total} running words outside")


def read_words(work: Path) -> list[str]:
    return (work / "neural" / "words.txt").read_text(encoding="utf-8").split("\n")[:-1]


def stage_ids(work: Path) -> None:
    ids = {w: i for i, w in enumerate(read_words(work))}
    parts = []
    for path in text_files(work):
        with open(path, encoding="utf-8") as f:
            flat = [i for line in f for i in (BOUNDARY, *(ids.get(w, UNK) for w in line.split()))]
        parts.append(np.array(flat, dtype=np.uint16))
        log(f"{path.name}: {len(flat)} ids")
    out = work / "neural" / "ids.npy"
    np.save(out.with_suffix(".partial.npy"), np.concatenate(parts + [np.zeros(1, np.uint16)]))
    out.with_suffix(".partial.npy").replace(out)
    (work / "neural" / "ids.json").write_text(json.dumps({"in_domain_from": sum(map(len, parts[:-1]))}) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = recipe_parser(__doc__, ROOT / "asr" / "pretrained" / "default.rescore.safetensors", order=3)
    p.add_argument("--vocab", type=int, default=32768, help="word ids, the boundary and <unk> included")
    p.add_argument("--state", type=Path, default=ROOT / "recipes" / "lm" / "neural" / "state")
    p.add_argument("--to-stage", type=int, default=5, help="stop after this stage (3: the data only)")
    p.add_argument("--minutes", type=float, default=60.0, help="training time of this run (stage 4)")
    p.add_argument("--save-minutes", type=float, default=10.0)
    p.add_argument("--steps", type=int, help="the schedule's length: a new run's (default 12000), or a resumed run's "
                   "new length (its cosine stretched from where it stands; default: its own)")
    p.add_argument("--batch", type=int, default=32, help="windows a step")
    p.add_argument("--in-domain-share", type=float, default=0.1,
                   help="the share of windows drawn from the in-domain text (2%% of the ids; 0: drawn as the rest)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--config", default="{}", help="JSON of NeuralLMConfig fields for a new run, e.g. '{\"layers\": 3}'")
    p.set_defaults(from_stage=6)  # nothing is redone unless asked
    a = p.parse_args(argv)
    if a.to_stage >= 4 and a.minutes <= 0 and not (a.state / "state.json").is_file():
        p.error(f"--minutes {a.minutes:g}: {a.state} holds no run to export")
    stages = [*text_stages(p, a),
              (lambda: stage_vocab(a.work, a.vocab), a.work / "neural" / "words.txt"),
              (lambda: stage_ids(a.work), a.work / "neural" / "ids.json")]
    for number, (run, done) in enumerate(stages, start=1):
        if number >= a.from_stage or not done.exists():
            run()
    if a.to_stage <= 3:
        return 0
    from asr.training.lm.neural import export, train  # torch: only for stages 4 and 5

    words = read_words(a.work)
    split = json.loads((a.work / "neural" / "ids.json").read_text())["in_domain_from"]
    model = train(np.load(a.work / "neural" / "ids.npy", mmap_mode="r"), words, a.state, minutes=a.minutes,
                  save_minutes=a.save_minutes, steps=a.steps, batch=a.batch, threads=a.threads,
                  in_domain=(split, a.in_domain_share),
                  config=json.loads(a.config), dev=dev_text(a.data_root), log=log)
    if a.to_stage >= 5:
        export(model, words, a.out)
        log(f"-> {a.out} ({a.out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
