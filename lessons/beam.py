"""Page 9 · Beam search: one prompt's beam tree on the pool, step by step, from the traces of paged/engine/beam.py.

    lesson = BeamLesson(BeamConfig(prompt="hello world", beam_width=4), model, tokenizer)
    lesson.view(i)          # what step i did to the pool (i = 1 … len(lesson.traces); 0: nothing run yet)
    lesson.tree(i)          # the beam tree up to step i: nodes and edges for viz.beam.tree_figure
    lesson.twin_check()     # the paged beams against the contiguous twin (the break-it shows here)
    memory_savings(...)     # the paper's §4.4 comparison on a few shipped prompts and widths

Every number comes from a BeamStepTrace (what the pool held when the model ran, what was forked, copied, freed):
nothing here reaches into the block manager.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from paged.addressing import blocks_needed
from paged.engine.beam import BeamSearch
from paged.engine.beam_group import BeamParams, BeamResult, BeamStepTrace
from paged.config import CacheConfig, SchedulerConfig
from paged.model.tokenizer import SEP

from .quiz import Question

PROMPTS = ("hello world", "no", "abc 123", "PagedAttention")  # recall prompts (BOS text SEP): the model copies them
WIDTHS = (2, 4, 6)
PENALTIES = (0.0, 1.0, 2.0)
BLOCK_SIZES = (2, 4, 8)
MAX_TOKENS = 8
PAPER_SAVING = (37.6, 55.2)  # % of KV memory the paper saves by sharing in beam search, widths 2-6 (§4.4, Fig. 15)


def recall_ids(tokenizer, text: str) -> list[int]:
    """BOS text SEP: the shipped model copies the text, then EOS."""
    return tokenizer.encode(text) + [SEP]


def pool_for(num_prompt_tokens: int, beam_width: int, block_size: int) -> int:
    """A pool that holds the K beams even without sharing (BeamSearch refuses a smaller one)."""
    return beam_width * blocks_needed(num_prompt_tokens + MAX_TOKENS, block_size)


@dataclass(frozen=True)
class BeamConfig:
    """The page's knobs. Raises ValueError for a value outside the page's choices."""

    prompt: str = PROMPTS[0]
    beam_width: int = 4
    length_penalty: float = 1.0
    block_size: int = 4
    skip_cow: bool = False

    def __post_init__(self) -> None:
        for name, options in (("prompt", PROMPTS), ("beam_width", WIDTHS), ("length_penalty", PENALTIES),
                              ("block_size", BLOCK_SIZES), ("skip_cow", (False, True))):
            if getattr(self, name) not in options:
                raise ValueError(f"{name} must be one of {list(options)}, got {getattr(self, name)!r}")


@dataclass
class StepView:
    """The pool after step i: tables and cached counts of the live beams, ref counts (holders per block), the
    step's copies / forks / prunes / freed blocks, and its hypotheses."""

    step: int
    phase: str
    num_blocks: int
    block_size: int
    tables: dict[int, list[int]]
    cached: dict[int, int]
    ref_counts: list[int]
    copies: list[tuple[int, int]] = field(default_factory=list)
    forked: dict[int, list[int]] = field(default_factory=dict)
    pruned: list[int] = field(default_factory=list)
    freed: dict[int, list[int]] = field(default_factory=dict)
    finished: list[int] = field(default_factory=list)
    hypotheses: list[dict] = field(default_factory=list)
    cow_skipped: list[tuple[int, int]] = field(default_factory=list)
    blocks_shared: int = 0
    blocks_unshared: int = 0

    @property
    def num_free_blocks(self) -> int:
        return sum(1 for c in self.ref_counts if c == 0)


def ref_counts(tables: dict[int, list[int]], num_blocks: int) -> list[int]:
    """How many tables hold each physical block."""
    counts = [0] * num_blocks
    for table in tables.values():
        for b in table:
            counts[b] += 1
    return counts


