"""The state behind page 11 · Sliding window: one request run three ways, step by step, for the page to play back.

- the paged engine with the window (blocks behind the window freed as it slides: the page's block table),
- its contiguous twin (every token kept, the window a mask: the reference the break-it drifts from),
- the paged engine without a window (what memory the same request would hold with full attention).

Everything is recorded once per configuration (`run_window`) from the engines' StepTraces; the page only moves a
step index over the frames. The break-it (free_early) is paged.engine.windowing's: the block manager frees the
block the window still starts in, one block too early.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from paged.config import CacheConfig, SamplingParams
from paged.engine.window_engine import window_engine
from paged.engine.windowing import held_blocks
from paged.chapters.window import HOLE, max_blocks_held, window_start

from .quiz import Question, _choices

WINDOWS = (2, 3, 4, 6, 8, 12, 16)
BLOCK_SIZES = (1, 2, 4, 8)
# The shipped model copies back the text before SEP (the recall task): a window shorter than the text cannot.
PROMPTS = {"recall": "blocks of KV", "long": "the window slides over the block table"}
MAX_TOKENS, NUM_BLOCKS = 16, 64
MAX_STEPS = MAX_TOKENS  # one prefill, then a decode per token


@dataclass(frozen=True)
class WindowConfig:
    window: int = 6
    block_size: int = 4
    prompt: str = "recall"
    free_early: bool = False  # the break-it

    def __post_init__(self) -> None:
        if self.window not in WINDOWS or self.block_size not in BLOCK_SIZES or self.prompt not in PROMPTS:
            raise ValueError(f"window must be one of {WINDOWS}, block_size one of {BLOCK_SIZES}, prompt one of "
                             f"{sorted(PROMPTS)}; got {self.window}, {self.block_size}, {self.prompt!r}")


NEIGHBOUR = "a neighbour arrives"  # request B, added after A's prefill: its prefill takes blocks A's window freed
A, B = 0, 1  # the two requests' ids (the same in the three engines: they are added in the same order)


@dataclass
class WindowFrame:
    """The requests after `step` steps (frame 0: before the first). tables: request -> its block table (HOLE = -1
    where the window freed a block); cached: A's cached_token_count; first_read: the first token A's next token
    reads; freed: A's blocks that step released behind its window; taken: blocks B took that A had held;
    held / held_full: blocks both requests hold with / without the window."""

    step: int
    phase: str
    tables: dict[int, list[int]]
    cached: int
    first_read: int
    freed: list[int]
    taken: list[int]
    held: int
    held_full: int
    token_ids: list[int]  # A's prompt + generated so far (paged engine)
    twin_ids: list[int]  # the contiguous twin's
    num_free_blocks: int
    neighbour_ids: list[int] = field(default_factory=list)  # B's prompt + generated so far
    allocated: dict[int, list[int]] = field(default_factory=dict)  # request -> blocks this step gave it
    neighbour_freed: list[int] = field(default_factory=list)  # B's blocks released behind its window

    @property
    def early(self) -> list[int]:
        """A's blocks this step released that its table still lists (the break-it: its window still reads
        them)."""
        live = set(self.table)
        return [b for b in self.freed if b in live]

    @property
    def behind(self) -> list[int]:
        """A's blocks this step released that were wholly before its window (the other freed blocks)."""
        early = set(self.early)
        return [b for b in self.freed if b not in early]

    @property
    def table(self) -> list[int]:
        return self.tables.get(A, [])


@dataclass
class WindowRun:
    config: WindowConfig
    prompt_len: int
    frames: list[WindowFrame] = field(default_factory=list)
    full_ids: list[int] = field(default_factory=list)  # full attention's tokens for A (the window's effect)

    @property
    def num_steps(self) -> int:
        return len(self.frames) - 1

    @property
    def bound(self) -> int:
        return max_blocks_held(self.config.window, self.config.block_size)

    @property
    def drift_step(self) -> int | None:
        """The first step whose paged token for A differs from the contiguous twin's (None: they agree)."""
        return next((f.step for f in self.frames if f.token_ids != f.twin_ids), None)


def _engine(model, tokenizer, config: WindowConfig, window: int | None, layout: str = "paged", free_early=False):
    return window_engine(model, tokenizer, window, CacheConfig(block_size=config.block_size, num_blocks=NUM_BLOCKS,
                                                               watermark=0), kv_layout=layout, free_early=free_early)


def prompt_ids(tokenizer, config: WindowConfig) -> list[int]:
    """A's prompt ids; the recall prompt ends with SEP when the tokenizer has one (the copy task)."""
    ids = tokenizer.encode(PROMPTS[config.prompt])
    sep = getattr(tokenizer, "sep_token_id", None)
    return ids + [sep] if config.prompt == "recall" and sep is not None else ids


