"""What fine-tuning gained: the held-out split scored before and after (`asr.evaluate`'s scoring), the
tables `python -m asr.finetune` prints, and the model card it writes beside the model.

A score is a plain dict (kept in DIR/scores/*.json, so a resumed run does not score again):
{"wer": %, "cer": %, "utts": n, "words": reference words, "speakers": {speaker: {"wer", "utts", "words"}}}.
"""
from __future__ import annotations

from asr.api import Transcriber
from asr.batch.padded import DEFAULT_BATCH_SECONDS
from asr.corpus.evaluation import evaluate, options
from asr.corpus.manifest import Utterance
from asr.corpus.scoring import by_speaker, totals
from asr.decoding.decoder import Decoder
from asr.model.recognizer import Recognizer


def score(recognizer: Recognizer, utterances: list[Utterance], decoder: Decoder,
          batch_seconds: float = DEFAULT_BATCH_SECONDS) -> dict:
    """WER and CER (%) of the model and decoder on `utterances` (the text asr.transcribe gives, endpoint cuts and
    all), overall and per speaker."""
    results, _, errors = evaluate(Transcriber(recognizer, decoder), utterances, options(batch_seconds))
    if errors:
        raise ValueError(f"{len(errors)} test recordings could not be read: {errors[0]}")
    words, chars = totals(results)
    speakers = {speaker or "-": {"wer": round(100 * w.rate(), 2), "utts": count, "words": w.ref}
                for speaker, count, w, _ in by_speaker(results)}
    return {"wer": round(100 * words.rate(), 2), "cer": round(100 * chars.rate(), 2), "utts": len(results),
            "words": words.ref, "speakers": speakers}


def _wer(scores: dict, name: str) -> str:
    return f"{scores[name]['wer']:.2f}" if name in scores else "-"


def results_table(rows: list[tuple[str, dict]]) -> list[str]:
    """Markdown lines: one row a model, greedy and beam WER (each dict maps "greedy"/"beam" to a score)."""
    lines = ["| | greedy WER | beam WER |", "|---|---:|---:|"]
    return lines + [f"| {label} | {_wer(scores, 'greedy')} | {_wer(scores, 'beam')} |" for label, scores in rows]


