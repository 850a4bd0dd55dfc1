"""The state behind page 12 · Speculative decoding: a speculating paged engine and its contiguous twin, stepped
together, and what each step did to every sequence's guesses, slots and blocks (read from the StepTrace only).

The twin speculates too (same proposer, same k), always rolling back: with greedy decoding both give plain
greedy decoding's tokens. The break-it switches the paged engine's rollback off (SpeculativeDecoder.rollback):
rejected guesses stay counted in cached_token_count, later tokens are written after their stale K/V, and the
paged output drifts from the twin's. The prompts are shipped ones the model copies (lessons.engine_requests'
presets), so prompt lookup is visibly right on the copies and visibly wrong on the count.

Back is `without_last()`: the newest checkpoint (lessons.rewind, a copy every EVERY steps) at or
before the target, then the at most EVERY - 1 steps after it stepped again: the state a replay from
step 0 builds, at the cost of a copy and a step instead of the whole run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from paged.addressing import blocks_needed
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.trace import StepTrace

from .engine_requests import PROMPT_PRESETS, RequestSpec
from .quiz import Question, _choices
from .rewind import Checkpoints

SCENARIOS = {"copies": ("recall_fox", "recall_code"), "mixed": ("recall_fox", "count")}
K_CHOICES = (1, 2, 4, 8)
BLOCK_SIZES = (2, 4, 8)
MAX_TOKENS = 48
NUM_BLOCKS = 64
EVERY = 2               # steps between two checkpoints: Back steps at most once (a copy: ~0.5 MB)
BUDGET_BYTES = 8 << 20  # a session's checkpoints of this page hold at most about this many bytes


@dataclass(frozen=True)
class SpecConfig:
    k: int = 4
    block_size: int = 4
    scenario: str = "mixed"
    forget_rollback: bool = False  # the break-it: the paged engine keeps rejected guesses as cached

    def __post_init__(self) -> None:
        if self.k not in K_CHOICES or self.block_size not in BLOCK_SIZES or self.scenario not in SCENARIOS:
            raise ValueError(f"k must be one of {K_CHOICES}, block_size one of {BLOCK_SIZES}, scenario one of "
                             f"{tuple(SCENARIOS)}; got {self.k!r}, {self.block_size!r}, {self.scenario!r}")


@dataclass(frozen=True)
class SeqSpec:
    """What one step did to one sequence's guesses (from trace.speculative, or a plain decode's one token)."""

    seq_id: int
    fed: list[int]  # token ids fed: the last known token, then the guesses
    positions: list[int]
    slots: list[int]
    proposed: list[int]
    accepted: int
    emitted: list[int]  # tokens appended this step (the kept guesses, then the model's own)
    discarded_slots: list[int]  # written, then left to be overwritten (rejected guesses)
    blocks_taken: list[int]
    blocks_freed: list[int]  # taken for guesses, freed by the rollback
    cached_after: int
    twin_cached_after: int | None  # the contiguous twin's, same sequence, same step (None: not scheduled there)
    ahead: int = 0  # cached_after minus the state rule's (its tokens - 1): rejected guesses kept


@dataclass
class SpecLesson:
    config: SpecConfig
    model: object = field(repr=False)
    tokenizer: object = field(repr=False)
    steps: list[tuple[StepTrace, StepTrace]] = field(default_factory=list)
    _rewind: Checkpoints | None = field(default=None, repr=False, compare=False)  # Backs share it

    def __post_init__(self) -> None:
        if self._rewind is None:
            self._rewind = Checkpoints(shared=_shared, every=EVERY, budget_bytes=BUDGET_BYTES)
        cfg = self.config
        self.engines = []
        for layout in ("paged", "contiguous"):
            e = LLMEngine(self.model, self.tokenizer,
                          CacheConfig(block_size=cfg.block_size, num_blocks=NUM_BLOCKS, watermark=0.0, seed=0),
                          SchedulerConfig(speculative=("ngram", cfg.k)), kv_layout=layout, attn_impl="gather")
            for name in SCENARIOS[cfg.scenario]:
                task, prompt = PROMPT_PRESETS[name]
                e.add_request(RequestSpec(prompt, task).token_ids(self.tokenizer),
                              SamplingParams(max_tokens=MAX_TOKENS))
            self.engines.append(e)
        self.engines[0].speculative.rollback = not cfg.forget_rollback

    @classmethod
    def replay(cls, config: SpecConfig, steps: int, model, tokenizer) -> "SpecLesson":
        """A fresh lesson stepped `steps` times (Back and share links: exactly the state it had then)."""
        lesson = cls(config, model, tokenizer)
        for _ in range(steps):
            if not lesson.step():
                break
        return lesson

    @property
    def paged(self) -> LLMEngine:
        return self.engines[0]

    @property
    def twin(self) -> LLMEngine:
        return self.engines[1]

    def can_step(self) -> bool:
        return self.paged.has_unfinished() or self.twin.has_unfinished()

    def step(self) -> bool:
        """Step both engines (one that has finished stays put: an idle trace). False when both are done."""
        if not self.can_step():
            return False
        self.steps.append(tuple(e.step() if e.has_unfinished() else StepTrace(e.step_count, "idle", "", e.kv_layout)
                                for e in self.engines))
        self._rewind.save(len(self.steps), self, ())
        return True

    def without_last(self) -> "SpecLesson":
        """Back: a lesson equal to `replay(config, len(steps) - 1)`, from the newest checkpoint
        at or before that step (at most EVERY - 1 steps stepped again; from step 0 when there is
        none). This lesson is unchanged.
        Raises: ValueError at step 0 (nothing to undo)."""
        if not self.steps:
            raise ValueError("without_last needs at least one step, got 0")
        target = len(self.steps) - 1
        found = self._rewind.best(target, lambda copy, _log, _at: copy.config == self.config)
        lesson = found[1] if found else self.restarted()
        while len(lesson.steps) < target and lesson.step():
            pass
        return lesson

    def restarted(self) -> "SpecLesson":
        """Reset: a fresh lesson of the same config at step 0 that keeps this one's checkpoints (the
        same config replays the same steps, so they stay valid)."""
        return SpecLesson(self.config, self.model, self.tokenizer, _rewind=self._rewind)

    # --- what the page draws -------------------------------------------------------------------------------------
    def rows(self, index: int | None = None) -> list[SeqSpec]:
        """Each decode-phase sequence of step `index` (default the last); [] for a prefill or no step."""
        if not self.steps:
            return []
        paged, twin = self.steps[-1 if index is None else index]
        if paged.phase != "decode":
            return []
        twin_cached = {s.seq_id: s.cached_token_count for s in twin.seqs}
        prompt = self._prompt_lens()
        out = []
        for s in paged.seqs:
            spec = paged.speculative.get(s.seq_id)
            guesses = spec["proposed"] if spec else []
            out.append(SeqSpec(s.seq_id, list(s.tokens_in), list(s.positions), list(s.slots), guesses,
                               spec["accepted"] if spec else 0,
                               spec["emitted"] if spec else [s.token_out], spec["discarded_slots"] if spec else [],
                               spec["blocks_taken"] if spec else [], spec["blocks_freed"] if spec else [],
                               s.cached_token_count, twin_cached.get(s.seq_id),
                               s.cached_token_count - (prompt[s.seq_id] + s.generated_len - 1)))
        return out

    def _prompt_lens(self) -> dict[int, int]:
        return {rid: len(self.paged.output(rid).prompt_token_ids) for rid in self.paged.requests}

    def first_stale(self) -> tuple[int, int, int] | None:
        """(step, seq id, how far ahead) of the first row so far whose cached_token_count passed the
        state rule (rejected guesses kept as cached: the break-it), None while every row kept it."""
        rows = ((i + 1, r) for i in range(len(self.steps)) for r in self.rows(i))
        return next(((step, r.seq_id, r.ahead) for step, r in rows if r.ahead > 0), None)

    def totals(self) -> dict[str, float]:
        """Guesses proposed and accepted, acceptance rate, tokens per sequence per decode step
        (per_pass; plain decoding: exactly 1) and tokens per decode step, all sequences together
        (per_step), over every decode step so far; passes: every step, prefills included."""
        proposed = accepted = emitted = fed_rows = decode_steps = 0
        for i in range(len(self.steps)):
            rows = self.rows(i)
            decode_steps += bool(rows)
            for row in rows:
                proposed, accepted = proposed + len(row.proposed), accepted + row.accepted
                emitted, fed_rows = emitted + len(row.emitted), fed_rows + 1
        return {"proposed": proposed, "accepted": accepted, "rate": accepted / proposed if proposed else 0.0,
                "per_pass": emitted / fed_rows if fed_rows else 1.0,
                "per_step": emitted / decode_steps if decode_steps else 0.0,
                "passes": len(self.steps)}

    def outputs(self) -> list[tuple[int, list[int], list[int]]]:
        """(request id, paged tokens, twin tokens) per request."""
        return [(rid, list(self.paged.output(rid).token_ids), list(self.twin.output(rid).token_ids))
                for rid in sorted(self.paged.requests)]

    def first_divergence(self) -> int | None:
        """The first generated-token index where the paged output differs from the twin's (None: none yet)."""
        found = [next((i for i, (a, b) in enumerate(zip(p, t)) if a != b), None) for _, p, t in self.outputs()]
        found = [i for i in found if i is not None]
        return min(found) if found else None

    def _last_states(self):
        """(state, block table after) of each sequence the last paged step ran that is still running."""
        if not self.steps:
            return []
        last = self.steps[-1][0]
        return [(s, last.block_tables_after[s.seq_id]) for s in last.seqs if s.seq_id in last.block_tables_after]

    def drift(self) -> dict[int, int]:
        """seq id -> cached_token_count minus what the state rule allows (num_tokens - 1), for the sequences the
        last step ran that still run: 0 with the rollback, the rejected guesses kept without it."""
        prompt = self._prompt_lens()
        return {s.seq_id: s.cached_token_count - (prompt[s.seq_id] + s.generated_len - 1)
                for s, _ in self._last_states()}

    def table_lengths_ok(self) -> bool:
        """Each sequence the last step ran holds exactly blocks_needed(cached_token_count) blocks after it (what
        plain decoding holds)."""
        bs = self.config.block_size
        return all(len(table) == blocks_needed(s.cached_token_count, bs) for s, table in self._last_states())

    def to_dict(self) -> dict:
        return {"config": vars(self.config), "steps": [{"paged": p.to_dict(), "contiguous": c.to_dict()}
                                                        for p, c in self.steps]}


