"""The bug lab on random tensors: each classic fault acted out on a `Playground` batch, with no model.

A `FaultyPlayground` breaks the chain through the very hook the engine's runner uses (`paged.faults.fault_hook`),
so the symptom can be seen without a language model in the way:

    EARLY_INCREMENT      decode reads the newest token's slot before its K/V are written (read-before-write)
    LATE_INCREMENT       decode reads context_len - 1 tokens: the newest one is left out
    SLOT_OFF_BY_ONE      the writer puts every token one slot further (clamped to the pool's last slot)
    BLOCK_SIZE_MISMATCH  the writer computes slots with writer_block_size(block_size)
    USE_AFTER_FREE       decode reads through a per-row table cache refreshed only when the row's table grows, so
                         after a finish the next sequence reads through the dead sequence's (freed) table
    PAD_NOT_SKIPPED      every write carries NUM_PAD_ROWS padding rows of slot -1, which wrap to the last slot
    ALIASED_BLOCKS       writer and reader both use a table whose logical block 1 maps to logical block 0's block
    POSITION_OFF_BY_ONE  nothing here: random K/V have no rotary embedding, so a wrong position changes nothing.
                         Reported honestly as `applies=False`; the symptom needs the model.

Every step reports, per sequence, the relative error of the paged decode output against the contiguous twin, and
which pool cells were written or read wrongly (for the pool figure). The random draws (K/V, then queries) are the
same with and without the fault, so the two runs differ only by the bug.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from paged.addressing import PAD_SLOT, slot_mapping
from paged.attention import contiguous_attention_decode, paged_attention_decode, tolerance
from paged.faults import Fault, as_fault, fault_hook
from .playground import Playground
from paged.sequence import Sequence
from .address import SEED_BATCH, follow


@dataclass(frozen=True)
class TensorScenario:
    """The batch a fault is acted out on: the seed article's A, B, C by default.

    tables / prompt_lens: each sequence's prefill block table and prompt length. finish_after: (seq_id, step)
    pairs, the sequence finishing (blocks freed) right after that decode step.
    """

    tables: tuple[tuple[int, ...], ...] = tuple(t for t, _ in SEED_BATCH)
    prompt_lens: tuple[int, ...] = tuple(n for _, n in SEED_BATCH)
    num_steps: int = 6
    finish_after: tuple[tuple[int, int], ...] = ((0, 3),)  # A finishes after step 3, B and C decode on
    num_blocks: int = 16
    block_size: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 8
    seed: int = 0


DEFAULT_TENSOR = TensorScenario()
# PAD_NOT_SKIPPED needs the pool's last block in use: C's last block is the pool's block 15, and C's token 15 lands
# in its last slot (63) at step 1, together with the padding rows.
TENSOR_SCENARIOS = {Fault.PAD_NOT_SKIPPED: TensorScenario(tables=((7, 2, 9), (4, 1), (8, 5, 3, 15)))}


def tensor_scenario_for(fault: Fault | str | None, seed: int = 0) -> TensorScenario:
    """The scenario in which `fault` shows on random tensors (the same for every fault but padding)."""
    base = TENSOR_SCENARIOS.get(as_fault(fault), DEFAULT_TENSOR)
    return base if seed == base.seed else TensorScenario(**{**asdict(base), "seed": seed})


@dataclass(frozen=True)
class BadCell:
    """One pool cell a fault touched wrongly during a step.

    kind "write": token `token_index` of `seq_id` had its K/V written at `slot` instead of `meant` (a padding row:
    token_index -1, meant -1, i.e. nowhere). kind "read": attention read `slot` for that token where it should have
    read `meant` (slot == meant: read before it was written). kind "skipped": the token was not read at all
    (slot -1).
    """

    kind: str
    seq_id: int
    token_index: int
    slot: int
    meant: int


@dataclass
class TensorStep:
    """One step of the random-tensor run: step 0 is the prefill (writes only), then decode steps 1, 2, …"""

    step: int
    rel_err: dict[int, float] = field(default_factory=dict)   # seq_id -> paged vs contiguous decode output
    bad_writes: list[BadCell] = field(default_factory=list)
    bad_reads: list[BadCell] = field(default_factory=list)
    tables: dict[int, list[int]] = field(default_factory=dict)  # the block manager's (correct) tables, this step
    cached_token_counts: dict[int, int] = field(default_factory=dict)  # tokens written per sequence after the step
    finished: list[int] = field(default_factory=list)            # sequences finished right after this step

    @property
    def max_rel_err(self) -> float:
        return max(self.rel_err.values(), default=0.0)


@dataclass
class TensorRun:
    fault: Fault | None
    scenario: TensorScenario
    steps: list[TensorStep]
    tolerance: float

    @property
    def applies(self) -> bool:
        """False when the fault cannot act without a model (a wrong RoPE position on random K/V)."""
        return self.fault is not Fault.POSITION_OFF_BY_ONE

    @property
    def max_rel_err(self) -> float:
        return max((s.max_rel_err for s in self.steps), default=0.0)

    def first_bad_step(self, seq_id: int | None = None) -> int | None:
        """The first decode step whose relative error (of `seq_id`, default any) exceeds the tolerance."""
        for s in self.steps:
            errs = s.rel_err.values() if seq_id is None else [s.rel_err.get(seq_id, 0.0)]
            if any(e > self.tolerance for e in errs):
                return s.step
        return None

    def writes_until(self, step: int) -> list[BadCell]:
        """Every wrong write of steps 0 … step (their damage stays in the pool until overwritten)."""
        return [c for s in self.steps if s.step <= step for c in s.bad_writes]

    def to_dict(self) -> dict:
        return {"fault": self.fault.value if self.fault else None, "scenario": asdict(self.scenario),
                "tolerance": self.tolerance, "applies": self.applies,
                "steps": [{**asdict(s), "rel_err": {str(k): v for k, v in s.rel_err.items()},
                           "tables": {str(k): v for k, v in s.tables.items()},
                           "cached_token_counts": {str(k): v for k, v in s.cached_token_counts.items()}}
                          for s in self.steps]}


class FaultyPlayground(Playground):
    """A Playground whose writer and reader carry one fault (or none): the fault lives in this object only."""

    def __init__(self, scenario: TensorScenario, fault: Fault | str | None = None,
                 device: str | torch.device | None = None) -> None:
        s = scenario
        super().__init__(s.num_blocks, s.block_size, s.num_heads, s.num_kv_heads, s.head_dim, torch.float32, device,
                         seed=s.seed)
        self.fault = as_fault(fault)
        self.hook = fault_hook(self.fault, s.block_size, self.pool.num_slots)  # the engine's hook, the same code
        self.bad_writes: list[BadCell] = []  # of the step in progress

    # --- the write side -----------------------------------------------------------------------------------------
    def writer_slots(self, spans: list[tuple[Sequence, int, int]]) -> list[int]:
        """Where this playground's writer puts tokens [start, end) of each (seq, start, end) span, the fault
        applied by the hook; the spans are the batch rows, in order."""
        tables = [list(seq.block_table) for seq, _, _ in spans]
        right = torch.cat([slot_mapping(t, start, end, self.block_size) for t, (_, start, end) in zip(tables, spans)])
        sizes = torch.tensor([end - start for _, start, end in spans])
        rows = torch.repeat_interleave(torch.arange(len(spans)), sizes)
        token_index = torch.cat([torch.arange(start, end) for _, start, end in spans])
        return self.hook.write_slots(right, tables, rows, token_index).tolist()

    def _write_batch(self, spans: list[tuple[Sequence, int, int]]) -> None:
        """One write call for tokens [start, end) of each listed sequence, as the engine writes a whole step: the
        pool at the (faulty) writer's slots, the twin in token order; wrong slots recorded in bad_writes."""
        keys, values = [], []
        slots = self.writer_slots(spans)
        at_row = 0
        for seq, start, end in spans:
            k, v = self._random_kv(end - start)
            at, at_row = slots[at_row:at_row + end - start], at_row + end - start
            right = slot_mapping(seq.block_table, start, end, self.block_size).tolist()
            self.twins[seq.seq_id].update(0, torch.arange(start, end), k, v)
            self.last_write[seq.seq_id] = at
            self.record_writes(seq.seq_id, start, at)
            self.bad_writes += [BadCell("write", seq.seq_id, t, a, r)
                                for t, a, r in zip(range(start, end), at, right) if a != r]
            keys.append(k)
            values.append(v)
        # padding rows (if the hook writes any) copy the batch's first row; written after the real rows so the
        # collision is deterministic: the padding wins, as it may on a GPU
        self.hook.write(*self.pool.layer(0), torch.cat(keys), torch.cat(values),
                        torch.tensor(slots, dtype=torch.long, device=self.device))
        self.bad_writes += [BadCell("write", spans[0][0].seq_id, -1, slot, -1)
                            for slot in sorted(set(self.hook.pad_slots().tolist()))]

    def _write(self, seq: Sequence, start: int, end: int) -> None:
        """Playground's prefill write, with the fault (add_sequence calls this)."""
        self._write_batch([(seq, start, end)])

    # --- the read side ------------------------------------------------------------------------------------------
    def _bad_reads(self, seq: Sequence, table: list[int], read_len: int) -> list[BadCell]:
        """Cells read wrongly when `seq` is read through `table` (the hook's read table) for `read_len` tokens:
        each slot compared with the one its own block table gives (-1: the table has no entry for the token)."""
        bs, newest = self.block_size, seq.cached_token_count  # newest token's index (not yet counted)
        right = slot_mapping(seq.block_table, 0, max(read_len, newest + 1), bs).tolist()
        out = []
        for t in range(read_len):
            slot = follow(t, table, bs).slot
            slot = PAD_SLOT if slot is None else slot
            if slot != right[t] or (self.hook.read_first and t == newest):
                out.append(BadCell("read", seq.seq_id, t, slot, right[t]))
        if read_len <= newest:  # LATE_INCREMENT: the newest token is not read at all
            out.append(BadCell("skipped", seq.seq_id, newest, PAD_SLOT, right[newest]))
        return out

    # --- one decode step ----------------------------------------------------------------------------------------
    def fault_step(self, step: int) -> TensorStep:
        """Decode every running sequence once with the fault in place; compare each output with its twin."""
        seqs = self.running()
        if not self.can_decode([s.seq_id for s in seqs]):
            raise ValueError(f"step {step}: not enough free blocks for every sequence to append a slot")
        self.bad_writes = []
        for seq in seqs:
            self.manager.append_slot(seq)  # the table grows before the step's inputs are built, as in the engine
        tables = self.hook.read_tables([list(s.block_table) for s in seqs], decode=True)
        lens = [s.cached_token_count + 1 for s in seqs]  # the newest token included: the state rule
        read_lens = self.hook.context_lens(torch.tensor(lens), decode=True).tolist()
        reads = [c for s, t, n in zip(seqs, tables, read_lens) for c in self._bad_reads(s, t, n)]
        query = torch.randn(len(seqs), self.num_heads, self.pool.head_dim, generator=self.query_generator)
        query = query.to(self.device, self.dtype)
        spans = [(s, s.cached_token_count, s.cached_token_count + 1) for s in seqs]

        def read() -> torch.Tensor:
            # impl="loop": the teaching loop, token by token through the table (and no shared gather workspace,
            # which an engine run under inference_mode may have filled with inference tensors in this thread)
            return paged_attention_decode(query, *self.pool.layer(0), tables, read_lens, impl="loop",
                                          validate=False)

        out = self.hook.decode(lambda: self._write_batch(spans), read)  # EARLY_INCREMENT: read, then write
        result = TensorStep(step, bad_writes=self.bad_writes, bad_reads=reads)
        for b, seq in enumerate(seqs):
            seq.on_decode_done(next_token_id=0)
            keys, values = self.twins[seq.seq_id].get(0)
            ref = contiguous_attention_decode(query[b:b + 1].double(), keys[None].double(), values[None].double(),
                                              [lens[b]])[0]
            err = (out[b].double() - ref).abs().max().item()
            result.rel_err[seq.seq_id] = err / max(ref.abs().max().item(), 1e-12)
        return result

    def snapshot(self, result: TensorStep) -> TensorStep:
        """Fill in the tables and lengths the step ended with (for the pool figure)."""
        result.tables = {s.seq_id: list(s.block_table) for s in self.running()}
        result.cached_token_counts = {s.seq_id: s.cached_token_count for s in self.running()}
        return result


