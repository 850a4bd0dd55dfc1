"""The state rule at a glance: one sequence's rows, one per engine step it took part in, built from StepTraces.

Each row says what the step fed, where its K/V went, and the two counters the article's rule is about:

    cached_token_count   tokens whose K/V are written (before → after the step)
    generated_token_ids  tokens sampled so far (after the step)

After a prefill cached == every token fed (the prompt, or prompt + generated after a preemption) and one more token
is sampled; each decode feeds the newest generated token, writes its K/V (cached + 1) and samples the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from paged.engine.trace import StepTrace


@dataclass(frozen=True)
class RuleRow:
    """One step of one sequence. phase: "prefill", "decode", or "fork" (a parallel sample made this step: it shares
    its parent's blocks, was fed nothing and sampled its first token from the parent's logits)."""

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


def state_rows(traces: Sequence[StepTrace], seq_id: int) -> list[RuleRow]:
    """The rows of sequence `seq_id` over `traces` (in step order; trace i is step i + 1). A step it was not
    scheduled in has no row. The generated ids are rebuilt from each step's sampled token."""
    rows: list[RuleRow] = []
    generated: list[int] = []
    for number, trace in enumerate(traces, 1):
        state = next((s for s in trace.seqs if s.seq_id == seq_id), None)
        if state is None:
            continue
        if state.token_out is not None:
            generated.append(state.token_out)
        assert len(generated) == state.generated_len, "a sampled token is missing from the traces"
        if state.tokens_in:
            phase, before = trace.phase, state.positions[0]
        else:
            phase, before = "fork", state.cached_token_count
        rows.append(RuleRow(number, phase, tuple(state.tokens_in), tuple(state.positions), tuple(state.slots),
                            before, state.cached_token_count, tuple(generated), state.context_len,
                            state.finished))
    return rows


def tail(values: Sequence, keep: int = 4) -> tuple[bool, tuple]:
    """(cut, the last `keep` values): what a narrow column shows of a long list."""
    return len(values) > keep, tuple(values[-keep:])
