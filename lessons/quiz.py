"""Predict, then reveal: questions generated from a lesson's live state, so they never run out.

Each function takes a page's state and a seed and returns a `Question` whose answer is what the library will do:

    address_question(block_table, block_size, seed)   page 1: a random token's physical block, offset or slot
    batch_question(lesson, seed)                         page 3: which sequences take a new block at the next decode
    engine_question(lesson, seed)                        page 4: a sequence's cached_token_count after the next step
    prefix_question(lesson, seed)                        page 4: how many blocks of a prompt admitted next step are
                                                       prefix-cache hits (prefix caching on)
    next_step_question(lesson, seed)                     page 4: the prefix one when it can be asked, else the
                                                       cached_token_count one (the next step run once for both)

Texts are keys of ui/strings/quiz.py with their values; a value named "seq" / "seqs" holds sequence ids for the UI
to label. The engine question runs the next step on a copy of the paged engine (the model and tokenizer shared, read
only), so its answer and its why come from the scheduler itself, and the live lesson is untouched.
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
    """kind: "address" (choices are ints), "new_block" (tuples of seq ids; () is "none"), "cached_after" (ints),
    "prefix_hits" (ints: blocks)."""

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
def batch_question(lesson, seed: int) -> Question | None:
    """Which running sequences take a new block at the next decode step? None when nothing runs or the pool could
    not give every one of them a block (the step would be refused)."""
    tables, cached = lesson.tables(), lesson.cached_token_counts()
    if not tables:
        return None
    bs = lesson.config.block_size
    full = sorted(sid for sid, table in tables.items() if cached[sid] == len(table) * bs)  # no free slot left
    if len(full) > lesson.playground.manager.num_free_blocks:
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
def dry_step(lesson) -> tuple[StepTrace, EngineView]:
    """The paged engine's next step run on a deep copy (weights and tokenizer shared): (its trace, its view)."""
    engine = lesson.engine
    shared = {id(engine.model): engine.model, id(engine.tokenizer): engine.tokenizer}
    twin = copy.deepcopy(engine, shared)
    trace = twin.step()
    return trace, engine_view(twin)


def engine_question(lesson, seed: int, dry: tuple[StepTrace, EngineView] | None = None) -> Question | None:
    """A waiting or running sequence's cached_token_count after the next step, answered by running that step on a
    copy (`dry`: that step's dry_step, when already run). None when no step can run or every sequence finished."""
    view = lesson.view
    live = sorted(sid for sid, s in view.seqs.items() if s.status != "finished")
    if not live or not lesson.can_step():
        return None
    rng = random.Random(seed)
    sid = rng.choice(live)
    s = view.seqs[sid]
    trace, after = dry or dry_step(lesson)
    answer = after.seqs[sid].cached_token_count
    before, known = s.cached_token_count, s.prompt_len + len(s.generated_token_ids)
    fed = next((x for x in trace.seqs if x.seq_id == sid and x.tokens_in), None)
    decodes = s.status == "running" and bool(s.generated_token_ids) and before == known - 1
    if sid in trace.preempted:
        why = [("why_preempted", dict(seq=sid, before=before))]
    elif fed is not None and not decodes and fed.token_out is None and not fed.finished:
        why = [("why_prefill_chunk", dict(seq=sid, fed=len(fed.tokens_in), start=fed.positions[0], after=answer,
                                           total=known))]
    elif fed is not None and not decodes:
        why = [("why_prefill", dict(seq=sid, fed=len(fed.tokens_in), start=fed.positions[0], after=answer))]
    elif fed is not None:
        why = [("why_decode", dict(seq=sid, before=before, after=answer))]
    elif s.status == "running" and lesson.config.enable_chunked_prefill:  # older sequences used the token budget
        why = [("why_waits_budget", dict(seq=sid, seqs=list(trace.scheduled), before=before,
                                         budget=lesson.config.max_num_batched_tokens))]
    elif s.status == "running":
        why = [("why_waits_prefill", dict(seq=sid, seqs=list(trace.scheduled), before=before))]
    else:
        why = [("why_stays_waiting", dict(seq=sid, before=before))]
    why.append(("why_scheduler", dict(why=list(trace.why))))
    distractors = [before, before + 1, known, 0, s.prompt_len, before + 2]
    choices = _choices(rng, answer, distractors, lambda: rng.randrange(known + 3))
    return Question("cached_after", ("ask_cached_after", dict(seq=sid, before=before, status=s.status)), choices,
                    answer, tuple(why))


def prefix_question(lesson, seed: int, dry: tuple[StepTrace, EngineView] | None = None) -> Question | None:
    """How many blocks of a waiting prompt that the next step admits are prefix-cache hits? Answered by running the
    step on a copy (`dry` as for engine_question): the hits its allocation found. None unless prefix caching is on
    and the next step admits a waiting prompt. Only full blocks before the one holding the last token can hit."""
    view = lesson.view
    if not lesson.config.enable_prefix_caching or not lesson.can_step():
        return None
    waiting = [sid for sid, s in view.seqs.items() if s.status == "waiting"]
    if not waiting:
        return None
    trace, after = dry or dry_step(lesson)
    bs = view.block_size
    known = {sid: view.seqs[sid].prompt_len + len(view.seqs[sid].generated_token_ids) for sid in waiting}
    # admitted next step, with at least one full block before the one holding its last token (else nothing to ask)
    admitted = sorted(sid for sid in waiting if sid in trace.blocks_allocated and known[sid] > bs)
    if not admitted:
        return None
    rng = random.Random(seed)
    sid = rng.choice(admitted)
    tokens = known[sid]
    most = (tokens - 1) // bs  # full blocks before the one holding the last token
    table, hits = after.seqs[sid].block_table, after.prefix_hits.get(sid, ())
    answer = sum(hits)
    if answer:
        why = ("why_prefix_hit", dict(seq=sid, hits=answer, blocks=list(table[:answer]), cached=answer * bs))
    else:
        why = ("why_prefix_miss", dict(seq=sid, block_size=bs))
    near = [d for d in (0, most, answer + 1, answer - 1, most - 1) if 0 <= d <= most]
    choices = _choices(rng, answer, near, lambda: rng.randrange(most + 1), count=min(4, most + 1))
    return Question("prefix_hits", ("ask_prefix_hits", dict(seq=sid, tokens=tokens, block_size=bs)), choices,
                    answer, (why, ("why_prefix_rule", dict(most=most))))


def next_step_question(lesson, seed: int) -> Question | None:
    """Page 4's question: the prefix-hit one when it can be asked (prefix caching on, a prompt admitted next
    step), else the cached_token_count one; the next step is run once on a copy for both."""
    if not lesson.can_step() or all(s.status == "finished" for s in lesson.view.seqs.values()):
        return None
    dry = dry_step(lesson)
    return prefix_question(lesson, seed, dry) or engine_question(lesson, seed, dry)