class BeamLesson:
    """One prompt searched twice: on the paged pool (with the break-it when switched on) and on the contiguous twin."""

    def __init__(self, config: BeamConfig, model, tokenizer) -> None:
        self.config, self.tokenizer = config, tokenizer
        self.prompt_ids = recall_ids(tokenizer, config.prompt)
        self.num_blocks = pool_for(len(self.prompt_ids), config.beam_width, config.block_size)
        params = BeamParams(config.beam_width, config.length_penalty, MAX_TOKENS)
        # chunked prefill with a small budget: a long prompt is fed in a few chunks, as the engine page shows
        sched = SchedulerConfig(max_num_batched_tokens=8, enable_chunked_prefill=True)
        cache = CacheConfig(block_size=config.block_size, num_blocks=self.num_blocks, watermark=0.0)
        self.result: BeamResult = BeamSearch(model, tokenizer, cache, sched, attn_impl="gather",
                                             skip_cow=config.skip_cow).run(self.prompt_ids, params)
        self.twin: BeamResult = BeamSearch(model, tokenizer, cache, sched, kv_layout="contiguous",
                                           attn_impl="gather").run(self.prompt_ids, params)

    @property
    def traces(self) -> list[BeamStepTrace]:
        return self.result.traces

    def view(self, i: int) -> StepView:
        """The pool after step i (0: before the first step, an empty pool)."""
        if i == 0:
            return StepView(0, "idle", self.num_blocks, self.config.block_size, {}, {}, [0] * self.num_blocks)
        t = self.traces[i - 1]
        cached = {b["seq_id"]: b["cached_token_count"] for b in t.beams}
        if not t.beams:  # a prompt chunk: the one sequence, as it was fed
            cached = {s.seq_id: s.cached_token_count for s in t.seqs if s.seq_id in t.block_tables_after}
        tables = {s: list(tbl) for s, tbl in t.block_tables_after.items()}
        return StepView(i, t.phase, self.num_blocks, self.config.block_size, tables, cached,
                        ref_counts(tables, self.num_blocks), list(t.copies), dict(t.forked), list(t.pruned),
                        dict(t.blocks_freed), list(t.finished), list(t.hypotheses), list(t.cow_skipped),
                        t.blocks_shared, t.blocks_unshared)

    def token_texts(self, i: int) -> dict[int, list[str]]:
        """seq_id -> the text of each of its tokens (prompt and generated) after step i, for the pool's hover."""
        from lessons.tokens import token_label
        if i == 0:
            return {}
        t = self.traces[i - 1]
        prompt = [token_label(self.tokenizer, x) for x in self.prompt_ids]
        out = {b["seq_id"]: prompt + [token_label(self.tokenizer, x) for x in b["token_ids"]] for b in t.beams}
        for s in t.seqs:
            out.setdefault(s.seq_id, prompt)
        return out

    def tree(self, upto: int) -> tuple[list[dict], list[tuple[tuple[int, int], tuple[int, int]]]]:
        """The beam tree up to step `upto`: nodes {key: (depth, seq_id), depth, rank, seq_id, token, score, kind}
        ("beam"; "pruned": no beam grew from it; "ended": let go when the search ended; "finished": a hypothesis),
        and edges (parent key, child key).
        depth is the number of generated tokens; the root (depth 0) is the prompt."""
        from lessons.tokens import token_label
        nodes = [dict(key=(0, -1), depth=0, rank=0, seq_id=-1, token="⟨prompt⟩", score=0.0, kind="root")]
        edges = []
        live: dict[int, tuple[int, int]] = {}  # seq_id -> its newest node
        depth = 0
        for t in self.traces[:upto]:
            if not t.beams and not t.hypotheses:
                continue  # a prompt chunk: nothing chosen yet
            depth += 1
            parent_of = lambda seq_id: live.get(seq_id, (0, -1))  # noqa: E731  (the prompt before any beam)
            for rank, h in enumerate(t.hypotheses):
                key = (depth, -100 - rank)
                nodes.append(dict(key=key, depth=depth, rank=-1 - rank, seq_id=h["parent"],
                                  token=token_label(self.tokenizer, h["token_ids"][-1]), score=h["score"],
                                  kind="finished"))
                edges.append((parent_of(h["parent"]), key))
            for node in nodes:  # the beams no continuation chose: pruned, or (the last step) let go
                if node["kind"] == "beam" and node["depth"] == depth - 1:
                    node["kind"] = ("pruned" if node["seq_id"] in t.pruned
                                    else "ended" if node["seq_id"] in t.finished else "beam")
            new_live = {}
            for rank, b in enumerate(t.beams):
                key = (depth, b["seq_id"])
                nodes.append(dict(key=key, depth=depth, rank=rank, seq_id=b["seq_id"],
                                  token=token_label(self.tokenizer, b["token"]), score=b["score"], kind="beam"))
                edges.append((parent_of(b["parent"]), key))
                new_live[b["seq_id"]] = key
            live = new_live
        return nodes, edges

    def memory(self, upto: int | None = None) -> tuple[list[int], list[int], list[int]]:
        """(steps, blocks with sharing, blocks without) per step, as the model read them."""
        traces = self.traces[:upto]
        return ([t.step + 1 for t in traces], [t.blocks_shared for t in traces], [t.blocks_unshared for t in traces])

    def twin_check(self) -> tuple[bool, int | None]:
        """(the paged beams equal the twin's, tokens and scores; the first step whose beams differ, or None)."""
        rtol = 1e-4
        for i, (a, b) in enumerate(zip(self.traces, self.twin.traces), start=1):
            if [x["token_ids"] for x in a.beams] != [x["token_ids"] for x in b.beams] or not all(
                    math.isclose(x["score"], y["score"], rel_tol=rtol, abs_tol=1e-6)
                    for x, y in zip(a.beams, b.beams)):
                return False, i
        same = ([h.token_ids for h in self.result.beams] == [h.token_ids for h in self.twin.beams]
                and all(math.isclose(h.score, g.score, rel_tol=rtol, abs_tol=1e-6)
                        for h, g in zip(self.result.beams, self.twin.beams)))
        return same, None if same else len(self.traces)


