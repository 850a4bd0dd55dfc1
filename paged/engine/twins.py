"""Twin engines: the paged engine and its contiguous-cache twin, stepped in lockstep and compared.

Both twins share the model, the scheduler policy and the block accounting, so they make the same decisions; only
where K/V live differs. Each step records, per sequence, the max |logits difference| and whether the sampled
tokens agree. The engine page, the bug lab and the tests all use this one comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..config import CacheConfig, SamplingParams, SchedulerConfig
from ..faults import Fault
from .engine import LLMEngine, RequestOutput
from .trace import StepTrace


@dataclass
class TwinStep:
    paged: StepTrace
    contiguous: StepTrace
    logits_diff: dict[int, float]  # seq_id -> max |paged - contiguous| over the vocabulary this step
    same_tokens: dict[int, bool]  # seq_id -> did both sample the same token this step
    same_schedule: bool

    @property
    def max_diff(self) -> float:
        return max(self.logits_diff.values(), default=0.0)

    def to_dict(self) -> dict:
        return {"paged": self.paged.to_dict(), "contiguous": self.contiguous.to_dict(),
                "logits_diff": {str(k): v for k, v in self.logits_diff.items()},
                "same_tokens": {str(k): v for k, v in self.same_tokens.items()}, "same_schedule": self.same_schedule}


@dataclass
class TwinRun:
    steps: list[TwinStep] = field(default_factory=list)
    paged: list[RequestOutput] = field(default_factory=list)
    contiguous: list[RequestOutput] = field(default_factory=list)

    @property
    def max_diff(self) -> float:
        return max((s.max_diff for s in self.steps), default=0.0)

    def first_divergence(self, i: int) -> int | None:
        """Index of the first generated token where request i's twins disagree (None if identical)."""
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
        self.paged = LLMEngine(model, tokenizer, cache_config, scheduler_config, "paged", attn_impl, fault)
        self.contiguous = LLMEngine(model, tokenizer, cache_config, scheduler_config, "contiguous", attn_impl)
        self.request_ids: list[int] = []

    def add_request(self, prompt, params: SamplingParams | None = None) -> int:
        rid = self.paged.add_request(prompt, params)
        rid2 = self.contiguous.add_request(prompt, params)
        assert rid == rid2
        self.request_ids.append(rid)
        return rid

    def has_unfinished(self) -> bool:
        return self.paged.has_unfinished() or self.contiguous.has_unfinished()

    def step(self) -> TwinStep:
        tp, tc = self.paged.step(), self.contiguous.step()
        out_c = {s.seq_id: s.token_out for s in tc.seqs}
        diffs, same = {}, {}
        for s in tp.seqs:
            if s.seq_id in out_c:
                a, b = self.paged.last_logits[s.seq_id], self.contiguous.last_logits[s.seq_id]
                diffs[s.seq_id] = (a - b).abs().max().item()
                same[s.seq_id] = s.token_out == out_c[s.seq_id]
        return TwinStep(tp, tc, diffs, same, (tp.phase, tp.scheduled) == (tc.phase, tc.scheduled))

    def outputs(self) -> tuple[list[RequestOutput], list[RequestOutput]]:
        return ([self.paged.output(r) for r in self.request_ids],
                [self.contiguous.output(r) for r in self.request_ids])


def run_twins(model, tokenizer, prompts, params: SamplingParams | list[SamplingParams] | None = None,
              cache_config: CacheConfig | None = None,
              scheduler_config: SchedulerConfig | None = None, attn_impl: str | None = None,
              fault: Fault | str | None = None, max_steps: int = 10_000) -> TwinRun:
    """Run every prompt (with its own params if a list is given) through both twins to the end; returns every
    step's comparison and both outputs."""
    twins = TwinEngines(model, tokenizer, cache_config, scheduler_config, attn_impl, fault)
    per_prompt = params if isinstance(params, list) else [params] * len(prompts)
    for p, sp in zip(prompts, per_prompt, strict=True):
        twins.add_request(p, sp)
    run = TwinRun()
    while twins.has_unfinished() and len(run.steps) < max_steps:
        run.steps.append(twins.step())
    run.paged, run.contiguous = twins.outputs()
    return run
