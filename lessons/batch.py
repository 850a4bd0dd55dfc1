"""The batch-decode page's state: a `Playground` plus the log of operations that built it.

Operations are short strings, so a whole session fits in a URL and replays exactly:

    "d"      decode step for every running sequence
    "f<id>"  finish sequence <id> (its blocks return to the free list)
    "a<n>"   add a sequence with a prompt of n tokens (blocks from the free list)

Each successful operation is followed by one `Playground.check()` (paged vs contiguous for every running sequence).
The playground's seeded generators (one for K/V, one for check queries) make replaying the same log perform the
same draws in the same order, reproducing the state bit for bit. An operation the pool cannot fit changes nothing and is not
logged: it returns an `Event` with ok=False and a reason.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from paged.addressing import blocks_needed
from .playground import DecodeCheck, Playground
from .address import SEED_BATCH, dtype_of

OP_PATTERN = re.compile(r"^(d|f\d{1,3}|a\d{1,4})$")
MAX_OPS = 256


@dataclass(frozen=True)
class BatchConfig:
    block_size: int = 4
    num_blocks: int = 12
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 8
    dtype: str = "float32"
    seed: int = 0

    def seed_tables_fit(self) -> bool:
        """Whether the seed's block tables (A [7,2,9], B [4,1], C [8,5,3,6]) are exactly right for this pool: every
        block exists and each table has exactly the blocks its context needs (block_size 4)."""
        return all(max(t) < self.num_blocks and blocks_needed(n, self.block_size) == len(t) for t, n in SEED_BATCH)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Event:
    """What one operation did. kind: "start", "decode", "finish", "add". ok=False: nothing changed, see reason."""

    kind: str
    ok: bool = True
    reason: str = ""                                          # "pool_full", "not_running", "bad_op", "too_long"
    written: dict[int, int] = field(default_factory=dict)     # decode: seq_id -> slot written
    new_blocks: dict[int, list[int]] = field(default_factory=dict)  # seq_id -> blocks taken from the free list
    freed: list[int] = field(default_factory=list)            # finish: blocks returned
    seq_id: int | None = None                                 # finish / add: the sequence
    detail: str = ""                                          # the library's message, when there is one
    counts: dict[str, int] = field(default_factory=dict)      # numbers behind a refusal: need, free, tokens

    def to_dict(self) -> dict:
        return asdict(self)


class BatchDemo:
    """A Playground started with the seed batch (A, B, C), driven by logged operations."""

    def __init__(self, config: BatchConfig, device=None) -> None:
        self.config, self.device = config, device
        self.playground = Playground(config.num_blocks, config.block_size, config.num_heads, config.num_kv_heads,
                                     config.head_dim, dtype_of(config.dtype), device, seed=config.seed)
        self.ops: list[str] = []
        start = Event("start")
        use_seed = config.seed_tables_fit()
        for table, length in SEED_BATCH:
            try:
                seq = self.playground.add_sequence(length, list(table) if use_seed else None)
                start.new_blocks[seq.seq_id] = list(seq.block_table)
            except ValueError as err:  # a pool too small for the whole seed batch starts with what fits
                start.ok, start.reason, start.detail = False, "pool_full", str(err)
                break
        self.used_seed_tables = use_seed
        self.last_event = start
        self.checks: list[DecodeCheck] = self.playground.check()

    # --- operations -----------------------------------------------------------------------------------------
    def apply(self, op: str) -> Event:
        """Run one operation; log it and re-check on success. Never raises for a well-formed op."""
        if not OP_PATTERN.match(op):
            event = Event("bad_op", ok=False, reason="bad_op", detail=op)
        elif len(self.ops) >= MAX_OPS:
            event = Event("bad_op", ok=False, reason="too_long", detail=f"at most {MAX_OPS} steps")
        elif op == "d":
            event = self._decode()
        elif op[0] == "f":
            event = self._finish(int(op[1:]))
        else:
            event = self._add(int(op[1:]))
        if event.ok:
            self.ops.append(op)
            self.checks = self.playground.check()
        self.last_event = event
        return event

    def _decode(self) -> Event:
        pg = self.playground
        running = pg.running()
        if not running:
            return Event("decode", ok=False, reason="nothing_running")
        if not pg.can_decode():
            short = [s.seq_id for s in running if pg.manager.needs_new_block(s)]
            free = pg.manager.num_free_blocks
            return Event("decode", ok=False, reason="pool_full",
                         detail=f"{len(short)} sequence(s) need a new block, {free} free",
                         counts={"need": len(short), "free": free})
        before = {s.seq_id: len(s.block_table) for s in running}
        written = pg.decode_step()
        new_blocks = {s.seq_id: s.block_table[before[s.seq_id]:] for s in running
                      if len(s.block_table) > before[s.seq_id]}
        return Event("decode", written=written, new_blocks=new_blocks)

    def _finish(self, seq_id: int) -> Event:
        seq = self.playground.sequences.get(seq_id)
        if seq is None or seq not in self.playground.running():
            return Event("finish", ok=False, reason="not_running", seq_id=seq_id)
        return Event("finish", freed=self.playground.finish(seq_id), seq_id=seq_id)

    def _add(self, prompt_len: int) -> Event:
        pg = self.playground
        if prompt_len < 1:
            return Event("add", ok=False, reason="bad_op", detail=f"a{prompt_len}")
        needed = blocks_needed(prompt_len, self.config.block_size)
        if needed > pg.manager.num_free_blocks:
            free = pg.manager.num_free_blocks
            return Event("add", ok=False, reason="pool_full",
                         detail=f"{prompt_len} tokens need {needed} blocks, {free} free",
                         counts={"tokens": prompt_len, "need": needed, "free": free})
        seq = pg.add_sequence(prompt_len)
        return Event("add", seq_id=seq.seq_id, new_blocks={seq.seq_id: list(seq.block_table)})

    # --- replay and views ------------------------------------------------------------------------------------
    @classmethod
    def replay(cls, config: BatchConfig, ops: list[str], device=None) -> tuple["BatchDemo", int]:
        """A fresh demo with `ops` applied in order; stops at the first op that fails. Returns (demo, number of
        ops applied)."""
        demo = cls(config, device)
        for i, op in enumerate(ops[:MAX_OPS]):
            if not demo.apply(op).ok:
                return demo, i
        return demo, min(len(ops), MAX_OPS)

    def without_last(self) -> "BatchDemo":
        """"Back": a fresh demo with every logged operation but the last, replayed from the start, so it is exactly
        the state the page had before that operation (the seeded draws replay in the same order)."""
        demo, _ = BatchDemo.replay(self.config, self.ops[:-1], self.device)
        return demo

    def tables(self) -> dict[int, list[int]]:
        """seq_id -> block_table of every running sequence."""
        return {s.seq_id: list(s.block_table) for s in self.playground.running()}

    def context_lens(self) -> dict[int, int]:
        """seq_id -> cached_token_count (the context a decode query reads) of every running sequence."""
        return {s.seq_id: s.cached_token_count for s in self.playground.running()}

    def trace(self) -> dict:
        """The current state and the log that reproduces it, JSON-ready."""
        pg = self.playground
        return {
            "config": self.config.to_dict(), "ops": list(self.ops), "step": len(self.ops),
            "used_seed_tables": self.used_seed_tables,
            "sequences": [{"seq_id": s.seq_id, "status": s.status.value, "block_table": list(s.block_table),
                           "cached_token_count": s.cached_token_count,
                           "generated_token_count": len(s.generated_token_ids)} for s in pg.sequences.values()],
            "free_block_ids": list(pg.manager.free_block_ids),
            "last_event": self.last_event.to_dict(),
            "checks": [asdict(c) for c in self.checks],
        }
