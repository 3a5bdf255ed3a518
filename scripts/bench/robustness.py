"""The robustness benchmark (issue 89): the same speech through codecs, a phone call, microphones, levels, real
rooms, real noise and other talkers, and noise alone; ours and the Whisper peers on the same rendered audio.

    python scripts/bench/robustness.py [--sets librispeech-dev-clean-2,speechocean762-dev] [--limit 300]
        [--conditions all|NAME,...] [--noise all|none] [--noise-seconds 30] [--peers whisper-tiny,whisper-base|none]
        [--jobs N] [--model FILE.safetensors|FOLDER] [--lm-weight W] [--word-score S] [asr.evaluate's options]
        [--out benchmarks/robustness] [--cache data/robustness] [--noise-root ../shared/data/noise] [--allow-load]

Each set is a seeded subset of --limit utterances (the same every run; a smaller --limit takes the first of the
same draw). Every condition (bench.conditions; clean is always one) is rendered once into --cache
(bench.rendered) and read from there by every system. Ours decodes as `asr.evaluate` does, through
`asr.corpus.evaluation.evaluate` (endpointing, word-LM beam search, second pass; --jobs processes), with the
model and decoding options given, so the clean row is what `asr.evaluate` prints on the same utterances. Peers
(bench.peers, in .venv-peers; skipped with a note where it is missing) decode the same files, their hypotheses
kept in the cache, since a peer's text on fixed audio does not change. Writes robustness.json, robustness.md
and robustness.png into --out (the committed figures, benchmarks/robustness, only on a quiet machine:
bench.quiet).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import platform
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # the `bench` package

from asr import cli  # noqa: E402
from asr.cli import checks  # noqa: E402
from asr.corpus.evaluation import evaluate  # noqa: E402
from asr.corpus.manifest import ManifestError, Utterance, read_manifest  # noqa: E402
from asr.corpus.scoring import UttResult, score  # noqa: E402
from asr.decoding.beam import LMError  # noqa: E402
from asr.model.errors import ModelError  # noqa: E402
from asr.pretrained import default_model_path  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402

from bench import peers, quiet  # noqa: E402
from bench.conditions import BY_NAME, CLEAN, CONDITIONS, NOISE_SECONDS, Sources, noise_items, rng_for  # noqa: E402
from bench.data import SETS, SHARED  # noqa: E402
from bench.rendered import NOISE_SET, Item, as_rows, render_noise_alone, render_speech, root  # noqa: E402
from bench.robustness_report import Scored, figures, markdown, plot  # noqa: E402

TOOL = "robustness"
DEFAULT_SETS = ("librispeech-dev-clean-2", "speechocean762-dev")
DEFAULT_PEERS = ("whisper-tiny", "whisper-base")
DEFAULT_LIMIT = 300


class Parser(cli.Parser):
    """cli.Parser's manners (one line, exit 2; negative numbers are values) under this script's name."""

    def error(self, message: str):
        self.exit(2, f"{TOOL}: error: {message} (python scripts/bench/robustness.py --help lists the options)\n")


def fail(message: object, status: int = 1) -> None:
    print(f"{TOOL}: error: {message}", file=sys.stderr)
    sys.exit(status)


def names(text: str, known: list[str], option: str, parser: Parser) -> list[str]:
    """A comma list of `known` names ("all": every one, "none": none); a parser error for an unknown one."""
    if text == "all":
        return list(known)
    if text == "none":
        return []
    picked = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in picked if n not in known]
    if unknown or not picked:
        parser.error(f"{option} {text!r}: {'unknown ' + ', '.join(unknown) if unknown else 'empty'} "
                     f"(known: {', '.join(known)}, all or none)")
    return list(dict.fromkeys(picked))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(TOOL, prog="python scripts/bench/robustness.py", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS), help="comma list of bench.data's sets")
    parser.add_argument("--limit", type=cli.positive_int, default=DEFAULT_LIMIT,
                        help=f"utterances a set, a seeded subset (default {DEFAULT_LIMIT})")
    parser.add_argument("--conditions", default="all", help="comma list of degraded conditions (clean always runs)")
    parser.add_argument("--noise", default="all", choices=("all", "none"), help="noise alone: all items, or none")
    parser.add_argument("--noise-seconds", type=cli.positive_float, default=NOISE_SECONDS,
                        help=f"length of noise alone (default {NOISE_SECONDS:g}; a real clip's test part if shorter)")
    parser.add_argument("--peers", default=",".join(DEFAULT_PEERS), help="comma list of peers, or none")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "robustness", help="folder of the figures")
    parser.add_argument("--cache", type=Path, default=ROOT / "data" / "robustness", help="the rendered audio")
    parser.add_argument("--noise-root", type=Path, default=SHARED / "noise", help="the real rooms, microphones, noise")
    cli.add_model_args(parser)
    cli.add_decoder_args(parser)
    cli.add_endpoint_args(parser)
    cli.add_chunk_ms(parser, 500.0, "chunk in ms where --batch-seconds is 0 (default 500)")
    cli.add_batch_seconds(parser)
    cli.add_jobs(parser)
    quiet.add_allow_load(parser)
    args = parser.parse_args(argv)
    args.set_names = names(args.sets, [s.name for s in SETS], "--sets", parser)
    degraded = [c.name for c in CONDITIONS if c is not CLEAN]
    args.condition_names = [CLEAN.name] + names(args.conditions, degraded, "--conditions", parser)
    args.peer_names = names(args.peers, list(peers.PEERS), "--peers", parser)
    if not args.set_names and args.noise == "none":
        parser.error("nothing to measure: no --sets and --noise none")
    for folder, option in ((args.out, "--out"), (args.cache, "--cache")):
        try:
            checks.folder_to_write(folder, option)
        except ValueError as err:
            parser.error(str(err))
    if args.jobs > 1 and args.batch_seconds == 0:
        parser.error("--jobs runs the batches: not with --batch-seconds 0")
    if not (args.noise_root / "manifest.jsonl").is_file():
        parser.error(f"--noise-root {args.noise_root}: no manifest.jsonl there")
    args.load = quiet.guard(args.allow_load, args.out, TOOL)  # after the options: a mistake is said first
    return args


def subset(manifest: list[Utterance], set_name: str, limit: int) -> list[Utterance]:
    """A seeded draw of `limit` utterances in manifest order: the same every run, and a smaller limit's draw is a
    part of a larger one's."""
    order = rng_for("subset", set_name).permutation(len(manifest))[:limit]
    return [manifest[i] for i in sorted(order)]


