"""The batch-decode page's lesson (`BatchLesson`, st.session_state["batch.lesson"]): a `Playground` plus the log of
operations that built it.

Operations are short strings, so a whole session fits in a URL and replays exactly:

    "d"      decode step for every running sequence
    "f<id>"  finish sequence <id> (its blocks return to the free list)
    "a<n>"   add a sequence with a prompt of n tokens (blocks from the free list)
    "w<id>"  a decode step in which sequence <id> writes its newest token's K/V one slot past its own (a bug to
             watch: `Event.misplaced` names the sequence whose slot it hit; the checks then fail)

Each successful operation is followed by one `Playground.check()` (paged vs contiguous for every running sequence).
The playground's seeded generators (one for K/V, one for check queries) make replaying the same log perform the
same draws in the same order, reproducing the state bit for bit. An operation the pool cannot fit changes nothing and is not
logged: it returns an `Event` with ok=False and a reason.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from paged.addressing import blocks_needed, locate
from .playground import DecodeCheck, Playground
from .rewind import Checkpoints
from .address import SEED_BATCH, dtype_of

OP_PATTERN = re.compile(r"^(d|f[0-9]{1,3}|a[0-9]{1,4}|w[0-9]{1,3})$")  # ASCII digits: \d takes "٣"
MAX_OPS = 256
MAX_PROMPT_LEN = 64  # tokens in an added sequence's prompt


def parse_ops(text: str) -> tuple[list[str], list[str]]:
    """A comma-separated op log (a link's `ops=`) -> (the well-formed ops, at most MAX_OPS, in order; every entry
    left out: malformed ones, empty ones between commas, those past MAX_OPS). Never raises."""
    entries = [e.strip() for e in str(text).split(",")] if str(text).strip() else []
    good = [e for e in entries if OP_PATTERN.match(e)]
    bad = [e for e in entries if not OP_PATTERN.match(e)] + good[MAX_OPS:]
    return good[:MAX_OPS], bad


def ops_in_link(text: str) -> str | None:
    """A link's `ops=` as the ops it can use, comma-separated (a ui.parsers parser): None when it holds entries but
    none well-formed, so the page's link box names the value whenever anything was left out."""
    good, bad = parse_ops(text)
    return None if bad and not good else ",".join(good)


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
class Misplaced:
    """A write that went one slot too far: `seq_id`'s token `token_index` belonged at `slot` but went to `written`
    (-1: past the pool's end, dropped). `victim` holds the block of `written` (the sequence itself, another one, or
    None for a free block), as its token `victim_token`; `overwrote` says whether that token's K/V were already
    written (they are now lost) or the slot was still empty (its owner will write over the stray K/V later)."""

    seq_id: int
    token_index: int
    slot: int
    written: int
    victim: int | None
    victim_token: int | None
    overwrote: bool


@dataclass
class Event:
    """What one operation did. kind: "start", "decode", "finish", "add". ok=False: nothing changed, see reason."""

    kind: str
    ok: bool = True
    reason: str = ""  # "pool_full", "not_running", "bad_op", "too_long", "out_of_range"
    written: dict[int, int] = field(default_factory=dict)     # decode: seq_id -> slot written
    new_blocks: dict[int, list[int]] = field(default_factory=dict)  # seq_id -> blocks taken from the free list
    freed: list[int] = field(default_factory=list)            # finish: blocks returned
    seq_id: int | None = None                                 # finish / add: the sequence
    detail: str = ""                                          # the library's message, when there is one
    counts: dict[str, int] = field(default_factory=dict)      # numbers behind a refusal: need, free, tokens
    misplaced: Misplaced | None = None                        # "w<id>": where the misplaced write landed

    def to_dict(self) -> dict:
        return asdict(self)