def run_tensor_fault(fault: Fault | str | None, scenario: TensorScenario | None = None,
                     device: str | torch.device | None = None) -> TensorRun:
    """Prefill the scenario's batch and decode it for `num_steps` with `fault` (None: no fault) on random K/V.

    Returns every step's relative errors and wrong cells. Raises ValueError for a scenario that does not fit its pool.
    """
    fault = as_fault(fault)
    scenario = scenario or tensor_scenario_for(fault)
    if len(scenario.tables) != len(scenario.prompt_lens):
        raise ValueError(f"{len(scenario.tables)} tables for {len(scenario.prompt_lens)} prompt lengths")
    pg = FaultyPlayground(scenario, fault, device)
    prefill = TensorStep(0)
    for table, n in zip(scenario.tables, scenario.prompt_lens):
        pg.add_sequence(n, list(table))
        prefill.bad_writes += pg.bad_writes
        pg.bad_writes = []
    steps = [pg.snapshot(prefill)]
    for k in range(1, scenario.num_steps + 1):
        result = pg.snapshot(pg.fault_step(k))
        for seq_id, after in scenario.finish_after:
            if after == k and seq_id in pg.twins:  # still running
                pg.finish(seq_id)
                result.finished.append(seq_id)
        steps.append(result)
    return TensorRun(fault, scenario, steps, tolerance(torch.float32))
