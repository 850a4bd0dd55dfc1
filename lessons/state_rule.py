"""The state rule at a glance: one sequence's rows, one per engine step it took part in, built from StepTraces.

Each row says what the step fed, where its K/V went, and the two counters the article's rule is about:

    cached_token_count   tokens whose K/V are written (before → after the step)
    generated_token_ids  tokens sampled so far (after the step)

After a prefill cached == every token fed (the prompt, or prompt + generated after a preemption) and one more token
is sampled; each decode feeds the newest generated token, writes its K/V (cached + 1) and samples the next one.
With chunked prefill a long prompt is fed over several steps: each chunk adds its length to cached_token_count and
samples nothing; only the last chunk samples the first generated token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from paged.engine.trace import StepTrace


@dataclass(frozen=True)
class RuleRow:
    """One step of one sequence. phase: "prefill", "decode", or "fork" (a parallel sample made this step: it shares
    its parent's blocks, was fed nothing and sampled its first token from the parent's logits).

    A prefill spread over several steps (chunked prefill) has one "prefill" row per chunk: `chunk` is its number
    (1, 2, …) and `num_chunks` how many the prompt took, None while the last chunk has not run yet. A prompt fed
    whole has chunk 1 of 1; decode and fork rows have 0 of 0. Only the last chunk samples a token."""

    step: int                     # the page's step number (1 = the first step)
    phase: str
    fed: tuple[int, ...]          # token ids fed this step
    positions: tuple[int, ...]    # their token indexes
    slots: tuple[int, ...]        # where their K/V were written
    cached_before: int            # cached_token_count when the forward ran (the first fed token's index)
    cached_after: int
    generated: tuple[int, ...]    # generated_token_ids after the step
    context_len: int              # tokens attention read this step
    finished: bool = False
    chunk: int = 0
    num_chunks: int | None = 0
    sampled: int | None = None    # the token sampled this step (None: a prompt chunk before the last, or a fork's)

    @property
    def chunked(self) -> bool:
        """A prefill row that is one chunk of several (or of a prefill not finished yet)."""
        return self.phase == "prefill" and self.num_chunks != 1


def state_rows(traces: Sequence[StepTrace], seq_id: int) -> list[RuleRow]:
    """The rows of sequence `seq_id` over `traces` (in step order; trace i is step i + 1). A step it was not
    scheduled in has no row. The generated ids are rebuilt from each step's sampled token.

    Each row's phase is the sequence's own, not the step's (a "mixed" step holds decodes and prompt chunks): a
    prefill runs from the sequence's first step (or its first after a preemption) until it samples; every later
    fed step is a decode."""
    rows: list[RuleRow] = []
    generated: list[int] = []
    prefilling, chunk, run_start = True, 0, 0  # run_start: the index in rows of the current prefill's first chunk
    for number, trace in enumerate(traces, 1):
        if seq_id in trace.preempted:  # its cache is forgotten: the next fed step starts a new prefill
            prefilling, chunk = True, 0
        state = next((s for s in trace.seqs if s.seq_id == seq_id), None)
        if state is None:
            continue
        if state.token_out is not None:
            generated.append(state.token_out)
        assert len(generated) == state.generated_len, "a sampled token is missing from the traces"
        values = dict(step=number, fed=tuple(state.tokens_in), positions=tuple(state.positions),
                      slots=tuple(state.slots), cached_after=state.cached_token_count, generated=tuple(generated),
                      context_len=state.context_len, finished=state.finished, sampled=state.token_out)
        if not state.tokens_in:
            rows.append(RuleRow(phase="fork", cached_before=state.cached_token_count, **values))
            prefilling = False  # a sample forked after its parent's prefill: it decodes from the next step on
            continue
        if not prefilling:
            rows.append(RuleRow(phase="decode", cached_before=state.positions[0], **values))
            continue
        if chunk == 0:
            run_start = len(rows)
        chunk += 1
        rows.append(RuleRow(phase="prefill", cached_before=state.positions[0], chunk=chunk, num_chunks=None,
                            **values))
        if state.token_out is not None or state.finished:  # the last chunk: the prefill is done
            rows[run_start:] = [replace(r, num_chunks=chunk) for r in rows[run_start:]]
            prefilling, chunk = False, 0
    return rows


def tail(values: Sequence, keep: int = 4) -> tuple[bool, tuple]:
    """(cut, the last `keep` values): what a narrow column shows of a long list."""
    return len(values) > keep, tuple(values[-keep:])