class BatchLesson:
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
        self.armed: int | None = None  # arm_wrong_slot: the next "d" becomes "w<armed>"
        self.last_event = start
        self.checks: list[DecodeCheck] = self.playground.check()
        self._rewind = Checkpoints()  # copies every few ops, shared with this lesson's Backs (lessons.rewind)

    # --- operations -----------------------------------------------------------------------------------------
    def arm_wrong_slot(self, seq_id: int | None) -> None:
        """Make the next decode step ("d") a "w<seq_id>" step: that sequence's newest token goes one slot too far.
        None disarms. Used once: the armed step disarms it (a refused step too)."""
        self.armed = seq_id

    def apply(self, op: str) -> Event:
        """Run one operation; log it and re-check on success. Never raises for a well-formed op."""
        if op == "d" and self.armed is not None:
            op, self.armed = f"w{self.armed}", None
        if not OP_PATTERN.match(op):
            event = Event("bad_op", ok=False, reason="bad_op", detail=op)
        elif len(self.ops) >= MAX_OPS:
            event = Event("bad_op", ok=False, reason="too_long", detail=f"at most {MAX_OPS} steps")
        elif op == "d":
            event = self._decode()
        elif op[0] == "f":
            event = self._finish(int(op[1:]))
        elif op[0] == "w":
            event = self._decode(misplace=int(op[1:]))
        else:
            event = self._add(int(op[1:]))
        if event.ok:
            self.ops.append(op)
            self.checks = self.playground.check()
        self.last_event = event
        if event.ok:
            self._rewind.save(len(self.ops), self, self.ops)
        return event

    def add(self, prompt_len: int) -> Event:
        """Add a sequence with a prompt of `prompt_len` tokens (the "a<n>" operation). A length outside
        1..MAX_PROMPT_LEN is refused (ok=False, reason "out_of_range", counts value/lo/hi), never replaced by
        another."""
        if not 1 <= prompt_len <= MAX_PROMPT_LEN:
            self.last_event = self._out_of_range(prompt_len)
            return self.last_event
        return self.apply(f"a{prompt_len}")

    @staticmethod
    def _out_of_range(prompt_len: int) -> Event:
        return Event("add", ok=False, reason="out_of_range", detail=f"a{prompt_len}",
                     counts={"value": prompt_len, "lo": 1, "hi": MAX_PROMPT_LEN})

    def _decode(self, misplace: int | None = None) -> Event:
        pg = self.playground
        running = pg.running()
        if not running:
            return Event("decode", ok=False, reason="nothing_running")
        if misplace is not None and misplace not in [s.seq_id for s in running]:
            return Event("decode", ok=False, reason="not_running", seq_id=misplace)
        if not pg.can_decode():
            short = [s.seq_id for s in running if pg.manager.needs_new_block(s)]
            free = pg.manager.num_free_blocks
            return Event("decode", ok=False, reason="pool_full",
                         detail=f"{len(short)} sequence(s) need a new block, {free} free",
                         counts={"need": len(short), "free": free})
        before = {s.seq_id: len(s.block_table) for s in running}
        cached = {s.seq_id: s.cached_token_count for s in running}  # what each had written before this step
        written = pg.decode_step(misplace=misplace)
        new_blocks = {s.seq_id: s.block_table[before[s.seq_id]:] for s in running
                      if len(s.block_table) > before[s.seq_id]}
        event = Event("decode", written=written, new_blocks=new_blocks)
        if misplace is not None:
            event.misplaced = self._where(misplace, written[misplace], cached)
        return event

    def _where(self, seq_id: int, written: int, cached: dict[int, int]) -> Misplaced:
        """Whose slot a write one slot too far landed in. `cached`: each sequence's cached_token_count before the
        step. A token below it was already written; a token written this step was lost only if its owner wrote it
        before the stray write (the step goes through the running sequences in order)."""
        seq = self.playground.sequences[seq_id]
        token, bs = seq.cached_token_count - 1, self.config.block_size
        slot = locate(token, seq.block_table, bs).slot
        if written < 0:
            return Misplaced(seq_id, token, slot, written, None, None, False)
        block, offset = divmod(written, bs)
        order = [s.seq_id for s in self.playground.running()]
        for s in self.playground.running():
            if block in s.block_table:
                victim_token = s.block_table.index(block) * bs + offset
                done = cached[s.seq_id] + (order.index(s.seq_id) < order.index(seq_id))  # written by then
                return Misplaced(seq_id, token, slot, written, s.seq_id, victim_token, victim_token < done)
        return Misplaced(seq_id, token, slot, written, None, None, False)

    def _finish(self, seq_id: int) -> Event:
        seq = self.playground.sequences.get(seq_id)
        if seq is None or seq not in self.playground.running():
            return Event("finish", ok=False, reason="not_running", seq_id=seq_id)
        return Event("finish", freed=self.playground.finish(seq_id), seq_id=seq_id)

    def _add(self, prompt_len: int) -> Event:
        pg = self.playground
        if prompt_len < 1:
            return Event("add", ok=False, reason="bad_op", detail=f"a{prompt_len}")
        if prompt_len > MAX_PROMPT_LEN:
            return self._out_of_range(prompt_len)
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
    def replay(cls, config: BatchConfig, ops: list[str], device=None) -> tuple["BatchLesson", int]:
        """A fresh demo with `ops` applied in order; stops at the first op that fails. Returns (demo, number of
        ops applied)."""
        demo = cls(config, device)
        for i, op in enumerate(ops[:MAX_OPS]):
            if not demo.apply(op).ok:
                return demo, i
        return demo, min(len(ops), MAX_OPS)

    def without_last(self) -> "BatchLesson":
        """"Back": the demo with every logged operation but the last, exactly the state the page had before that
        operation (the seeded draws replay in the same order): the newest checkpoint of this log at or before it
        (lessons.rewind), the few ops after it replayed; from the start when there is none."""
        ops = self.ops[:-1]
        found = self._rewind.best(len(ops), lambda _, log, at: list(log) == ops[:at])
        if found is None:
            at, demo = 0, BatchLesson(self.config, self.device)
            demo._rewind = self._rewind
        else:
            at, demo = found
        for op in ops[at:]:
            if not demo.apply(op).ok:  # as `replay`: the first op that fails ends it
                break
        return demo

    def tables(self) -> dict[int, list[int]]:
        """seq_id -> block_table of every running sequence."""
        return {s.seq_id: list(s.block_table) for s in self.playground.running()}

    def cached_token_counts(self) -> dict[int, int]:
        """seq_id -> cached_token_count (tokens whose K/V are in the pool) of every running sequence. Not a
        context_len: the next decode step reads cached_token_count + 1 tokens, its own included."""
        return {s.seq_id: s.cached_token_count for s in self.playground.running()}

    def trace(self) -> dict:
        """The page's export (batch_trace.json): the current state and the op log that reproduces it, JSON-ready.
        "trace" here is the export's old name, not a StepTrace (no engine runs on this page)."""
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
