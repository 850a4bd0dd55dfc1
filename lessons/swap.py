"""The swap page's state: one scenario under memory pressure, played to the end in both preemption modes.

`SwapLesson(config, model, tokenizer)` runs the same requests through three engines: swap mode (with the page's
break-it, if any), its contiguous twin (never broken: the reference) and recompute mode. Every step of each is kept
(`ModeStep`: the trace, who holds which pool and swap blocks after it, the running costs), so stepping, Back and a
share link's step are reads, never reruns. A run is a few dozen steps of the tiny model: built once per config.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from lessons.quiz import Question, _choices
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.swapping import BREAKS
from paged.engine.trace import StepTrace
from paged.kv_cache import KVCachePool

PROMPTS = ("Hello, paged world!", "1 2 3 4 5 6", "abcdefghij", "The block table maps logical blocks.")
BLOCK_SIZES = (2, 4, 8)
BREAK_CHOICES = ("off",) + BREAKS
MAX_TOKENS = 20
REL_TOL = 1e-4  # twin check: |paged - contiguous| <= REL_TOL * max(1, |contiguous|) per step


@dataclass(frozen=True)
class SwapConfig:
    block_size: int = 4
    num_blocks: int = 18
    swap_space: int = 16
    break_it: str = "off"

    def __post_init__(self) -> None:
        if self.block_size not in BLOCK_SIZES:
            raise ValueError(f"block_size must be one of {BLOCK_SIZES}, got {self.block_size!r}")
        if self.break_it not in BREAK_CHOICES:
            raise ValueError(f"break_it must be one of {BREAK_CHOICES}, got {self.break_it!r}")


@dataclass
class ModeStep:
    """One mode after one step: the step's trace, the pool and swap-pool owners, and the costs so far."""

    trace: StepTrace
    tables: dict[int, list[int]]  # running seq -> its block table (pool blocks) after the step
    swap_tables: dict[int, list[int]]  # swapped seq -> the swap blocks holding its logical blocks
    blocks_copied: int  # so far: pool <-> swap pool block copies, both ways
    tokens_recomputed: int  # so far: tokens re-fed by recomputed sequences' prefills
    swaps: int = 0
    recomputes: int = 0
    recomputed_now: dict[int, int] = field(default_factory=dict)  # seq -> tokens it re-fed in this step
    kept: dict[int, int] = field(default_factory=dict)  # seq preempted now -> cached_token_count it had
    cached_once: dict[int, int] = field(default_factory=dict)  # seq in recomputed_now -> tokens it had cached

    def handed(self) -> dict[int, tuple[int, int]]:
        """Pool blocks a preempted sequence left this step that another took in the same step:
        block -> (the seq that left it, the seq that took it)."""
        t = self.trace
        left = {b: sid for sid, bs in t.blocks_freed.items() if sid in t.preempted for b in bs}
        return {b: (left[b], sid) for sid, bs in t.blocks_allocated.items() for b in bs if b in left}


class ModeRun:
    """One engine of `mode` run to the end on the scenario; steps[k] is the state after step k + 1."""

    def __init__(self, mode: str, config: SwapConfig, model, tokenizer, layout: str = "paged") -> None:
        sched = SchedulerConfig(preemption_mode=mode, swap_space=config.swap_space if mode == "swap" else 0)
        self.engine = LLMEngine(model, tokenizer, CacheConfig(block_size=config.block_size,
                                                              num_blocks=config.num_blocks, seed=3),
                                sched, kv_layout=layout, attn_impl="gather")
        if layout == "paged" and mode == "swap" and config.break_it != "off":
            self.engine.swapper.break_it = config.break_it
        params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
        self.ids = [self.engine.add_request(p, params) for p in PROMPTS]
        self.steps: list[ModeStep] = []
        self.logits: list[dict] = []  # per step: seq id -> logits row of the scheduled sequences
        swap_tables: dict[int, list[int]] = {}
        preempted: dict[int, int] = {}  # recomputed seq -> tokens it had cached when preempted
        cached: dict[int, int] = {}  # seq -> cached_token_count after the last step that ran it
        copied = recomputed = swaps = recomputes = 0
        while self.engine.has_unfinished():
            trace = self.engine.step()
            self.logits.append({sid: self.engine.last_logits[sid] for sid in trace.scheduled})
            now, once = {}, {}
            for s in trace.seqs:
                if s.seq_id in preempted and len(s.tokens_in) > 1:  # a recomputed sequence's prefill
                    now[s.seq_id] = len(s.tokens_in)
                    once[s.seq_id] = preempted.pop(s.seq_id)
            kept = {sid: cached.get(sid, 0) for sid in trace.preempted}
            cached.update({s.seq_id: s.cached_token_count for s in trace.seqs})
            for sid, pairs in trace.swap_in.items():
                swap_tables.pop(sid, None)
                copied += len(pairs)
            for sid, pairs in trace.swap_out.items():
                swap_tables[sid] = [dst for _, dst in pairs]
                copied += len(pairs)
            recomputed_ids = [sid for sid in trace.preempted if sid not in trace.swap_out]
            preempted.update({sid: kept[sid] for sid in recomputed_ids})
            swaps, recomputes = swaps + len(trace.swap_out), recomputes + len(recomputed_ids)
            recomputed += sum(now.values())
            self.steps.append(ModeStep(trace, dict(trace.block_tables_after), {k: list(v) for k, v in
                                                                               swap_tables.items()},
                                       copied, recomputed, swaps, recomputes, now, kept, once))
        self.tokens = [self.engine.output(i).token_ids for i in self.ids]

    def at(self, k: int) -> ModeStep | None:
        """The state after step k (1-based); None before the first step; the last state once the run ended."""
        return self.steps[min(k, len(self.steps)) - 1] if k >= 1 and self.steps else None


