"""Twin engines: the paged engine and its contiguous twin, stepped together, compared per token.

Both twins share the model, the scheduler policy and the block accounting; only where K/V live
differs. They do not always schedule alike, though: the contiguous twin has no prefix caching, so
under memory pressure a prompt that hits the cache in the paged engine can be admitted there steps
earlier, and from then on the two run different batches at the same step. Comparing "this step's
logits" would then compare logits of different tokens.

So the comparison is keyed by what a logits row produced: (request, parallel sample, index of the
generated token). Each twin's logits are kept until the other twin has produced the same token index
of the same sample, whatever step that happens at; then the two rows are compared (max |Δlogits|,
and whether the sampled tokens agree) and dropped. A TwinStep lists the comparisons completed during
it, under the paged engine's seq id; `same_schedule` stays a fact to show (differing schedules are
expected with prefix caching, and no longer an error). Request ids may differ between the twins (a
parallel sample takes an id when its parent's prefill runs), so requests are matched by the order
they were added. The engine page, the bug lab and the tests all use this one comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..config import CacheConfig, SamplingParams, SchedulerConfig
from ..faults import Fault
from .engine import LLMEngine, RequestOutput
from .trace import StepTrace


# twins agree when max |Δlogits| <= RTOL * max(1, max |logits|): fp32 reassociation, not a fault
RTOL = 1e-5


@dataclass
class TwinStep:
    paged: StepTrace
    contiguous: StepTrace
    # paged seq_id -> max |paged - contiguous| over the tokens compared this step
    logits_diff: dict[int, float]
    # paged seq_id -> did both twins sample the same tokens (those compared this step)
    same_tokens: dict[int, bool]
    same_schedule: bool  # both ran the same (request, sample)s in the same phase this step
    # paged seq_id -> max |contiguous logits| compared
    logits_scale: dict[int, float] = field(default_factory=dict)

    @property
    def max_diff(self) -> float:
        return max(self.logits_diff.values(), default=0.0)

    def to_dict(self) -> dict:
        return {"paged": self.paged.to_dict(), "contiguous": self.contiguous.to_dict(),
                "logits_diff": {str(k): v for k, v in self.logits_diff.items()},
                "same_tokens": {str(k): v for k, v in self.same_tokens.items()},
                "same_schedule": self.same_schedule}


@dataclass(frozen=True)
class TwinVerdict:
    """Everything compared so far, in one line for a page: do the twins agree?"""

    max_diff: float  # max |Δlogits| over every token both twins have produced
    # largest |logit| of the contiguous twin over those tokens: the scale of max_diff
    max_abs_logit: float
    same_tokens: bool  # every token both twins produced is the same
    # every step scheduled alike (False is expected with prefix caching under memory pressure)
    same_schedule: bool
    compared: int  # tokens compared

    def agrees(self, rtol: float = RTOL) -> bool:
        """Same tokens, and logits equal within rtol of their magnitude."""
        return self.same_tokens and self.max_diff <= rtol * max(1.0, self.max_abs_logit)


@dataclass
class TwinRun:
    steps: list[TwinStep] = field(default_factory=list)
    paged: list[RequestOutput] = field(default_factory=list)
    contiguous: list[RequestOutput] = field(default_factory=list)
    verdict: TwinVerdict | None = None  # everything compared, token by token

    @property
    def max_diff(self) -> float:
        return max((s.max_diff for s in self.steps), default=0.0)

    def first_divergence(self, i: int) -> int | None:
        """Index of the first generated token where request i's twins disagree (None: identical)."""
        a, b = self.paged[i].token_ids, self.contiguous[i].token_ids
        for k, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return k
        return None if len(a) == len(b) else min(len(a), len(b))

    @property
    def identical(self) -> bool:
        return all(p.token_ids == c.token_ids for p, c in zip(self.paged, self.contiguous))


