"""The chain, live: what each of the engine's seven modules did in one step, from its StepTrace alone.

    Scheduler → Block Manager → ModelRunner → PagedAttention → Sampler → Sequence update → free finished blocks

`chain_stages(trace, block_size)` gives one `Stage` per module: whether it did anything this step (an idle step,
a decode with no new block or nothing finished leaves some of them dimmed) and the values it handed on to the next
module (the arrow leaving it). With chunked prefill a "mixed" step feeds prompt chunks beside decodes; a prompt fed
a chunk before its last has no sampled token (the sampler's `mid_prefill`). `stage_sources(key)` gives the real
functions of paged/ that did that work, read with `inspect`, so the page shows the code that ran, never a copy.
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Callable

from paged.addressing import blocks_needed
from paged.attention import attention_sdpa, gather_kv, paged_attention_decode, paged_attention_prefill
from paged.block_manager import BlockManager
from paged.engine.runner import PagedBackend, prepare_inputs
from paged.engine.sampler import sample
from paged.engine import Scheduler
from paged.engine.trace import StepTrace
from paged.kv_cache import write_kv
from paged.sequence import Sequence

STAGES = ("scheduler", "block_manager", "model_runner", "paged_attention", "sampler", "sequence_update",
          "free_blocks")

# The functions of paged/ behind each module, in the order they run within a step.
SOURCES: dict[str, tuple[Callable, ...]] = {
    "scheduler": (Scheduler.schedule, Scheduler._schedule_prefill, Scheduler._schedule_decode,
                  Scheduler._schedule_chunked),
    "block_manager": (BlockManager.allocate, BlockManager.append_slot, BlockManager.ensure_capacity),
    "model_runner": (prepare_inputs,),
    "paged_attention": (PagedBackend.__call__, write_kv, PagedBackend.decode, paged_attention_decode,
                        paged_attention_prefill, gather_kv, attention_sdpa),
    "sampler": (sample,),
    "sequence_update": (Sequence.on_prefill_done, Sequence.on_chunk_done, Sequence.on_decode_done),
    "free_blocks": (Scheduler.finish, BlockManager.free),
}


@dataclass(frozen=True)
class Stage:
    """One module in one step. `out` is what it handed to the next module (the arrow leaving it), as plain values
    keyed by name; `active` is False when it did nothing this step (the page dims it)."""

    key: str
    active: bool
    out: dict = field(default_factory=dict)


def attention_tables(trace: StepTrace, block_size: int) -> dict[int, list[int]]:
    """seq_id -> the block table attention read this step, for every sequence fed tokens.

    A sequence still running after the step has it in `block_tables_after`. One that finished this step was freed
    before the trace was closed, so its table is rebuilt from the table before the step (none for a prompt's first
    step) and the blocks taken: those beyond what the old table covers are appended, one more taken replaced the
    shared last block (copy-on-write at decode)."""
    out = {}
    for s in trace.seqs:
        if not s.tokens_in:
            continue  # a forked sample: it shares its parent's blocks and was fed nothing
        if s.seq_id in trace.block_tables_after:
            out[s.seq_id] = list(trace.block_tables_after[s.seq_id])
            continue
        new = list(trace.blocks_allocated.get(s.seq_id, []))
        table = list(trace.block_tables_before.get(s.seq_id, []))
        grow = blocks_needed(s.context_len, block_size) - len(table)
        if len(new) > max(grow, 0):
            table[-1] = new.pop(0)  # copy-on-write replaced the shared last block
        out[s.seq_id] = table + new
    return out


def chain_stages(trace: StepTrace | None, block_size: int) -> list[Stage]:
    """The seven stages of one step (see the module docstring); all dimmed before the first step."""
    if trace is None:
        return [Stage(key, False) for key in STAGES]
    ran = trace.phase != "idle"
    fed = [s for s in trace.seqs if s.tokens_in]
    preempt_freed = {sid: trace.blocks_freed.get(sid, []) for sid in trace.preempted}
    finish_freed = {sid: trace.blocks_freed.get(sid, []) for sid in trace.finished}
    tables = attention_tables(trace, block_size)
    # chunked prefill: a prompt fed a chunk before its last samples nothing this step (token_out None)
    mid_prefill = [s.seq_id for s in fed if s.token_out is None and not s.finished]
    return [
        Stage("scheduler", ran or bool(trace.preempted),
              dict(phase=trace.phase, scheduled=list(trace.scheduled), why=list(trace.why),
                   preempted=list(trace.preempted))),
        Stage("block_manager", bool(trace.blocks_allocated or preempt_freed or trace.copies),
              dict(allocated={k: list(v) for k, v in trace.blocks_allocated.items()}, freed=preempt_freed,
                   copies=list(trace.copies))),
        Stage("model_runner", ran,
              dict(slot_mapping=list(trace.slot_mapping), block_tables=tables,
                   context_lens={s.seq_id: s.context_len for s in fed},
                   tokens=len(trace.slot_mapping))),
        Stage("paged_attention", ran,
              dict(written=len(trace.slot_mapping), read={s.seq_id: s.context_len for s in fed}, rows=len(fed),
                   call=trace.attention, kernel=trace.kernel)),  # what ran, as the runner recorded it
        Stage("sampler", ran, dict(tokens={s.seq_id: (s.token_out, s.text_out) for s in trace.seqs},
                                   mid_prefill=mid_prefill)),
        Stage("sequence_update", ran,
              dict(counts={s.seq_id: (s.cached_token_count, s.generated_len) for s in trace.seqs},
                   forked={k: list(v) for k, v in trace.forked.items()})),
        Stage("free_blocks", bool(trace.finished),
              dict(freed=finish_freed, free=trace.num_free_blocks, num_blocks=trace.num_blocks)),
    ]


def qualified_name(fn: Callable) -> str:
    """The dotted name of a function of paged/ (module, then qualified name), as the code picker shows it."""
    return f"{fn.__module__}.{fn.__qualname__}"


def stage_sources(key: str) -> list[tuple[str, str]]:
    """(qualified name, source) of each function of paged/ behind stage `key`, dedented, read from the files now.
    Raises ValueError for an unknown stage."""
    if key not in SOURCES:
        raise ValueError(f"unknown stage {key!r}; choose one of {STAGES}")
    return [(qualified_name(fn), textwrap.dedent(inspect.getsource(fn))) for fn in SOURCES[key]]