def load_sets(args: argparse.Namespace) -> tuple[Sources, dict[str, list[Utterance]]]:
    sources, subsets = Sources(args.noise_root), {}
    for eval_set in (s for s in SETS if s.name in args.set_names):
        try:
            rows = read_manifest(eval_set.manifest, eval_set.split)
        except ManifestError as err:
            fail(err)
        sources.sets[eval_set.name], sources.roots[eval_set.name] = rows, eval_set.manifest.parent
        subsets[eval_set.name] = subset(rows, eval_set.name, args.limit)
    return sources, subsets


def ours(args: argparse.Namespace, items: list[Item]) -> tuple[dict, list[str], str, float]:
    """Our scored items (keyed as Scored's), the error lines, the decoding's description and the seconds loading
    the model took."""
    began = time.perf_counter()
    try:
        model = cli.load_transcriber(args)
    except (ModelError, LMError, ValueError, OSError) as err:
        fail(err)
    load_s = time.perf_counter() - began
    utterances = [Utterance(Path(item.audio), item.seconds, item.text) for item in items]
    results, _, errors = evaluate(model, utterances, args)
    by_audio = {r.audio: r for r in results}
    scored = {(it.set, it.key): by_audio[it.audio] for it in items if it.audio in by_audio}
    decoder = model.decoder
    lm = decoder.lm.path if decoder.lm is not None and decoder.lm.path is not None else None
    what = decoder.kind + (f" with {Path(lm).name} (LM weight {args.lm_weight:g}, word score {args.word_score:g})"
                           if lm else "")
    what += ", second pass" if decoder.rescorer is not None else ", no second pass"
    return scored, errors, f"{what}; asr.evaluate's path (--batch-seconds {args.batch_seconds:g})", load_s


def model_name(args: argparse.Namespace) -> str:
    """The model scored, with the first 12 hex digits of its weights' sha256 (a folder's model.safetensors)."""
    given = args.model or args.onnx_dir
    weights = Path(given) if given else default_model_path()
    if weights is not None and weights.is_dir():
        weights = weights / "model.safetensors"
    if weights is None or not weights.is_file():
        return given or "the bundled model"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    return f"{given or f'the bundled model ({weights.name})'}, sha256 {digest}"


