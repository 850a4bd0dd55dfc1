"""Predict, then reveal: questions generated from a lesson's live state, so they never run out.

Each function takes a page's state and a seed and returns a `Question` whose answer is what the library will do:

    address_question(block_table, block_size, seed)   page 1: a random token's physical block, offset or slot
    batch_question(demo, seed)                         page 3: which sequences take a new block at the next decode
    engine_question(demo, seed)                        page 4: a sequence's cached_token_count after the next step

Texts are keys of ui/strings/quiz.py with their values; a value named "seq" / "seqs" holds sequence ids for the UI
to label. The engine question runs the next step on a copy of the paged engine (the model and tokenizer shared, read
only), so its answer and its why come from the scheduler itself, and the live demo is untouched.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field

from paged.addressing import locate
from paged.engine.trace import StepTrace
from paged.engine.view import EngineView, engine_view

Piece = tuple[str, dict]  # (strings key, its values)


@dataclass(frozen=True)
class Question:
    """kind: "address" (choices are ints), "new_block" (tuples of seq ids; () is "none"), "cached_after" (ints)."""

    kind: str
    prompt: Piece
    choices: tuple
    answer: object
    why: tuple[Piece, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        assert self.answer in self.choices and len(set(self.choices)) == len(self.choices), "bad choices"


def _choices(rng: random.Random, answer, distractors, fill, count: int = 4) -> tuple:
    """The answer plus distinct distractors (then `fill()` draws) up to `count`, shuffled."""
    out = [answer]
    for d in list(distractors) + [fill() for _ in range(4 * count)]:
        if len(out) == count:
            break
        if d not in out:
            out.append(d)
    rng.shuffle(out)
    return tuple(out)


# --- page 1 · address translation -----------------------------------------------------------------------------------
ADDRESS_FIELDS = ("physical_block_id", "block_offset", "slot")


def address_question(block_table: list[int], block_size: int, seed: int) -> Question:
    """Which physical block / offset / slot holds a random token of `block_table`? Distractors are the classic
    slips: the logical block id used as the physical one, the offset forgotten, block and offset swapped.
    Raises ValueError for an empty table (locate's rules otherwise)."""
    if not block_table:
        raise ValueError("the block table is empty: nothing to ask about")
    rng = random.Random(seed)
    token = rng.randrange(len(block_table) * block_size)
    a = locate(token, block_table, block_size)
    fields = ADDRESS_FIELDS if block_size > 1 else ("physical_block_id", "slot")
    name = rng.choice(fields)
    answer = getattr(a, name)
    p, o, lg, bs = a.physical_block_id, a.block_offset, a.logical_block_id, block_size
    blocks = max(max(block_table) + 1, len(block_table), 8)  # block ids a pool of this table could have
    slips = {
        "physical_block_id": ([lg, block_table[(lg + 1) % len(block_table)], o, token], lambda: rng.randrange(blocks)),
        "block_offset": ([lg % bs, (o + 1) % bs, bs - 1 - o], lambda: rng.randrange(bs)),
        "slot": ([lg * bs + o, p * bs, p + o, o * bs + p, p * bs + o + 1], lambda: rng.randrange(blocks * bs)),
    }
    distractors, fill = slips[name]
    why = (("why_address", dict(token=token, block_size=bs, logical=lg, physical=p, offset=o, slot=a.slot)),)
    return Question("address", (f"ask_{name}", dict(token=token, block_size=bs)),
                    _choices(rng, answer, [d for d in distractors if d >= 0 and d != answer], fill), answer, why)


# --- page 3 · batch decode ------------------------------------------------------------------------------------------
def batch_question(demo, seed: int) -> Question | None:
    """Which running sequences take a new block at the next decode step? None when nothing runs or the pool could
    not give every one of them a block (the step would be refused)."""
    tables, cached = demo.tables(), demo.context_lens()
    if not tables:
        return None
    bs = demo.config.block_size
    full = sorted(sid for sid, table in tables.items() if cached[sid] == len(table) * bs)  # no free slot left
    if len(full) > demo.playground.manager.num_free_blocks:
        return None
    rng = random.Random(seed)
    answer = tuple(full)
    ids = sorted(tables)
    distractors = [()] + [(sid,) for sid in ids] + ([tuple(ids)] if len(ids) > 1 else [])
    rng.shuffle(distractors)
    choices = _choices(rng, answer, distractors, lambda: (), count=min(4, len(set(distractors + [answer]))))
    why = tuple(("why_full" if sid in full else "why_room",
                 dict(seq=sid, cached=cached[sid], blocks=len(tables[sid]), block_size=bs)) for sid in ids)
    return Question("new_block", ("ask_new_block", {}), choices, answer, why)


# --- page 4 · engine ------------------------------------------------------------------------------------------------
def dry_step(demo) -> tuple[StepTrace, EngineView]:
    """The paged engine's next step run on a deep copy (weights and tokenizer shared): (its trace, its view)."""
    engine = demo.engine
    shared = {id(engine.model): engine.model, id(engine.tokenizer): engine.tokenizer}
    twin = copy.deepcopy(engine, shared)
    trace = twin.step()
    return trace, engine_view(twin)


def engine_question(demo, seed: int) -> Question | None:
    """A waiting or running sequence's cached_token_count after the next step, answered by running that step on a
    copy. None when no step can run or every sequence finished."""
    view = demo.view
    live = sorted(sid for sid, s in view.seqs.items() if s.status != "finished")
    if not live or not demo.can_step():
        return None
    rng = random.Random(seed)
    sid = rng.choice(live)
    s = view.seqs[sid]
    trace, after = dry_step(demo)
    answer = after.seqs[sid].cached_token_count
    before, known = s.cached_token_count, s.prompt_len + len(s.generated_token_ids)
    fed = next((x for x in trace.seqs if x.seq_id == sid and x.tokens_in), None)
    if sid in trace.preempted:
        why = [("why_preempted", dict(seq=sid, before=before))]
    elif fed is not None and trace.phase == "prefill":
        why = [("why_prefill", dict(seq=sid, fed=len(fed.tokens_in), start=fed.positions[0], after=answer))]
    elif fed is not None:
        why = [("why_decode", dict(seq=sid, before=before, after=answer))]
    elif s.status == "running":
        why = [("why_waits_prefill", dict(seq=sid, seqs=list(trace.scheduled), before=before))]
    else:
        why = [("why_stays_waiting", dict(seq=sid, before=before))]
    why.append(("why_scheduler", dict(why=list(trace.why))))
    distractors = [before, before + 1, known, 0, s.prompt_len, before + 2]
    choices = _choices(rng, answer, distractors, lambda: rng.randrange(known + 3))
    return Question("cached_after", ("ask_cached_after", dict(seq=sid, before=before, status=s.status)), choices,
                    answer, tuple(why))