class TwinEngines:
    """A paged engine (optionally with one injected fault) and a fault-free contiguous twin."""

    def __init__(self, model: torch.nn.Module, tokenizer, cache_config: CacheConfig | None = None,
                 scheduler_config: SchedulerConfig | None = None, attn_impl: str | None = None,
                 fault: Fault | str | None = None) -> None:
        self.paged = LLMEngine(model, tokenizer, cache_config, scheduler_config, "paged", attn_impl,
                               fault)
        self.contiguous = LLMEngine(model, tokenizer, cache_config, scheduler_config, "contiguous",
                                    attn_impl)
        self.request_ids: list[int] = []  # the paged engine's ids, in the order added
        # paged request id -> the contiguous twin's id of the same request
        self._twin_id: dict[int, int] = {}
        self._paged_id: dict[int, int] = {}  # and back
        self._waiting: dict[str, dict[tuple[int, int, int], tuple[int, int, torch.Tensor]]] = {
            # key -> (seq_id, token, logits) not yet produced by the other twin
            "paged": {}, "contiguous": {}}
        self.max_diff, self.max_abs_logit, self.compared = 0.0, 0.0, 0
        self.same_tokens = self.same_schedule = True

    def add_request(self, prompt, params: SamplingParams | None = None) -> int:
        """Add to both twins; returns the paged engine's request id (for outputs() and abort()).

        Raises: ValueError as LLMEngine.add_request does (neither twin keeps the request)."""
        rid = self.paged.add_request(prompt, params)
        try:
            twin = self.contiguous.add_request(prompt, params)
        except BaseException:
            # both twins refuse alike; never leave one side with an extra request
            self.paged.abort(rid)
            raise
        self.request_ids.append(rid)
        self._twin_id[rid], self._paged_id[twin] = twin, rid
        return rid

    def abort(self, request_id: int, sample: int | None = None) -> bool:
        """Abort the request (or one sample) in both twins."""
        stopped = self.paged.abort(request_id, sample)
        self.contiguous.abort(self._twin_id[request_id], sample)
        return stopped

    def has_unfinished(self) -> bool:
        return self.paged.has_unfinished() or self.contiguous.has_unfinished()

    def _key(self, side: str, seq_id: int, generated_len: int) -> tuple[int, int, int]:
        """(paged request id, sample index, generated token index) of what a logits row produced."""
        seq = (self.paged if side == "paged" else self.contiguous).sequences[seq_id]
        rid = seq.request_id
        return (rid if side == "paged" else self._paged_id[rid], seq.sample_index,
                generated_len - 1)

    def _record(self, side: str, trace: StepTrace) -> StepTrace:
        engine = self.paged if side == "paged" else self.contiguous
        for s in trace.seqs:
            # a prompt chunk before its last: nothing sampled, so nothing to pair
            if s.token_out is None:
                continue
            key = self._key(side, s.seq_id, s.generated_len)
            self._waiting[side][key] = (s.seq_id, s.token_out, engine.last_logits[s.seq_id])
        return trace

    def step(self) -> TwinStep:
        """One step of each twin; compares every token both have produced (module docstring)."""
        # recorded first: if the twin's step raises, nothing is lost
        tp = self._record("paged", self.paged.step())
        tc = self._record("contiguous", self.contiguous.step())
        diffs, same, scale = {}, {}, {}
        for key in [k for k in self._waiting["paged"] if k in self._waiting["contiguous"]]:
            seq_id, token, a = self._waiting["paged"].pop(key)
            _, twin_token, b = self._waiting["contiguous"].pop(key)
            diffs[seq_id] = max(diffs.get(seq_id, 0.0), (a - b).abs().max().item())
            scale[seq_id] = max(scale.get(seq_id, 0.0), b.abs().max().item())
            same[seq_id] = same.get(seq_id, True) and token == twin_token
            self.compared += 1
        sched_p = (tp.phase, [self._key("paged", i, 1)[:2] for i in tp.scheduled])
        sched_c = (tc.phase, [self._key("contiguous", i, 1)[:2] for i in tc.scheduled])
        step = TwinStep(tp, tc, diffs, same, sched_p == sched_c, scale)
        self.max_diff = max(self.max_diff, step.max_diff)
        self.max_abs_logit = max([self.max_abs_logit, *scale.values()])
        self.same_tokens = self.same_tokens and all(same.values())
        self.same_schedule = self.same_schedule and step.same_schedule
        return step

    def verdict(self) -> TwinVerdict:
        """Everything compared so far (what a page shows as "twins agree")."""
        return TwinVerdict(self.max_diff, self.max_abs_logit, self.same_tokens, self.same_schedule,
                           self.compared)

    def outputs(self) -> tuple[list[RequestOutput], list[RequestOutput]]:
        return ([self.paged.output(r) for r in self.request_ids],
                [self.contiguous.output(self._twin_id[r]) for r in self.request_ids])


def run_twins(model, tokenizer, prompts,
              params: SamplingParams | list[SamplingParams] | None = None,
              cache_config: CacheConfig | None = None,
              scheduler_config: SchedulerConfig | None = None, attn_impl: str | None = None,
              fault: Fault | str | None = None, max_steps: int = 10_000) -> TwinRun:
    """Run every prompt through both twins to the end; returns each step's comparison and outputs.

    params: one SamplingParams for all, or a list with one per prompt."""
    twins = TwinEngines(model, tokenizer, cache_config, scheduler_config, attn_impl, fault)
    per_prompt = params if isinstance(params, list) else [params] * len(prompts)
    for p, sp in zip(prompts, per_prompt, strict=True):
        twins.add_request(p, sp)
    run = TwinRun()
    while twins.has_unfinished() and len(run.steps) < max_steps:
        run.steps.append(twins.step())
    run.paged, run.contiguous = twins.outputs()
    run.verdict = twins.verdict()
    return run
