"""What the engine lesson (lessons.engine) records for the pages to draw: a snapshot per step, the blocks a prompt
got when it was admitted, one row per sequence, a step's export, and how block tables changed across a step.
Plain values, no engine objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from paged.engine.twins import TwinStep


@dataclass
class Snapshot:
    """The engine after a step (step 0 = before any): per running or finished sequence (cached_token_count,
    generated length), blocks held (distinct) and blocks listed in tables (what no sharing would hold)."""

    step: int
    seqs: dict[int, tuple[int, int]]
    held_blocks: int
    table_blocks: int


@dataclass
class Allocation:
    """A prompt's blocks when a prefill step allocated them: the table and, per logical block, a prefix-cache hit."""

    step: int
    seq_id: int
    table: list[int]
    hits: list[bool]


@dataclass
class SeqRow:
    seq_id: int
    request_id: int
    sample_index: int
    prompt: str
    text: str
    status: str
    finish_reason: str | None
    prompt_len: int
    cached_token_count: int
    generated_len: int
    preemptions: int


def step_export(step: TwinStep) -> dict:
    """One step for the export: the paged engine's StepTrace and the comparison with its contiguous twin (whose own
    trace repeats the same schedule, so only what could differ is kept)."""
    tc = step.contiguous
    return {"paged": step.paged.to_dict(),
            "contiguous": {"phase": tc.phase, "scheduled": tc.scheduled, "tokens_out": [s.token_out for s in tc.seqs]},
            "logits_diff": {str(k): v for k, v in step.logits_diff.items()},
            "same_tokens": {str(k): v for k, v in step.same_tokens.items()}, "same_schedule": step.same_schedule}


def table_changes(before: Mapping[int, list[int]], after: Mapping[int, list[int]]
                  ) -> list[tuple[int, list[int], list[int], list[int]]]:
    """Block tables across one step: (seq_id, before, after, blocks in after that were not in before), for every
    sequence in either (a finished or preempted one has an empty `after`)."""
    out = []
    for sid in sorted(set(before) | set(after)):
        b, a = list(before.get(sid, [])), list(after.get(sid, []))
        out.append((sid, b, a, [x for x in a if x not in b]))
    return out
