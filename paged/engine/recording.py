"""What a step records for the pages: LLMEngine(record=True), the default.

Every StepTrace says what the scheduler decided (phase, reasons, blocks allocated and freed,
copy-on-write copies, preempted, forked, finished) and the free-block count: the engine's step fills
those in whatever `record` is. A recorded step adds what a page replays and draws: the block tables
before and after the step, the step's slot_mapping, one SeqStepState per scheduled sequence (forked
children included), the waiting and running queues; and the engine's `last_logits` (seq id -> logits
row, for the twins' parity check) gets this step's rows. record=False (the engine benchmarks) keeps
none of it: the step's tokens are the same.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..sequence import Sequence
from ..batch import BatchInput
from .trace import SeqStepState, StepTrace


def block_tables(seqs: list[Sequence]) -> dict[int, list[int]]:
    """seq id -> a copy of its block table (the step goes on to change them)."""
    return {s.seq_id: list(s.block_table) for s in seqs}


class StepRecorder:
    """The per-sequence part of one recorded step, made once the model has run.

    The batch's tensors are read into lists once here, not once per sequence; `last_logits` loses
    its finished sequences before the step writes."""

    def __init__(self, trace: StepTrace, batch: BatchInput, logits: torch.Tensor,
                 decode: Callable[[list[int]], str],
                 last_logits: dict[int, torch.Tensor], sequences: dict[int, Sequence]) -> None:
        trace.slot_mapping = batch.slot_mapping.tolist()
        self.trace, self.batch, self.decode, self.last_logits = trace, batch, decode, last_logits
        self.fed_ids, self.fed_positions = batch.input_ids.tolist(), batch.positions.tolist()
        # rows: views, one call
        self.context_lens, self.rows = batch.context_lens.tolist(), logits.unbind(0)
        # Drop finished sequences' rows first: the dict would otherwise keep one [vocab] row per
        # sequence ever served (a finished one's row stays readable until the next step: parity
        # checks read it after the step).
        for sid in [sid for sid in last_logits if sequences[sid].is_finished]:
            del last_logits[sid]

    def add(self, i: int, s: Sequence, tok: int | None, fed: bool = True) -> None:
        """Record sequence s of batch row i after its update (tok: its token, None mid-prompt).

        fed=False: a child forked from row i's sequence this step, fed nothing, sampled from row
        i's logits."""
        start, n = self.batch.starts[i], self.batch.query_lens[i]
        tokens = slice(start, start + n) if fed else slice(0, 0)
        self.last_logits[s.seq_id] = self.rows[i]
        self.trace.seqs.append(SeqStepState(
            seq_id=s.seq_id, tokens_in=self.fed_ids[tokens], positions=self.fed_positions[tokens],
            slots=self.trace.slot_mapping[tokens], context_len=self.context_lens[i],
            token_out=s.generated_token_ids[-1] if tok is not None else None,
            cached_token_count=s.cached_token_count, generated_len=len(s.generated_token_ids),
            finished=s.is_finished, finish_reason=s.finish_reason, decode=self.decode))


def record_queues(trace: StepTrace, waiting: list[Sequence], running: list[Sequence]) -> None:
    """The end of a recorded step: the running sequences' block tables and both queues' seq ids."""
    trace.block_tables_after = block_tables(running)
    trace.waiting = [s.seq_id for s in waiting]
    trace.running = [s.seq_id for s in running]
