"""The output processor: what a step's logits become once the model has run (vLLM's name).

    logits [B, vocab] → a checked token per sequence → its state rule (sequence.py)
    → n > 1: its parallel samples forked → a stop check → RequestOutput

A row with NaN or inf logits is blamed on its sequence (SequenceFailure: the engine rolls the
step back and ends that request). A sequence stops on an EOS id, a stop string or max_tokens;
the engine then frees its blocks. LLMEngine.step runs these in this order; forking, which mints
new sequences, stays with the engine and is handed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..config import SamplingParams
from ..sequence import Sequence
from .checkpoint import SequenceFailure
from .sampler import sample_step
from .trace import StepTrace


@dataclass
class RequestOutput:
    request_id: int
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finished: bool
    finish_reason: str | None = None
    num_preemptions: int = 0
    # every parallel sample's tokens (n > 1); [0] == token_ids
    samples: list[list[int]] = field(default_factory=list)
    sample_texts: list[str] = field(default_factory=list)


def request_output(group: list[Sequence], decode: Callable[[list[int]], str]) -> RequestOutput:
    """A request's output from its sequences: group[0] the request, then its forked samples."""
    seq = group[0]
    samples = [list(s.generated_token_ids) for s in group]
    return RequestOutput(seq.seq_id, list(seq.prompt_token_ids), list(seq.generated_token_ids),
                         decode(seq.generated_token_ids),
                         all(s.is_finished for s in group),
                         seq.finish_reason, sum(s.preemptions for s in group), samples,
                         [decode(t) for t in samples])


def check_stop(seq: Sequence, tokenizer) -> str | None:
    """Why seq stops after its newest token: "eos", "stop" (a stop string), "length", or None."""
    params: SamplingParams = seq.params
    if not params.ignore_eos:
        # every id that ends generation, else the one
        eos = getattr(tokenizer, "eos_token_ids", None)
        if seq.generated_token_ids[-1] in (eos if eos is not None
                                           else (tokenizer.eos_token_id,)):
            return "eos"
    if params.stop:
        text = tokenizer.decode(seq.generated_token_ids)
        if any(s in text for s in params.stop):
            return "stop"
    if len(seq.generated_token_ids) >= params.max_tokens:
        return "length"
    return None


def sample_checked(seqs: list[Sequence], logits: torch.Tensor,
                   chunks: list[int] | None) -> list[int | None]:
    """One token (or None: a non-final chunk) per sequence, from logits [len(seqs), vocab].

    chunks: the prompt tokens each sequence was fed (chunked prefill), or None.
    Raises: SequenceFailure for a sampling row whose logits hold NaN or inf."""
    samples = ([True] * len(seqs) if chunks is None
               else [n == s.num_uncached_tokens for s, n in zip(seqs, chunks)])
    # NaN or inf anywhere makes the sum NaN or inf: one reduction per step, and the row check
    # only then (a sum that overflowed from finite logits finds no bad row there and the step
    # goes on).
    if not math.isfinite(logits.sum()):
        finite = torch.isfinite(logits).all(dim=-1).tolist()
        bad = next((seq for seq, ok, s in zip(seqs, finite, samples) if s and not ok), None)
        if bad is not None:
            raise SequenceFailure(bad, "the model's logits hold NaN or inf")
    return sample_step(seqs, logits, samples)


def update_sequences(seqs: list[Sequence], tokens: list[int | None], logits: torch.Tensor,
                     fed: list[int], trace: StepTrace,
                     fork: Callable[[Sequence, torch.Tensor], list[Sequence]],
                     stop_reason: Callable[[Sequence], str | None],
                     ) -> list[tuple[int, Sequence, int | None, bool]]:
    """Apply each sequence's state rule (sequence.py), n > 1 forks and stops (trace.finished).

    logits [len(seqs), vocab]; fed: tokens fed per sequence. fork(parent, logits row) forks a
    prefilled parent's samples; stop_reason(seq) is check_stop's answer for seq.
    Returns what to record: (batch row, sequence, token, fed)."""
    rows = []
    for i, (seq, tok) in enumerate(zip(seqs, tokens)):
        children: list[Sequence] = []
        if tok is None:  # a prompt chunk that is not its last: nothing sampled
            seq.on_chunk_done(fed[i])
        # not a decode (of one new token)
        elif not (seq.generated_token_ids and seq.num_uncached_tokens == 1):
            seq.on_prefill_done(tok)
            if seq.n > 1:
                children = fork(seq, logits[i])
                trace.forked[seq.seq_id] = [c.seq_id for c in children]
        else:
            seq.on_decode_done(tok)
        for s in (seq, *children):
            reason = stop_reason(s) if tok is not None else None
            if reason is not None:
                s.finish_reason = reason
                trace.finished.append(s.seq_id)
            # children sampled from the parent's logits, fed nothing
            rows.append((i, s, tok, s is seq))
    return rows
