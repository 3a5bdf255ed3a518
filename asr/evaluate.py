"""Word and character error rates of a model on a manifest.

    python -m asr.evaluate M.jsonl [--model PATH] [--streaming --chunk-ms 500] [--whole] [--jobs N] [--skip-bad]
                           [--split NAME] [--report PATH] [--limit N] [--greedy | --lm LM.arpa] [--by-speaker]

The manifest comes first or as --manifest M.jsonl. A line without usable text (missing, null, not a string,
or no words once normalised) would be an empty reference and a wrong WER: it is an error naming the file and
the line, unless --skip-bad, which scores the rest and says how many lines it left out.

What is scored is the text `asr.transcribe` gives for the same audio and options, normalised: the same code
(asr.batch.files.transcribed) cuts each utterance into segments where the endpointer ends them (--trailing-silence,
--min-segment, --max-segment: 20 s at the most), decodes each, restores and writes its final (unless --plain or
--spoken-form), and joins them. References and hypotheses both go through asr.text.normalize before jiwer scores
them (number phrases spelled one way on both sides: "A HUNDRED AND EIGHT" as the written "108"). The utterances
are stepped in length-sorted padded batches (--batch-seconds S of audio a step, asr.batch.padded; --jobs N: those
batches in N processes, asr.batch.processes; 0: one file at a time), the same text. --streaming feeds each in
chunks of --chunk-ms through a live stream as `asr.stream` does, the same text, and also reports each chunk's wall
time (model step, endpointing, decoding, its partial).
--whole decodes each utterance as one segment (no endpoint ever fires): what the model and search do on a whole
utterance, which is not what the tools give for one longer than --max-segment or with pauses in it.
Decoding is the same as asr.stream's and asr.transcribe's: the beam search with the bundled word LM for
the bundled model, --greedy for greedy CTC, --lm for another LM (python -m asr.training.lm).
The last line is exactly `WER=<pct> CER=<pct> RTF=<float> utts=<n>`.
--by-speaker also prints one line per manifest speaker, worst WER first.
--restorer-text FILE (cased, punctuated sentences, one a line: the restorer's held-out split,
data/restorer/held.txt from recipes/restorer/prepare.py) also scores the casing and punctuation
restorer on it: F1 per mark and casing accuracy, beside the trivial baseline (capitalise the first
word, end with a period). WER itself is always scored on normalised words. Without a manifest only
the restorer is scored.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from asr import cli
from asr.cli import checks
from asr.audio import interrupt
from asr.batch.processes import StartError
from asr.corpus.evaluation import evaluate, restorer_lines, summarize
from asr.corpus.manifest import ManifestError, read_manifest
from asr.corpus.scoring import by_speaker
from asr.decoding.beam import LMError
from asr.model.errors import ModelError


@cli.quiet_when_piped_output_closes
@interrupt.handled("evaluate")
def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.evaluate", __doc__)
    parser.add_argument("given", nargs="?", metavar="MANIFEST", help="JSON Lines manifest with audio and text "
                                                                     "(or --manifest)")
    cli.add_manifest_args(parser, required=False)
    parser.add_argument("--streaming", action="store_true",
                        help="feed the audio in chunks of --chunk-ms, as asr.stream does (the same text), timing each")
    parser.add_argument("--whole", action="store_true",
                        help="decode each utterance whole, as one segment (no endpoint cuts): not the text the "
                             "tools give for a long utterance")
    cli.add_chunk_ms(parser, 500.0, "streaming chunk in ms (default 500)")
    cli.add_batch_seconds(parser)
    cli.add_jobs(parser)
    parser.add_argument("--report", type=Path, help="write a per-utterance JSON report with alignments here")
    parser.add_argument("--by-speaker", action="store_true",
                        help="also print WER and CER per manifest speaker, worst first")
    parser.add_argument("--restorer-text", type=Path, metavar="FILE",
                        help="also score the casing and punctuation restorer on these sentences (one a line)")
    cli.add_decoder_args(parser)
    cli.add_endpoint_args(parser)
    args = parser.parse_args(argv)
    if args.given and args.manifest and args.given != args.manifest:
        parser.error(f"two manifests ({args.given} and --manifest {args.manifest}): give one")
    args.manifest = args.manifest or args.given
    if args.manifest is None and args.restorer_text is None:
        parser.error("the following arguments are required: MANIFEST or --manifest (or --restorer-text)")
    if args.jobs > 1 and (args.streaming or args.batch_seconds == 0):
        parser.error("--jobs runs the offline mode's batches: not with --streaming or --batch-seconds 0")
    skipped = cli.skipping(args)
    try:  # the options and the manifest before anything loads
        checks.options(args)
        utterances = read_manifest(args.manifest, args.split, skipped=skipped)[: args.limit] if args.manifest else []
    except (ManifestError, ValueError) as err:
        cli.error("evaluate", err)
        return 1
    try:
        model = cli.load_transcriber(args)
        decoder = model.decoder
        restorer = restorer_lines(decoder, args.restorer_text) if args.restorer_text else []
    except (ManifestError, ModelError, LMError, ValueError, OSError) as err:
        cli.error("evaluate", err)
        return 1
    cli.note_skipped("evaluate", args.manifest, skipped)
    if args.manifest is None:
        print("\n".join(restorer))
        return 0
    try:
        results, latencies, errors = evaluate(model, utterances, args, args.streaming)
    except StartError as err:  # a spawned --jobs worker could not load what the options ask for
        cli.error("evaluate", err)
        return 1
    for error in errors:
        cli.error("evaluate", error)
    if not results:
        cli.error("evaluate", f"{args.manifest}: no utterance could be evaluated")
        return 1
    summary = summarize(results, latencies)
    if args.report:
        report = {"manifest": str(args.manifest), "mode": "streaming" if args.streaming else "offline",
                  "decoder": decoder.kind, "lm": str(decoder.lm.path) if decoder.lm else None,
                  "chunk_ms": args.chunk_ms if args.streaming else None,
                  "endpointing": "whole" if args.whole else asdict(model.endpoint), "summary": summary,
                  "failed": errors, "skipped": [str(err) for err in skipped or []],
                  "utterances": [asdict(r) for r in results]}
        args.report.write_text(json.dumps(report, indent=1) + "\n")
    if args.by_speaker:
        for speaker, count, words, chars in by_speaker(results):
            print(f"speaker={speaker or '-'} WER={words.rate() * 100:.2f} CER={chars.rate() * 100:.2f} "
                  f"utts={count} words={words.ref}")
    print(f"substitutions={summary['substitutions']} deletions={summary['deletions']} "
          f"insertions={summary['insertions']} ref_words={summary['ref_words']}")
    if latencies:
        print(f"chunk_ms={args.chunk_ms:g} latency_median_ms={summary['chunk_ms_median']:.1f} "
              f"latency_p95_ms={summary['chunk_ms_p95']:.1f}")
    for line in restorer:
        print(line)
    if errors:
        print(f"failed={len(errors)} (see the errors above)")
    print(f"WER={summary['wer'] * 100:.2f} CER={summary['cer'] * 100:.2f} RTF={summary['rtf']:.4f} "
          f"utts={summary['utts']}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