def run_window(config: WindowConfig, model, tokenizer) -> WindowRun:
    """Run A through the three engines in lockstep, B joining after A's prefill (the same requests at the same
    steps: they schedule alike), and record a frame per step from their traces."""
    ids = prompt_ids(tokenizer, config)
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    engines = [_engine(model, tokenizer, config, config.window, free_early=config.free_early),
               _engine(model, tokenizer, config, config.window, "contiguous"),
               _engine(model, tokenizer, config, None)]
    for e in engines:
        e.add_request(ids, params)
    out = WindowRun(config, len(ids))
    out.frames.append(WindowFrame(0, "idle", {}, 0, 0, [], [], 0, 0, list(ids), list(ids), NUM_BLOCKS))
    ever_a: set[int] = set()  # physical blocks A has held
    while engines[0].has_unfinished():
        paged, twin, full = (e.step() for e in engines)
        if paged.step == 0:
            for e in engines:
                e.add_request(NEIGHBOUR, SamplingParams(max_tokens=4, ignore_eos=True))
        seq = next((s for s in paged.seqs if s.seq_id == A), None)
        cached = seq.cached_token_count if seq else out.frames[-1].cached
        tables = {sid: list(t) for sid, t in paged.block_tables_after.items()}
        taken = [b for b in paged.blocks_allocated.get(B, []) if b in ever_a]
        ever_a.update(paged.blocks_allocated.get(A, []))
        out.frames.append(WindowFrame(
            step=paged.step + 1, phase=paged.phase, tables=tables, cached=cached,
            first_read=window_start(cached, config.window),
            freed=paged.window_freed.get(A, []) + paged.blocks_freed.get(A, []), taken=taken,
            held=sum(held_blocks(paged).values()), held_full=sum(held_blocks(full).values()),
            token_ids=ids + engines[0].output(A).token_ids, twin_ids=ids + engines[1].output(A).token_ids,
            num_free_blocks=paged.num_free_blocks,
            allocated={sid: list(b) for sid, b in paged.blocks_allocated.items()},
            neighbour_freed=list(paged.window_freed.get(B, [])),
            neighbour_ids=(engines[0].output(B).prompt_token_ids + engines[0].output(B).token_ids
                           if paged.step else [])))
    out.full_ids = ids + engines[2].output(A).token_ids
    return out


# --- what a step did, in words ---------------------------------------------------------------
Words = list[tuple[str, dict]]  # (string key, its values): the page translates and joins them


def step_words(run: WindowRun, step: int) -> Words:
    """The sentence about frame `step`, as (key, values) pieces read only from that frame and the one
    before: the block ids and counts it names are the ones its figures are drawn from.
    Raises IndexError past the run."""
    frame = run.frames[step]
    if step == 0:
        return [("start", {})]
    if step == run.num_steps:
        return [("said_done", dict(step=step))]
    out: Words
    if step == 1:
        out = [("said_prefill_a", dict(step=step, tokens=run.prompt_len, next=frame.cached,
                                       first=frame.first_read, count=len(frame.behind),
                                       blocks=frame.behind or "—"))]
    elif frame.phase == "prefill":
        out = [("said_prefill_b", dict(step=step, blocks=frame.allocated.get(B, []) or "—",
                                       taken=len(frame.taken), taken_blocks=frame.taken or "—"))]
        if frame.neighbour_freed:
            live_b = [b for b in frame.tables.get(B, []) if b != HOLE]
            out.append(("said_prefill_b_slid", dict(blocks=frame.neighbour_freed, held=live_b)))
        reused = [b for b in frame.taken if b in frame.table]  # a block A's table still lists
        if reused:
            out.append(("said_overwrite", dict(blocks=reused)))
        return out
    else:
        out = [("said_decode", dict(step=step, token=frame.cached - 1, first=frame.first_read,
                                    next=frame.cached, held=sum(b != HOLE for b in frame.table),
                                    bound=run.bound))]
        if frame.behind:
            out.append(("said_freed", dict(blocks=frame.behind)))
    if frame.early:
        out.append(("said_early", dict(blocks=frame.early, first=frame.first_read)))
    return out


# --- the quiz: which blocks does the next step free? ---------------------------------------------------------------
def freed_question(run: WindowRun, step: int, seed: int) -> Question | None:
    """At frame `step`: which physical blocks will the next step free behind the window? Choices are tuples of
    block ids; () is "none". None when there is no next step."""
    if step >= run.num_steps:
        return None
    frame, nxt = run.frames[step], run.frames[step + 1]
    if nxt.phase == "prefill" or nxt.step == run.num_steps:
        return None  # the prefill takes blocks, the last step frees all: nothing to reason about the window
    answer = block_list(nxt.freed)
    live = [b for b in frame.table if b != HOLE]
    rng = random.Random(seed)
    distractors = [block_list(c) for c in ([], live[:1], live[:2], live[-1:], live[:3])]
    fill = lambda: block_list(rng.sample(live, min(len(live), rng.randint(1, 3))))  # noqa: E731
    after = frame.cached + 1  # the next step writes token frame.cached; then token `after` is the next to compute
    why = (("window_why", dict(after=after, first=window_start(after, run.config.window),
                               window=run.config.window, bs=run.config.block_size, blocks=answer)),)
    return Question("window_freed", ("window_ask", dict(next=frame.cached, window=run.config.window)),
                    _choices(rng, answer, distractors, fill), answer, why)


def block_list(blocks) -> str:
    """Block ids as a choice shows them ("7, 3"); "—" for none (the same in both languages)."""
    return ", ".join(map(str, blocks)) or "—"