def memory_savings(model, tokenizer, prompts=PROMPTS, widths=WIDTHS, block_size: int = 4) -> list[dict]:
    """The paper's §4.4 measurement on this model: for each prompt and width, KV blocks x steps held with sharing
    and without (every beam its own copy of its table), and the saving in %."""
    rows = []
    for text in prompts:
        ids = recall_ids(tokenizer, text)
        for k in widths:
            cache = CacheConfig(block_size=block_size, num_blocks=pool_for(len(ids), k, block_size), watermark=0.0)
            shared, unshared = BeamSearch(model, tokenizer, cache, attn_impl="gather").run(
                ids, BeamParams(k, 1.0, MAX_TOKENS)).memory()
            rows.append(dict(prompt=text, beam_width=k, shared=shared, unshared=unshared,
                             saving=100.0 * (1 - shared / unshared)))
    return rows


def beam_question(lesson: BeamLesson, step: int, seed: int) -> Question | None:
    """Predict the next step (step + 1): how many blocks does it copy (copy-on-write), or free? The answer is the
    step's own trace; None after the last step."""
    if step >= len(lesson.traces):
        return None
    rng = random.Random(seed)
    t = lesson.traces[step]
    kind = rng.choice(("beam_copies", "beam_freed"))
    answer = len(t.copies) if kind == "beam_copies" else sum(len(b) for b in t.blocks_freed.values())
    near = [answer + d for d in (-2, -1, 1, 2, 3) if answer + d >= 0]
    rng.shuffle(near)
    choices = tuple(sorted({answer, *near[:3]}))
    why = ((f"why_{kind}", {"n": answer, "step": step + 1, "beams": len(t.seqs)}),)
    return Question(kind, (kind, {"step": step + 1, "beams": len(t.seqs)}), choices, answer, why)
