"""StepTrace: everything one engine step did, so a UI can replay it without recomputing.

An engine built with record=False (the benchmarks) fills in the scheduler's decisions and the
free-block count only: seqs, slot_mapping, the block tables and the queues stay empty."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Callable

from ..block_manager import first_owners


@dataclass
class SeqStepState:
    """One scheduled sequence within a step."""

    seq_id: int
    # token ids fed this step (whole uncached prompt at prefill, last token at decode)
    tokens_in: list[int]
    positions: list[int]  # their positions (decode: num_tokens - 1)
    slots: list[int]  # where their K/V were written (slot_mapping entries)
    context_len: int  # tokens of history read by attention this step (written ones included)
    # sampled token (None if the step produced none: aborted, or a non-final prompt chunk)
    token_out: int | None
    cached_token_count: int = 0  # after the step
    generated_len: int = 0  # after the step
    finished: bool = False
    finish_reason: str | None = None
    # token ids -> text
    decode: Callable[[list[int]], str] | None = field(default=None, repr=False, compare=False)

    @property
    def text_out(self) -> str:
        """The sampled token's text ("" without one), decoded when read (UI only)."""
        return ("" if self.token_out is None or self.decode is None
                else self.decode([self.token_out]))

    def to_dict(self) -> dict:
        """Every field but `decode`, plus text_out."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "decode"}
        d.update(tokens_in=list(self.tokens_in), positions=list(self.positions),
                 slots=list(self.slots),
                 text_out=self.text_out)
        return d


@dataclass
class StepTrace:
    step: int
    # "prefill", "decode", "mixed" (chunked prefill: decodes beside prompt chunks) or "idle"
    phase: str
    reason: str  # in English; `why` holds the same as (code, values) pieces for a UI to translate
    kv_layout: str
    seqs: list[SeqStepState] = field(default_factory=list)
    slot_mapping: list[int] = field(default_factory=list)  # the whole step's, in feed order
    block_tables_before: dict[int, list[int]] = field(default_factory=dict)
    block_tables_after: dict[int, list[int]] = field(default_factory=dict)
    blocks_allocated: dict[int, list[int]] = field(default_factory=dict)
    blocks_freed: dict[int, list[int]] = field(default_factory=dict)
    # copy-on-write (src block, dst block)
    copies: list[tuple[int, int]] = field(default_factory=list)
    # parent seq id -> children made this step (n > 1)
    forked: dict[int, list[int]] = field(default_factory=dict)
    preempted: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    num_free_blocks: int = 0
    num_blocks: int = 0
    waiting: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    elapsed_ms: float = 0.0
    # the attention call that ran: "paged_attention_decode" or "…_prefill" ("" for none)
    attention: str = ""
    # the kernel behind it: an impl of paged.attention.DECODE_IMPLS, or "sdpa" (prefill's)
    kernel: str = ""
    # see paged.engine.scheduler.WHY_ENGLISH
    why: list[tuple[str, dict]] = field(default_factory=list)
    # seq_id -> its guesses' fate (engine/speculation.py)
    speculative: dict[int, dict] = field(default_factory=dict)
    # preemption_mode="swap" (paged/engine/swapping.py): seq id -> (pool block, swap block) pairs
    # copied out this step, seq id -> (swap block, pool block) pairs copied back, the seqs waiting
    # in the swap pool after it
    swap_out: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    swap_in: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    swapped: list[int] = field(default_factory=list)
    num_free_swap_blocks: int = 0
    num_swap_blocks: int = 0  # 0: recompute mode, no swap pool

    @property
    def blocks_to_swap_out(self) -> list[tuple[int, int]]:
        """vLLM v0's mapping: every (src, dst) pair this step swapped out, in order."""
        return [p for pairs in self.swap_out.values() for p in pairs]

    @property
    def blocks_to_swap_in(self) -> list[tuple[int, int]]:
        return [p for pairs in self.swap_in.values() for p in pairs]
    # sliding window: blocks left behind it
    window_freed: dict[int, list[int]] = field(default_factory=dict)

    @property
    def scheduled(self) -> list[int]:
        return [s.seq_id for s in self.seqs]

    def to_dict(self) -> dict:
        # asdict would deep-copy each state's decode (its tokenizer)
        d = asdict(replace(self, seqs=[]))
        d["seqs"] = [s.to_dict() for s in self.seqs]
        for key in ("block_tables_before", "block_tables_after", "blocks_allocated", "blocks_freed",
                    "forked",
                    "speculative", "swap_out", "swap_in", "window_freed"):
            d[key] = {str(k): v for k, v in d[key].items()}  # JSON object keys are strings
        d["scheduled"] = self.scheduled
        # physical block -> first running owner after the step: derived here, for exports only, not
        # on the step
        d["ownership"] = first_owners(self.block_tables_after, self.num_blocks)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def summary(self) -> str:
        """One line for the CLI."""
        ids = ",".join(str(s) for s in self.scheduled) or "-"
        extra = ""
        if self.blocks_allocated:
            extra += f" new_blocks={self.blocks_allocated}"
        if self.window_freed:
            extra += f" window_freed={self.window_freed}"
        if self.preempted:
            extra += f" preempted={self.preempted}"
        if self.swap_out or self.swap_in:
            extra += f" swap_out={self.blocks_to_swap_out} swap_in={self.blocks_to_swap_in}"
        if self.finished:
            extra += f" finished={self.finished}"
        return (f"[step {self.step:3d}] {self.phase:7s} seqs={ids} "
                f"slots={self.slot_mapping[:8]}{'…' if len(self.slot_mapping) > 8 else ''} "
                f"free={self.num_free_blocks}/{self.num_blocks}{extra}")
