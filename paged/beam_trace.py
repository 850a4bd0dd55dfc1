"""What one beam-search step did (BeamStepTrace: a StepTrace plus the beam tree's moves) and a search's result."""

from __future__ import annotations

from dataclasses import dataclass, field

from .beam_select import Hypothesis
from .engine.trace import StepTrace


@dataclass
class BeamStepTrace(StepTrace):
    """A StepTrace plus what the beam tree did: beams (after the step, best first: seq_id, parent seq_id, token,
    score, cached_token_count, token_ids generated so far), pruned seq ids (their freed blocks are in
    blocks_freed), hypotheses finished this step (parent seq_id, token_ids, score), the tables the model read
    (tables_read), and cow_skipped (break-it: (seq_id, shared block) written without a copy). A group preempted
    as a whole gets a trace of phase "preempt": its beams in `preempted`, the blocks released in blocks_freed."""

    beams: list[dict] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)
    hypotheses: list[dict] = field(default_factory=list)
    tables_read: dict[int, list[int]] = field(default_factory=dict)
    cow_skipped: list[tuple[int, int]] = field(default_factory=list)

    @property
    def blocks_shared(self) -> int:
        """Distinct physical blocks the running beams' tables held when the model ran (with sharing)."""
        return len({b for t in self.tables_read.values() for b in t})

    @property
    def blocks_unshared(self) -> int:
        """Blocks the same beams would hold without sharing: every table its own."""
        return sum(len(t) for t in self.tables_read.values())


@dataclass
class BeamResult:
    """The K finished beams, best first, every step's trace, and how often the group was preempted."""

    prompt_token_ids: list[int]
    beams: list[Hypothesis]
    traces: list[BeamStepTrace]
    preemptions: int = 0

    def memory(self) -> tuple[int, int]:
        """(blocks with sharing, blocks without) summed over the steps: KV memory x time, the paper's §4.4 saving
        is 1 - the first / the second."""
        return (sum(t.blocks_shared for t in self.traces), sum(t.blocks_unshared for t in self.traces))