def peer(name: str, items: list[Item], cache: Path, threads: int) -> tuple[dict, str, dict]:
    """A peer's scored items, decoding only those its cache lacks; a note ('' when all went well); and what it
    decoded afresh in how many seconds."""
    missing = peers.installed()
    if missing:
        return {}, missing, {}
    folder = root(cache) / "peers"
    cached = {s: peers.load_cache(peers.cache_path(folder, name, s)) for s in {it.set for it in items}}
    todo = [row for row in as_rows(items) if row["name"] not in cached[row["set"]]]
    note, began = "", time.perf_counter()
    if todo:
        work = folder / name / "work"
        work.mkdir(parents=True, exist_ok=True)
        manifest = work / "manifest.jsonl"
        manifest.write_text("".join(json.dumps(row) + "\n" for row in todo))
        run = peers.run_peer(name, manifest, work / "hyps.jsonl", rerun_limit=0, threads=threads)
        for set_name, rows in run.rows.items():
            peers.save_cache(peers.cache_path(folder, name, set_name), rows)
            cached[set_name].update(rows)
        note = f"stopped: {run.error}" if run.error else ""
    scored = {}
    for it in items:
        row = cached[it.set].get(it.key)
        if row is not None:
            ref, hyp = normalize(it.text), normalize(row["hyp"])
            words, chars, _ = score(ref, hyp)
            scored[it.set, it.key] = UttResult(it.audio, ref, hyp, it.seconds, 0.0, words, chars)
    if not scored and not note:
        note = "decoded nothing"
    return scored, note, {"files": len(todo), "s": time.perf_counter() - began, "threads": threads}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        checks.options(args)  # --model, --lm and the rest exist, before anything loads
    except ValueError as err:
        fail(err)
    sources, subsets = load_sets(args)
    began = time.perf_counter()
    items = render_speech(args.cache, sources, subsets, [BY_NAME[n] for n in args.condition_names], args.jobs)
    noise = noise_items(sources) if args.noise == "all" else []
    items += render_noise_alone(args.cache, sources, noise, args.noise_seconds)
    render_s = time.perf_counter() - began
    began = time.perf_counter()
    scored: Scored = {}
    scored["asr"], errors, decoding, load_s = ours(args, items)
    ours_s = time.perf_counter() - began - load_s
    notes = {f"asr: {e}": "not decoded" for e in errors}
    systems, peer_timing = {"asr": "asr"}, {}
    for name in args.peer_names:
        result, note, peer_timing[name] = peer(name, items, args.cache, args.jobs)
        if result:
            scored[name], systems[name] = result, peers.LABELS[name].split(" (")[0]
        if note:
            notes[peers.LABELS[name]] = note if result else f"skipped: {note}"
    speech = [it for it in items if it.set != NOISE_SET]
    record = {
        "tool": "scripts/bench/robustness.py", "date": datetime.datetime.now().isoformat(timespec="minutes"),
        "machine": quiet.machine(), "host": platform.node(), "load": args.load,
        "command": "python scripts/bench/robustness.py " + shlex.join(sys.argv[1:] if argv is None else argv),
        "model": model_name(args), "decoding": decoding,
        "noise_root": str(args.noise_root), "noise_side": "test", "noise_files": sources.pools.names,
        "limit": args.limit, "conditions": {n: BY_NAME[n].what for n in args.condition_names},
        "systems": systems, "peer_labels": {n: peers.LABELS[n] for n in systems if n in peers.LABELS},
        "notes": notes,
        "timing": {"render_s": render_s, "load_s": load_s, "ours_s": ours_s, "jobs": args.jobs,
                   "files": len(items), "speech_items": len(speech), "audio_s": sum(it.seconds for it in items),
                   "ours_s_per_file": ours_s / max(len(items), 1), "peers": peer_timing},
        "figures": figures(items, scored, {item.name: item.label for item in noise}),
        "utterances": {s: [sources.name(s, u) for u in us] for s, us in subsets.items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "robustness.json").write_text(json.dumps(record, indent=1) + "\n")
    why = plot(record, args.out / "robustness.png")
    lines = markdown(record) + ([f"({why})", ""] if why else ["![ratio to clean per condition](robustness.png)", ""])
    quiet.write_page(args.out, "robustness", lines)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