def speaker_table(before: dict, after: dict) -> list[str]:
    """Markdown lines: WER per test speaker, before and after, greedy and beam, worst after-beam first."""
    speakers = sorted(after["beam"]["speakers"], key=lambda s: (-after["beam"]["speakers"][s]["wer"], s))
    lines = ["| speaker | utts | words | before greedy | before beam | after greedy | after beam |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for speaker in speakers:
        row = after["beam"]["speakers"][speaker]
        cells = [f"{scores[kind]['speakers'][speaker]['wer']:.2f}" for scores in (before, after)
                 for kind in ("greedy", "beam")]
        lines.append(f"| {speaker} | {row['utts']} | {row['words']} | " + " | ".join(cells) + " |")
    return lines


def loss(run: dict) -> str:
    """The training loss a run's record names, in words."""
    if run.get("criterion", "ctc") == "ctc":
        return "plain CTC"
    grams = {2: "bigram", 3: "trigram"}.get(run.get("criterion_order"), f"{run.get('criterion_order')}-gram")
    return f"CTC-CRF (a {grams} phone LM of the run's transcripts as the denominator, plus a tenth of the CTC loss)"


def beam_words(info: dict) -> str:
    """What the beam column is: the search with the word LM, then the second pass where the models have one."""
    second = info.get("second_pass")
    then = f", then the second pass with {second}" if second else ""
    return f"beam: the search with the word LM{then}, as the tools decode"


def model_card(info: dict) -> str:
    """MODEL_CARD.md of a fine-tuned model folder, from the run's record (finetune.json)."""
    data, split, run, lm = info["data"], info["split"], info["training"], info["lm"]
    tuned = ("chosen on the held-out test split (--tune-lm), so the beam figures below are optimistic"
             if lm["tuned"] else "the fixed default (not tuned on the test split)")
    missing = (f" {len(lm['missing'])} of them cannot be output (outside the lexicon): {', '.join(lm['missing'][:20])}."
               if lm["missing"] else " All of them are in the beam search's lexicon.")
    guard = {"distill": f"the starting model's own outputs on the same batches as a second target (distillation "
                        f"toward the starting model, weight {run.get('guard_weight', 0):g}) against forgetting",
             "l2sp": f"a pull toward the starting weights (L2-SP, weight {run.get('guard_weight', 0):g}) against "
                     "forgetting",
             "none": "nothing against forgetting general speech (no replay, no anchor)"}
    replay = (f"{run['replay_minutes']:.1f} min of the original training mixture ({run['replay_root']}) replayed "
              f"beside them" if run["replay_minutes"] else guard.get(run.get("guard", "none"), guard["none"]))
    return "\n".join([
        f"# Fine-tuned model: {info['name']}",
        "",
        f"`python -m asr.finetune` fine-tuned {info['start']} on {data['source']} ({info['date']}).",
        "",
        "Use it with any tool: `python -m asr.transcribe --model DIR FILE`, `asr.stream`, `asr.evaluate`, "
        "`asr.serve --model DIR`, or `asr.load(\"DIR\")` in Python.",
        "",
        "## Files",
        "",
        "| file | what it is |",
        "|---|---|",
        "| `model.safetensors` | the acoustic model: weights, architecture, tokenizer and CMVN |",
        "| `onnx/` | its ONNX export (fp32 and int8), which the tools run by default where onnxruntime is installed |",
        "| `lm.arpa.gz` | the word LM its beam search uses by default |",
        *(["| `rescore.safetensors` | the second pass's word LM, which ranks each final's 64-best again (the "
           "starting model's, unchanged; `--no-rescore` leaves it out) |"] if info.get("second_pass") else []),
        "| `config.yaml` | the training config it was trained with (`python -m asr.training` reads the same keys) |",
        "| `finetune.json` | this card's figures, the recipe and the split, as data |",
        "| `data/` | the manifests: `train.jsonl`, `test.jsonl` (held out), and the replayed mixture |",
        "",
        "## Data",
        "",
        f"{data['utterances']} utterances ({data['minutes']:.1f} min, {data['speakers']} speakers) from "
        f"{data['source']}; {data['skipped']} left out while building the manifest. Held out for testing "
        f"({split['by']}): {split['test_utterances']} utterances ({split['test_minutes']:.1f} min); fine-tuned on "
        f"{split['train_utterances']} ({split['train_minutes']:.1f} min).",
        "",
        "## Training",
        "",
        f"{run['minutes']:.1f} min of training on {run['device']} ({run['steps']} steps, {run['audio_hours']:.2f} h "
        f"of audio seen): {run['passes']} passes over the training recordings with {replay}; learning rate "
        f"{run['lr']:g} (warm-up, then a cosine decay), {run['trained_blocks']} trained "
        f"(the front end frozen), speed perturbation, noise and SpecAugment; the loss "
        f"{loss(run)}.",
        "",
        "## Word LM",
        "",
        f"A trigram of the training split's text ({lm['sentences']} sentences, {lm['words']} words, "
        f"{len(lm['new_words'])} new to the starting LM), linearly interpolated with {lm['base']} at weight "
        f"{lm['weight']:g} for the new text: {tuned}.{missing}",
        "",
        "## Results",
        "",
        f"WER (%) on the held-out split ({split['test_utterances']} utterances, "
        f"{info['after']['beam']['words']} words; {beam_words(info)}):",
        "",
        *results_table([("before", info["before"]), ("after", info["after"]),
                        ("after, with the starting LM", {"beam": info["after_base_lm"]})]),
        "",
        "Per speaker:",
        "",
        *speaker_table(info["before"], info["after"]),
        "",
    ])
