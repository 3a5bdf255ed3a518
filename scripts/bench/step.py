"""The model's share of a training step: forward, backward and AdamW step on one real batch, per model.

    python scripts/bench/step.py [--model PATH ...] [--config small medium] [--seconds 40] [--threads 2]
                                 [--set window=100 chunk=24] [--criterion ctc crf crf_trigram] [--bf16]

Builds one length-sorted batch of about --seconds of padded audio from --manifest (clean log-mel, as the
loader would hand it over), then times --steps training steps of each model after --warmup steps and prints
the median: the figure to hold a run's measured seconds per step against (train.StepTimes). Models are
model files (their architecture; weights do not change the cost) or conf/model presets.

`--criterion` times each loss (conf/criterion/: CTC, or CTC-CRF with a bigram or trigram phone LM estimated on
--manifest's transcripts in the units of the first --model, e.g. the shipped phone model) and, for CTC-CRF, the
denominator's forward-backward alone, printed as its share of the step. `--bf16` runs the encoder under
bfloat16 autocast (the loss in float32, the denominator in float64), as trainer.precision=bf16-mixed does.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: this checkout's asr
from asr import cli  # noqa: E402
from asr.audio.files import load_audio  # noqa: E402
from asr.corpus.manifest import read_manifest  # noqa: E402
from asr.features import Fbank  # noqa: E402
from asr.model.encoder import Encoder, EncoderConfig  # noqa: E402
from asr.model.loader import load_config, load_model  # noqa: E402
from asr.text.normalize import normalize  # noqa: E402
from asr.text.tokenizer import Tokenizer  # noqa: E402
from asr.training.acoustic.crf import DenominatorGraph, PhoneLM, crf_loss, log_partition  # noqa: E402
from asr.training.acoustic.data import collate  # noqa: E402

CONF = ROOT / "conf" / "model"


def batch(manifest: Path, seconds: float, tokenizer: Tokenizer) -> dict[str, torch.Tensor]:
    """Utterances of similar length (from the middle of the sorted manifest) filling `seconds` once padded."""
    utts = sorted(read_manifest(manifest, durations=True), key=lambda u: u.duration)
    middle = utts[len(utts) // 2:]
    count = max(1, int(seconds // middle[0].duration))
    fbank = Fbank()
    items = [(torch.from_numpy(fbank(load_audio(u.audio))), torch.tensor(tokenizer.encode(normalize(u.text))))
             for u in middle[:count]]
    return collate(items)


def phone_graph(manifest: Path, tokenizer: Tokenizer, order: int) -> DenominatorGraph:
    """CTC-CRF's denominator from `manifest`'s transcripts in `tokenizer`'s units (as training builds it)."""
    return DenominatorGraph(PhoneLM.of_transcripts((u.text for u in read_manifest(manifest)), tokenizer.encode, order))


def step_seconds(encoder: Encoder, data: dict[str, torch.Tensor], steps: int, warmup: int,
                 graph: DenominatorGraph | None = None, bf16: bool = False) -> float:
    """Median wall seconds of one forward + loss (CTC, or CTC-CRF over `graph`) + backward + AdamW step."""
    encoder.train()
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=1e-4)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logprobs, lengths = encoder(data["feats"], data["feat_lens"])
        logprobs = logprobs.float()
        if graph is None:
            loss = F.ctc_loss(logprobs.transpose(0, 1), data["targets"], lengths, data["target_lens"], zero_infinity=True)
        else:
            loss = crf_loss(logprobs, lengths, data["targets"], data["target_lens"], graph, 0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def denominator_seconds(encoder: Encoder, data: dict[str, torch.Tensor], graph: DenominatorGraph, steps: int) -> float:
    """Median wall seconds of the denominator's log Z and its gradient alone, on the encoder's outputs."""
    with torch.no_grad():
        logprobs, lengths = encoder(data["feats"], data["feat_lens"])
    times = []
    for _ in range(steps):
        x = logprobs.double().requires_grad_()
        start = time.perf_counter()
        log_partition(x, lengths, graph).sum().backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def configs(models: list[str], presets: list[str], vocab: int, settings: dict) -> dict[str, EncoderConfig]:
    """The models' and presets' architectures, each with `settings` (field -> value) applied."""
    out = {Path(m).name: replace(load_config(m), **settings) for m in models}
    for name in presets:
        fields = OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"))
        out[name] = EncoderConfig(**{**fields, **settings, "vocab_size": vocab})
    return {name: cfg.validate() for name, cfg in out.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", nargs="*", default=[], help="model files")
    p.add_argument("--config", nargs="*", default=[], help="conf/model presets (e.g. small medium)")
    p.add_argument("--manifest", type=Path, default=Path("../shared/data/speechocean762/train.jsonl"))
    p.add_argument("--seconds", type=cli.finite_float, default=40.0, help="padded audio per batch")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                   help="architecture fields for every model (e.g. window=100 n_heads=6 chunk=24)")
    p.add_argument("--criterion", nargs="+", default=["ctc"], choices=["ctc", "crf", "crf_trigram"],
                   help="the losses to time (crf: a bigram denominator, crf_trigram: a trigram)")
    p.add_argument("--bf16", action="store_true", help="the encoder under bfloat16 autocast")
    a = p.parse_args(argv)
    settings = {k: OmegaConf.create(f"v: {v}")["v"] for k, v in (item.split("=", 1) for item in a.set)}
    torch.set_num_threads(a.threads)
    tokenizer = load_model(a.model[0])[1] if a.model else Tokenizer("char")  # the first model's units
    data = batch(a.manifest, a.seconds, tokenizer)
    graphs = {c: phone_graph(a.manifest, tokenizer, 3 if c == "crf_trigram" else 2) if c != "ctc" else None
              for c in a.criterion}
    print(f"batch: {data['feats'].shape[0]} utterances x {data['feats'].shape[1] / 100:.2f} s, {a.threads} threads, "
          f"{'bf16 autocast' if a.bf16 else 'float32'}")
    for name, cfg in configs(a.model, a.config, tokenizer.vocab_size, settings).items():
        cfg.vocab_size = tokenizer.vocab_size
        for criterion, graph in graphs.items():
            torch.manual_seed(0)
            encoder = Encoder(cfg)
            params = sum(q.numel() for q in encoder.parameters()) / 1e6
            seconds = step_seconds(encoder, data, a.steps, a.warmup, graph, a.bf16)
            share = ""
            if graph is not None:
                den = denominator_seconds(encoder, data, graph, a.steps)
                share = f"  denominator ({graph.n_states} states, {graph.n_arcs} arcs) {den:.3f} s: {100 * den / seconds:.1f}%"
            print(f"{name:<28} {params:6.2f} M  {cfg.n_layers:2d} x {cfg.d_model:3d}  dropout {cfg.dropout:.2f}  "
                  f"{criterion:<11} {seconds:.3f} s/step (median of {a.steps}){share}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
