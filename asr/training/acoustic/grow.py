"""Grow a trained model deeper without changing what it computes (a warm start for a bigger model).

New blocks are interleaved with the trained ones, and every residual branch of a new block (attention,
conv module, feed-forward) ends in an output projection that starts at zero: each new block is the
identity until training moves those projections, so the grown model starts exactly where the trained one
stands and its extra depth learns from there.
"""
from __future__ import annotations

from dataclasses import replace

from torch import nn

from asr.model.encoder import Block, Encoder


def identity_block(block: Block) -> Block:
    """Zero the projections that close each residual branch of `block`: x -> x exactly."""
    closing = [block.attn.out, block.ff[-1]] + ([block.conv.out] if block.conv is not None else [])
    for linear in closing:
        nn.init.zeros_(linear.weight)
        nn.init.zeros_(linear.bias)
    return block


def deepen(encoder: Encoder, n_layers: int, dropout: float | None = None) -> Encoder:
    """A copy of `encoder` with `n_layers` blocks (>= its own): the trained blocks in order, with the new
    identity blocks spread evenly after them (6 -> 12: one after each). Same output for every input."""
    old = len(encoder.blocks)
    if n_layers < old:
        raise ValueError(f"n_layers={n_layers} is fewer than the model's {old} blocks")
    cfg = replace(encoder.cfg, n_layers=n_layers, dropout=encoder.cfg.dropout if dropout is None else dropout)
    grown = Encoder(cfg)
    trained = {k: v for k, v in encoder.state_dict().items() if not k.startswith("blocks.")}
    grown.load_state_dict(trained, strict=False)
    added, blocks = n_layers - old, []
    for j, block in enumerate(encoder.blocks):
        fresh = Block(cfg)
        fresh.load_state_dict(block.state_dict())
        blocks.append(fresh)
        blocks += [identity_block(Block(cfg)) for _ in range(added * (j + 1) // old - added * j // old)]
    grown.blocks = nn.ModuleList(blocks)
    return grown.train(encoder.training)