def _shared(lesson: SpecLesson) -> list:
    """What a checkpoint shares with its lesson instead of copying: model, tokenizer, config and
    each recorded step's traces (made once, never changed)."""
    out = [lesson.model, lesson.tokenizer, lesson.config]
    for pair in lesson.steps:
        out.append(pair)
        out.extend(pair)
    return out


def spec_question(lesson: SpecLesson, seed: int) -> Question | None:
    """Predict, then reveal (about the step just shown): a sequence was fed its last token and g guesses from
    cached_token_count c, and the model kept a of them; what is its cached_token_count now? (c + a + 1 when it
    did not stop; the rollback's rule.) None when the last step speculated nothing that can be asked."""
    rows = [r for r in lesson.rows() if r.proposed and len(r.emitted) == r.accepted + 1]
    if not rows or lesson.config.forget_rollback:
        return None
    rng = random.Random(seed)
    row = rng.choice(rows)
    before = row.positions[0]
    answer = before + row.accepted + 1
    distractors = [before + len(row.fed), before + 1, before + row.accepted, before + len(row.proposed)]
    choices = _choices(rng, answer, [d for d in distractors if d != answer], lambda: before + rng.randrange(0, 10))
    return Question("spec_cached", ("spec_q", dict(seq=row.seq_id, fed=len(row.fed), before=before,
                                                   proposed=len(row.proposed), accepted=row.accepted)),
                    choices, answer, (("spec_why", dict(before=before, accepted=row.accepted, answer=answer,
                                                       rejected=len(row.proposed) - row.accepted)),))
