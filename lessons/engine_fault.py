"""Page 4's "break a module": one bug lab fault in the engine's paged twin (the contiguous twin stays the reference),
seen from the three places the page already shows.

    DemoConfig(fault="slot_off_by_one")   the lesson builds its paged twin with that fault (paged.faults' one hook)
    broken_stage(fault)                   the module of the chain whose link the fault breaks, and the link's name
    first_difference(lesson)              the first step and sequence where the twins part (logits, then tokens)
    rule_checks(lesson, seq_id)           the state rule as the broken link saw it, row by row

Everything is read from the StepTraces (which record the step's inputs as the runner used them, the fault's
included: slot_mapping, context_lens, positions) and from the fault hook's public attribute `read_first`. The
rule's side is rebuilt independently: a step that leaves cached_token_count = n must read n tokens, fed at token
indexes n - len(fed) … n - 1, each written at table[i // block_size] * block_size + i % block_size.
"""

from __future__ import annotations

from dataclasses import dataclass

from paged.engine.twins import RTOL
from paged.faults import Fault, as_fault, fault_hook

from .chain import attention_tables
from .state_rule import state_rows

NO_FAULT = "none"
FAULT_CHOICES = (NO_FAULT, *(f.value for f in Fault))  # the picker's options (also the URL's ?fault=)

# The module of the chain (lessons.chain.STAGES) that hands on the broken value, and that value's name (a page's
# strings key "link_<name>"). The runner builds slot_mapping, block_tables, context_lens and positions;
# PagedAttention orders the write and the read, and writes the padding rows.
BROKEN: dict[Fault, tuple[str, str]] = {
    Fault.EARLY_INCREMENT: ("paged_attention", "read_before_write"),
    Fault.LATE_INCREMENT: ("model_runner", "context_lens"),
    Fault.SLOT_OFF_BY_ONE: ("model_runner", "slot_mapping"),
    Fault.BLOCK_SIZE_MISMATCH: ("model_runner", "slot_mapping"),
    Fault.USE_AFTER_FREE: ("model_runner", "block_tables"),
    Fault.POSITION_OFF_BY_ONE: ("model_runner", "positions"),
    Fault.PAD_NOT_SKIPPED: ("paged_attention", "pad_written"),
    Fault.ALIASED_BLOCKS: ("model_runner", "block_tables"),
}


def parse_choice(value: str) -> Fault | None:
    """A picker value ("none" or a fault name) -> the fault; ValueError naming the valid choices."""
    if value == NO_FAULT:
        return None
    if value not in FAULT_CHOICES:
        raise ValueError(f"unknown fault {value!r}; choose one of {list(FAULT_CHOICES)}")
    return Fault(value)


def broken_stage(fault: Fault | str | None) -> tuple[str, str] | None:
    """(stage key, broken value) for `fault`; None without one."""
    fault = as_fault(fault)
    return None if fault is None else BROKEN[fault]


@dataclass(frozen=True)
class FirstDiff:
    """Where the twins first part: `step` (1 = the first), the paged seq id, max |Δlogits| there and its tolerance;
    `token_step` is the first step whose sampled token differs (None: every token so far agrees)."""

    step: int
    seq_id: int
    diff: float
    tol: float
    token_step: int | None
    token_seq_id: int | None


def first_difference(lesson) -> FirstDiff | None:
    """The first step and sequence whose logits leave the twin's by more than fp32 rounding (RTOL of the logits'
    size) or whose token differs, and the first step with a different token. None while the twins agree."""
    first = token = None
    for number, step in enumerate(lesson.steps, 1):
        for seq_id in sorted(step.logits_diff):
            tol = RTOL * max(1.0, step.logits_scale.get(seq_id, 0.0))
            wrong_token = not step.same_tokens.get(seq_id, True)
            if first is None and (step.logits_diff[seq_id] > tol or wrong_token):
                first = (number, seq_id, step.logits_diff[seq_id], tol)
            if token is None and wrong_token:
                token = (number, seq_id)
        if first is not None and token is not None:
            break
    if first is None:
        return None
    return FirstDiff(*first, *(token or (None, None)))


@dataclass(frozen=True)
class RuleCheck:
    """One step of one sequence: the state rule's values next to what the step used (from its trace).

    cached_after: cached_token_count after the step (the sequence's own count; every fault leaves it right).
    context_len: the tokens attention was told to read. written_at_read: how many of them were written when it read
    (one fewer when the read runs before the write). positions / slots: as fed; want_*: by the rule."""

    step: int
    phase: str
    cached_after: int
    context_len: int
    written_at_read: int
    positions: tuple[int, ...]
    want_positions: tuple[int, ...]
    slots: tuple[int, ...]
    want_slots: tuple[int, ...]

    @property
    def problems(self) -> tuple[str, ...]:
        """Which rule the step broke: "read_short" / "read_long" (context_len ≠ cached_token_count),
        "unwritten" (counted before written), "position", "slot". Empty when it kept them all."""
        out = []
        if self.context_len < self.cached_after:
            out.append("read_short")
        elif self.context_len > self.cached_after:
            out.append("read_long")
        if self.written_at_read < self.context_len:
            out.append("unwritten")
        if self.positions != self.want_positions:
            out.append("position")
        if self.slots != self.want_slots:
            out.append("slot")
        return tuple(out)


def rule_checks(lesson, seq_id: int) -> list[RuleCheck]:
    """The rows of `seq_id` (the paged twin's traces; forks, which feed nothing, are left out)."""
    traces = [s.paged for s in lesson.steps]
    block_size = lesson.view.block_size
    hook = fault_hook(lesson.config.fault, block_size, lesson.view.num_blocks * block_size)
    out = []
    for row in state_rows(traces, seq_id):
        if row.phase == "fork":
            continue
        table = attention_tables(traces[row.step - 1], block_size).get(seq_id, [])
        indexes = tuple(range(row.cached_after - len(row.fed), row.cached_after))
        want_slots = tuple(table[i // block_size] * block_size + i % block_size if i // block_size < len(table)
                           else -1 for i in indexes)
        late_write = hook.read_first and row.phase == "decode"
        out.append(RuleCheck(row.step, row.phase, row.cached_after, row.context_len,
                             row.context_len - 1 if late_write else row.context_len, row.positions, indexes,
                             row.slots, want_slots))
    return out
