"""Pages 4 and 6's "real vLLM" column: the steps an engine lesson ran, fed to vLLM's own KVCacheManager.

`VllmSide` replays a lesson's steps, in order, into a `paged.chapters.vllm_twin.VllmKVCache` (vLLM 0.32's v1
KVCacheManager over the same pool, its blocks named as ours): every sequence the step scheduled asks vLLM for slots for
the tokens it fed (a prefix-cache lookup first when it starts or restarts), the step's preemption victims give their
blocks back (before the step's appends without chunked prefill, as our decode step does; when vLLM runs out, as vLLM's
scheduler does, with it), finished sequences free theirs. After each step it compares vLLM's block tables, free
blocks and prefix-cache hits with ours: the verdict is None (identical so far) or the first difference.

Parallel samples (n > 1) fork inside our engine; vLLM v1 has no fork (it runs samples as separate requests), so the
comparison stops at a fork and says so. `update` replays only the steps it has not seen (a Back or a new
configuration starts over). UI-free; imports vLLM only through paged.chapters.vllm_twin, when first updated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paged.chapters.vllm_twin import VLLM_VERSION, VllmKVCache, vllm_available  # noqa: F401 (the pages' install check)


@dataclass(frozen=True)
class SeqSide:
    """One sequence after a step: its block table in ours and in vLLM, and its prefix-cache hits (blocks) when the
    step started it (None for a step that did not)."""

    seq_id: int
    ours: tuple[int, ...]
    theirs: tuple[int, ...]
    hits_ours: int | None = None
    hits_theirs: int | None = None

    @property
    def same(self) -> bool:
        return self.ours == self.theirs and self.hits_ours == self.hits_theirs


@dataclass(frozen=True)
class StepSide:
    step: int  # 1-based: the step this is after
    free_ours: int
    free_theirs: int
    seqs: tuple[SeqSide, ...]

    @property
    def same(self) -> bool:
        return self.free_ours == self.free_theirs and all(s.same for s in self.seqs)


@dataclass
class Verdict:
    """The first difference: at which step, a code for the page's sentence (ui.strings.vllm "why_<code>"), and
    its values."""

    step: int
    code: str  # "free", "table", "hits", "no_room" or "fork"
    values: dict = field(default_factory=dict)


class VllmSide:
    """vLLM's KVCacheManager fed a lesson's steps (see the module docstring). Raises ImportError without vLLM."""

    def __init__(self, lesson) -> None:
        cfg = lesson.config
        self.key = (id(lesson), cfg)
        self.chunked = cfg.enable_chunked_prefill
        self.vk = VllmKVCache(cfg.num_blocks, cfg.block_size, cfg.enable_prefix_caching, seed=cfg.seed)
        self.tokens: dict[int, list[int]] = {}  # seq id -> prompt + generated so far
        self.seen: list[object] = []  # the lesson's step objects replayed, in order
        self.steps: list[StepSide] = []
        self.verdict: Verdict | None = None

    @classmethod
    def follow(cls, side: VllmSide | None, lesson) -> VllmSide:
        """`side` brought up to date with `lesson`, or a new one when `side` followed another lesson, configuration
        or history (a Back, a reset)."""
        fresh = side is None or side.key != (id(lesson), lesson.config) or len(side.seen) > len(lesson.steps) or any(
            a is not b for a, b in zip(side.seen, lesson.steps))
        side = cls(lesson) if fresh else side
        side.update(lesson)
        return side

    def update(self, lesson) -> None:
        prompts = {rid: spec.token_ids(lesson.tokenizer) for rid, spec in zip(lesson.request_ids, lesson.requests)}
        hits = {}
        for a in lesson.allocations:
            hits.setdefault(a.step, {})[a.seq_id] = sum(a.hits)
        for twin in lesson.steps[len(self.seen):]:
            self.seen.append(twin)
            if self.verdict is None:
                self._replay(twin.paged, len(self.seen), prompts, hits.get(len(self.seen), {}))

    def _replay(self, trace, step: int, prompts: dict[int, list[int]], hits: dict[int, int]) -> None:
        vk = self.vk
        if trace.forked:
            self.verdict = Verdict(step, "fork", dict(seqs=sorted(trace.forked)))
            return
        victims = list(trace.preempted)
        if not self.chunked:  # our whole-prompt scheduler preempts before any append
            for v in victims:
                vk.preempt(v)
            victims = []
        for s in trace.seqs:
            n = len(s.tokens_in)
            tokens = self.tokens.setdefault(s.seq_id, list(prompts.get(s.seq_id, [])))
            while True:
                ok = vk.grow(s.seq_id, n) if s.seq_id in vk.running else vk.admit(s.seq_id, tokens, n)
                if ok or not victims:
                    break
                vk.preempt(victims.pop(0))  # vLLM's scheduler: preempt the newest, ask again
            if not ok:
                self.verdict = Verdict(step, "no_room", dict(seq=s.seq_id, tokens=n, free=vk.num_free_blocks))
                return
        for v in victims:
            vk.preempt(v)
        for s in trace.seqs:
            vk.done(s.seq_id, s.token_out)
            if s.token_out is not None:
                self.tokens[s.seq_id].append(s.token_out)
        for sid in trace.finished:
            if sid in vk.requests:
                vk.free(sid)
        seqs = tuple(SeqSide(sid, tuple(t), tuple(vk.table(sid)), hits.get(sid),
                             vk.hits.get(sid) if sid in hits else None)
                     for sid, t in sorted(trace.block_tables_after.items()))
        side = StepSide(step, trace.num_free_blocks, vk.num_free_blocks, seqs)
        self.steps.append(side)
        if side.free_ours != side.free_theirs:
            self.verdict = Verdict(step, "free", dict(ours=side.free_ours, theirs=side.free_theirs))
        for s in (s for s in seqs if not s.same):
            code = "table" if s.ours != s.theirs else "hits"
            self.verdict = self.verdict or Verdict(step, code, dict(seq=s.seq_id, ours=list(s.ours),
                                                                    theirs=list(s.theirs), hits_ours=s.hits_ours,
                                                                    hits_theirs=s.hits_theirs))
