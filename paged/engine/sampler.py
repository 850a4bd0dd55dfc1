"""The Sampler: logits of each scheduled sequence -> its next token."""

from __future__ import annotations

import random

import torch

from ..config import SamplingParams
from ..sequence import Sequence
from .checkpoint import SequenceFailure


def make_generator(params: SamplingParams) -> torch.Generator:
    """A per-request CPU generator: a seeded request samples the same tokens in any batch."""
    seed = params.seed if params.seed is not None else random.SystemRandom().randrange(2**63)
    return torch.Generator().manual_seed(seed)


def filter_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Temperature, top-k, then top-p on one row of logits [vocab]; removed entries become -inf."""
    logits = logits.float() / params.temperature
    if params.top_k and params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # keep a token if the mass strictly before it is < top_p (so the top token is always kept)
        drop = (torch.cumsum(probs, dim=-1) - probs) >= params.top_p
        logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    return logits


def argmax_rows(logits: torch.Tensor) -> list[int]:
    """Each row's argmax, logits [B, vocab] -> [B] token ids (first maximum, as torch.argmax).

    A float32 / float64 CPU tensor goes through a numpy view (no copy): on one thread torch's CPU
    argmax took ~5x numpy's time at 32 x 259 and 10x at 32 x 32000 (torch 2.13)."""
    if logits.is_cpu and logits.dtype in (torch.float32, torch.float64):
        return (logits.detach() if logits.requires_grad
                else logits).numpy().argmax(axis=-1).tolist()
    return logits.argmax(dim=-1).tolist()


def sample(logits: torch.Tensor, params: list[SamplingParams],
           generators: list[torch.Generator]) -> list[int]:
    """logits [B, vocab] (one row per sequence) -> B token ids.

    Greedy rows take the argmax in one call; each sampling row draws from its own generator.
    Raises: ValueError unless params and generators have one entry per row."""
    if len(params) != logits.shape[0] or len(generators) != logits.shape[0]:
        raise ValueError(f"logits has {logits.shape[0]} rows but {len(params)} params and "
                         f"{len(generators)} generators were given (one each per row)")
    greedy = [i for i, p in enumerate(params) if p.greedy]
    if len(greedy) == len(params):
        return argmax_rows(logits)
    out = [0] * len(params)
    for i, token in zip(greedy, argmax_rows(logits[greedy]) if greedy else []):
        out[i] = token
    for i, (row, p, g) in enumerate(zip(logits, params, generators)):
        if not p.greedy:
            probs = torch.softmax(filter_logits(row, p), dim=-1).cpu()
            out[i] = int(torch.multinomial(probs, 1, generator=g))
    return out


def sample_one(seq: Sequence, row: torch.Tensor, params: SamplingParams | None = None,
               generator: torch.Generator | None = None) -> int:
    """One token from one row of logits [vocab], with seq's (or a forked child's) generator.

    Raises: SequenceFailure pinning any error on seq's request."""
    try:
        return sample(row[None], [params or seq.params], [generator or seq.generator])[0]
    except Exception as err:
        raise SequenceFailure(seq, f"sampling raised {type(err).__name__}: {err}") from err


def sample_step(seqs: list[Sequence], logits: torch.Tensor,
                samples: list[bool]) -> list[int | None]:
    """A step's tokens from logits [B, vocab]: one where samples[i] is True, else None.

    Greedy rows share one batched argmax (retried row by row if it fails); sampling rows draw one
    by one, each from its own generator.
    Raises: SequenceFailure pinning a failure on its request."""
    tokens: list[int | None] = [None] * len(seqs)
    params = [seq.params for seq in seqs]
    greedy = [i for i, (s, p) in enumerate(zip(samples, params)) if s and p.greedy]
    if greedy:
        # every row sampled and greedy (a greedy decode step): no copy, no loop
        whole = len(greedy) == len(seqs)
        rows = logits if whole else logits[greedy]
        try:
            picked = sample(rows, params if whole else [params[i] for i in greedy],
                            [seqs[i].generator for i in greedy])
        except Exception:
            for i in greedy:
                sample_one(seqs[i], logits[i])
            raise
        if whole:
            return picked
        for i, token in zip(greedy, picked):
            tokens[i] = token
    for i, s in enumerate(samples):
        if s and tokens[i] is None:
            tokens[i] = sample_one(seqs[i], logits[i])
    return tokens