Words = list[tuple[str, dict]]  # (string key, its values; "seq" a sequence id): the page translates


def step_words(state: ModeStep) -> Words:
    """What one mode's step did to whom, as (key, values) pieces read only from that step's record:
    swapped out (pool -> swap blocks, the cached_token_count kept), swapped in, preempted by recompute
    (the blocks freed), and a recomputed sequence's prefill (tokens re-fed: those it had cached once
    plus those never cached). Raises nothing."""
    trace, out = state.trace, []
    for sid, pairs in trace.swap_out.items():
        out.append(("out_msg", dict(seq=sid, src=[a for a, _ in pairs], dst=[b for _, b in pairs],
                                    cached=state.kept[sid])))
    for sid, pairs in trace.swap_in.items():
        out.append(("in_msg", dict(seq=sid, src=[a for a, _ in pairs], dst=[b for _, b in pairs])))
    for sid in (s for s in trace.preempted if s not in trace.swap_out):
        out.append(("recompute_msg", dict(seq=sid, blocks=trace.blocks_freed.get(sid, []))))
    for sid, n in state.recomputed_now.items():
        once = state.cached_once[sid]
        out.append(("back_msg", dict(seq=sid, n=n, cached=once, new=n - once)))
    return out


class SwapLesson:
    """Swap mode (maybe broken), its contiguous twin and recompute mode on the same requests."""

    def __init__(self, config: SwapConfig, model, tokenizer) -> None:
        self.config = config
        self.swap = ModeRun("swap", config, model, tokenizer)
        self.twin = ModeRun("swap", config, model, tokenizer, layout="contiguous")
        self.recompute = ModeRun("recompute", config, model, tokenizer)
        cfg = model.config
        self.bytes_per_block = KVCachePool.bytes_per_block(cfg.num_hidden_layers, config.block_size,
                                                           cfg.num_key_value_heads, cfg.head_dim)
        self.diffs = [_worst(a, b) for a, b in zip(self.swap.logits, self.twin.logits)]  # per step: (diff, ok)

    @property
    def total(self) -> int:
        return max(len(self.swap.steps), len(self.recompute.steps))

    def twin_break(self) -> int | None:
        """The first step (1-based) where swap mode's logits leave the contiguous twin's, or None."""
        return next((i + 1 for i, (_, ok) in enumerate(self.diffs) if not ok), None)

    def same_tokens(self) -> bool:
        """Both modes (and the twin) end with the same tokens for every prompt."""
        return self.swap.tokens == self.recompute.tokens == self.twin.tokens

    def question(self, k: int, seed: int) -> Question | None:
        """Predict, then reveal: the next swap-out's block count (swap mode), or how many tokens the next
        recomputed sequence re-feeds (recompute mode), both read from the steps after k. None: none is left."""
        rng = random.Random(seed)
        asks = []
        out = next(((i + 1, s) for i, s in enumerate(self.swap.steps) if i >= k and s.trace.swap_out), None)
        if out is not None:
            step, state = out
            sid, pairs = next(iter(state.trace.swap_out.items()))
            asks.append(Question("swap_blocks", ("swap_q_blocks", dict(seq=sid, step=step)),
                                 _choices(rng, len(pairs), (len(pairs) - 1, len(pairs) + 1, 1),
                                          lambda: rng.randint(1, len(pairs) + 4)),
                                 len(pairs), (("swap_a_blocks", dict(seq=sid, n=len(pairs))),)))
        back = next(((i + 1, s) for i, s in enumerate(self.recompute.steps) if i >= k and s.recomputed_now), None)
        if back is not None:
            step, state = back
            sid, n = next(iter(state.recomputed_now.items()))
            asks.append(Question("recompute_tokens", ("swap_q_tokens", dict(seq=sid, step=step)),
                                 _choices(rng, n, [d for d in (1, n - 1, n - MAX_TOKENS // 2) if d >= 1],
                                          lambda: rng.randint(2, n + 8)),
                                 n, (("swap_a_tokens", dict(seq=sid, n=n)),)))
        return rng.choice(asks) if asks else None


def _worst(paged: dict, twin: dict) -> tuple[float, bool]:
    """Max |paged - twin| over one step's logits rows, and whether every row is within REL_TOL of its scale."""
    worst, ok = 0.0, True
    for sid, ref in twin.items():
        diff = (paged[sid] - ref).abs().max().item() if sid in paged else float("inf")
        worst = max(worst, diff)
        ok = ok and diff <= REL_TOL * max(1.0, ref.abs().max().item())
    return worst, ok


DEFAULT_NUM_BLOCKS = {2: 32, 4: 18, 8: 9}  # a pool small enough for a few preemptions at each block size


def min_num_blocks(block_size: int, tokenizer) -> int:
    """The smallest pool every scenario request fits in alone (prompt + MAX_TOKENS), the admission rule."""
    from paged.addressing import blocks_needed

    longest = max(len(tokenizer.encode(p)) for p in PROMPTS)
    return blocks_needed(longest + MAX_TOKENS, block_size)
