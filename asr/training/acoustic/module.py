"""LightningModule: CTC or CTC-CRF loss (plus, optionally, distillation from a teacher's cached frames and an anchor to
the starting model), AdamW with warm-up and cosine decay, validation WER/CER."""
from __future__ import annotations

import math

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor

from asr.decoding.ctc import greedy_decode
from asr.model.encoder import Encoder, EncoderConfig
from asr.text.tokenizer import Tokenizer
from asr.training.acoustic.anchor import Anchor, AnchorConfig
from asr.training.acoustic.config import OptimConfig
from asr.training.acoustic.crf import DenominatorGraph, crf_loss
from asr.training.acoustic.whisper.distill import DistillConfig, DistillHead
from asr.training.acoustic.pronunciations import choose


def warmup_cosine(step: int, cfg: OptimConfig) -> float:
    """Learning-rate multiplier at this run's `step`: linear warm-up, then cosine decay to cfg.final_ratio,
    on the schedule's own position (cfg.step_offset + step); a continued run re-warms over cfg.rewarm_steps."""
    rewarm = min((step + 1) / cfg.rewarm_steps, 1.0) if cfg.rewarm_steps else 1.0
    position = cfg.step_offset + step
    if position < cfg.warmup_steps:
        return rewarm * (position + 1) / cfg.warmup_steps
    progress = min((position - cfg.warmup_steps) / max(cfg.decay_steps, 1), 1.0)
    return rewarm * (cfg.final_ratio + (1 - cfg.final_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def gather_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every rank's (reference, hypothesis) pairs, in rank order; `pairs` itself outside DDP."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return pairs
    shares: list[list[tuple[str, str]] | None] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(shares, pairs)
    return [pair for share in shares for pair in share]


class CTCModule(L.LightningModule):
    def __init__(self, model_cfg: EncoderConfig, optim_cfg: OptimConfig, tokenizer: Tokenizer):
        super().__init__()
        self.encoder = Encoder(model_cfg)
        self.optim_cfg, self.tokenizer = optim_cfg, tokenizer
        self.distill: DistillHead | None = None
        self.distill_weight = 0.0
        self.anchor: Anchor | None = None  # a plain attribute: not a submodule, so in no checkpoint or optimizer
        self.denominator: DenominatorGraph | None = None  # CTC-CRF's phone-LM graph (None: plain CTC)
        self.ctc_weight = 0.0
        self.chunk_choices: list[int] = []
        self.hyps: list[str] = []
        self.refs: list[str] = []

    def attach_distill(self, cfg: DistillConfig) -> None:
        """Train with the distillation loss too (batches then carry "teacher" and "teacher_lens")."""
        self.distill, self.distill_weight = DistillHead(cfg, self.encoder), cfg.weight

    def attach_anchor(self, cfg: AnchorConfig) -> None:
        """Train with a pull toward the weights (or outputs) the encoder holds now: the starting model."""
        self.anchor = Anchor(cfg, self.encoder)

    def attach_crf(self, graph: DenominatorGraph, ctc_weight: float) -> None:
        """Train (and validate) with the CTC-CRF loss over `graph` instead of plain CTC
        (`asr.training.acoustic.crf`)."""
        self.denominator, self.ctc_weight = graph, ctc_weight

    def on_fit_start(self) -> None:
        if self.anchor is not None:
            self.anchor.to(self.device)

    def set_chunk_choices(self, chunks: list[int]) -> None:
        """Dynamic chunk training: each training batch looks ahead inside chunks of one of `chunks` frames,
        drawn at random (every other pass, validation included, at the model's own chunk). ValueError when
        the model holds no biases for one of them."""
        longest = self.encoder.cfg.longest_chunk
        if any(not 0 <= c <= longest for c in chunks):
            raise ValueError(f"chunks={list(chunks)}: this model holds lookahead biases for chunks of up to {longest}")
        self.chunk_choices = list(chunks)

    def ctc_loss(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        logprobs, out_lens = self.encoder(batch["feats"], batch["feat_lens"])  # (B, T', V), (B,)
        targets, target_lens = batch["targets"], batch["target_lens"]
        if "alternatives" in batch:  # phones: each word spelled as the model aligns best (tokenizer.pronunciations)
            targets, target_lens = choose(logprobs.detach(), out_lens, targets, target_lens, batch["alternatives"])
        logprobs = logprobs.float()  # the loss in float32 (float64 inside CTC-CRF) under bf16 autocast too
        if self.denominator is not None:
            loss = crf_loss(logprobs, out_lens, targets, target_lens, self.denominator, self.ctc_weight)
        else:
            loss = F.ctc_loss(logprobs.transpose(0, 1), targets, out_lens, target_lens,
                              blank=0, reduction="sum", zero_infinity=True)
        return loss / target_lens.sum().clamp_min(1), logprobs, out_lens

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        served = self.encoder.cfg.chunk
        if self.chunk_choices:
            self.encoder.set_chunk(self.chunk_choices[int(torch.randint(len(self.chunk_choices), ()))])
        try:
            loss, logprobs, out_lens = self.ctc_loss(batch)  # (the chunk lives in the graph's masks from here on)
            anchor = self.anchor.loss(self.encoder, batch, logprobs, out_lens) if self.anchor is not None else None
        finally:
            self.encoder.set_chunk(served)
        size = batch["feats"].shape[0]
        self.log("train_loss", loss, prog_bar=True, batch_size=size)
        if self.distill is not None:
            speech = torch.minimum(out_lens, self.encoder.output_lengths(batch["speech_lens"]))  # not the silence
            distill = self.distill.loss(speech, batch["teacher"], batch["teacher_lens"])
            self.log("train_distill", distill, prog_bar=True, batch_size=size)
            loss = loss + self.distill_weight * distill
        if anchor is not None:
            self.log("train_anchor", anchor, prog_bar=True, batch_size=size)
            loss = loss + self.anchor.weight * anchor
        return loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        loss, logprobs, out_lens = self.ctc_loss(batch)
        self.log("val_loss", loss, prog_bar=True, batch_size=batch["feats"].shape[0], sync_dist=True)
        for i in range(logprobs.shape[0]):
            self.hyps.append(self.tokenizer.decode(greedy_decode(logprobs[i, :out_lens[i]])))
            target = batch["targets"][i, :batch["target_lens"][i]].tolist()
            self.refs.append(self.tokenizer.decode(target))

    def on_validation_epoch_end(self) -> None:
        # Under DDP each rank decoded its own share of the validation set: WER and CER are computed
        # over every rank's pairs (not averaged per rank), so each rank logs the same, exact value.
        import jiwer  # noqa: PLC0415 (only validation needs it: a training-only machine may lack it)

        pairs = [(r, h) for r, h in gather_pairs(list(zip(self.refs, self.hyps))) if r.strip()]
        if pairs:
            refs, hyps = zip(*pairs)
            self.log("val_wer", 100 * jiwer.wer(list(refs), list(hyps)), prog_bar=True, sync_dist=True)
            self.log("val_cer", 100 * jiwer.cer(list(refs), list(hyps)), sync_dist=True)
        self.hyps, self.refs = [], []

    @property
    def mixed_precision(self) -> bool:
        """Whether the trainer runs the forward under autocast (trainer.precision bf16-mixed or 16-mixed)."""
        return self._trainer is not None and "mixed" in str(self.trainer.precision)

    def configure_optimizers(self):
        cfg = self.optim_cfg
        decay = [p for n, p in self.named_parameters() if p.ndim >= 2 and "distance_bias" not in n]
        no_decay = [p for n, p in self.named_parameters() if not (p.ndim >= 2 and "distance_bias" not in n)]
        optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                       {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=tuple(cfg.betas),
                                      fused=not self.mixed_precision)  # Lightning clips no fused optimizer's gradients under autocast
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, cfg))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
