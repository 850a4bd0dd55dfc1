"""A fuzz of the chapters' public APIs (issue 35.8): beam search, the sliding window, swapping,
speculative decoding and their mixes, on small random prompts, pools and settings. The only
allowed outcomes are the right answer, checked against an independent float64 forward pass of the
model without any cache (greedy tokens; a beam's score is its tokens' log-probs), or a ValueError
whose message names the bad value or the combination refused."""

from __future__ import annotations

import copy
from functools import lru_cache

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paged.engine.beam import BeamSearch
from paged.engine.beam_group import BeamParams
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.windowing import with_window
from paged.model import load_model

pytestmark = pytest.mark.chapters

CHAPTERS = ["plain", "window", "swap", "speculative", "beam", "window+beam", "window+speculative",
            "window+swap", "swap+speculative", "swap+beam", "beam+speculative"]
NAMES = {  # what a refusal may name, per knob a case sets
    "window": ("sliding_window", "sliding window"), "swap": ("swap",),
    "speculative": ("speculative",),
    "beam": ("beam_width", "--beam-width", "beam group"),
    "pool": ("num_blocks", "free blocks", "block_size"),
}
MARGIN = 1e-4  # fp32 vs fp64: top two logits closer than this (relative) are a tie


@lru_cache(maxsize=1)
def models():
    """The shipped model (float32, what the chapters run) and an independent float64 copy."""
    model, tokenizer = load_model()
    return model, copy.deepcopy(model).double(), tokenizer


@torch.no_grad()
def reference_greedy(ids: tuple[int, ...], window: int | None, max_tokens: int,
                     eos: int | None) -> tuple[list[int], int]:
    """Greedy tokens of the float64 model, whole sequence re-run each token (no cache), and how many
    of them are certain (the first near-tie ends the comparable prefix)."""
    model = with_window(models()[1], window)
    tokens, certain = list(ids), None
    for i in range(max_tokens):
        logits = model(torch.tensor([tokens]))[0, -1]
        top = torch.topk(logits, 2).values
        if certain is None and top[0] - top[1] < MARGIN * max(1.0, top[0].abs().item()):
            certain = i
        tokens.append(int(logits.argmax()))
        if tokens[-1] == eos:
            break
    out = tokens[len(ids):]
    return out, len(out) if certain is None else certain


@torch.no_grad()
def reference_logprob(ids: list[int], generated: list[int], window: int | None) -> float:
    """Sum of the float64 model's log-probs of `generated` after `ids` (no cache)."""
    model = with_window(models()[1], window)
    logp = torch.log_softmax(model(torch.tensor([ids + generated]))[0], dim=-1)
    return sum(float(logp[len(ids) - 1 + i, t]) for i, t in enumerate(generated))


case = st.fixed_dictionaries({
    "block_size": st.sampled_from([1, 2, 4, 4, 8]),
    "num_blocks": st.one_of(st.integers(2, 12), st.integers(24, 72), st.integers(24, 72)),
    "window": st.integers(1, 10),
    "k": st.integers(1, 4),
    "beam_width": st.integers(2, 4),
    "texts": st.lists(st.text("abcxyz ", min_size=1, max_size=8), min_size=1, max_size=2),
    "max_tokens": st.integers(1, 5),
    "ignore_eos": st.booleans(),
    "bad": st.sampled_from([None] * 9 + ["block_size", "window", "k", "beam_width"]),
})
BAD = {"block_size": 0, "window": 0, "k": "ngram:²", "beam_width": 1}


def run_case(c: dict, prompts: list[list[int]]):
    """Build what the case asks for and run it: ("beam", results) or ("engine", outputs)."""
    model, _, tokenizer = models()
    chapters = c["chapter"].split("+")
    window = c["window"] if "window" in chapters else None
    model = model if window is None else with_window(model, window)
    cache = CacheConfig(block_size=c["block_size"], num_blocks=c["num_blocks"], watermark=0.0)
    if "beam" in chapters:
        search = BeamSearch(model, tokenizer, cache, SchedulerConfig(
            preemption_mode="swap" if "swap" in chapters else "recompute",
            swap_space=c["num_blocks"] if "swap" in chapters else 0,
            speculative=f"ngram:{c['k']}" if "speculative" in chapters else None))
        return "beam", search.run_all(prompts, BeamParams(beam_width=c["beam_width"],
                                                          max_tokens=c["max_tokens"]))
    spec = c["k"] if isinstance(c["k"], str) else f"ngram:{c['k']}"
    sched = SchedulerConfig(preemption_mode="swap" if "swap" in chapters else "recompute",
                            swap_space=c["num_blocks"] if "swap" in chapters else 0,
                            speculative=spec if "speculative" in chapters else None)
    engine = LLMEngine(model, tokenizer, cache, sched)
    params = SamplingParams(max_tokens=c["max_tokens"], ignore_eos=c["ignore_eos"])
    return "engine", engine.generate(prompts, params)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
@settings(max_examples=4, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(c=case)
def test_chapters_give_the_reference_answer_or_name_the_refusal(chapter, c):
    """Every drawn case: greedy tokens equal the float64 no-cache reference's (up to its first
    near-tie), each beam's score is its tokens' float64 log-probs over its length, best first; or
    a ValueError naming a knob the case set (a bad value drawn must be refused, by its name)."""
    _, _, tokenizer = models()
    c = {**c, "chapter": chapter}
    if c["bad"] is not None and (c["bad"] != "k" or "speculative" in c["chapter"]):
        c = {**c, c["bad"]: BAD[c["bad"]]}
        if c["bad"] == "window" and "window" not in c["chapter"]:
            c["chapter"] = "window+" + c["chapter"].replace("window+", "")
        if c["bad"] == "beam_width" and "beam" not in c["chapter"]:
            c["chapter"] = "beam"
    else:
        c = {**c, "bad": None}
    chapters = c["chapter"].split("+")
    window = c["window"] if "window" in chapters else None
    prompts = [tokenizer.encode(t) for t in c["texts"]]
    try:
        kind, results = run_case(c, prompts)
    except ValueError as err:
        message = str(err)
        combination = [n for knob in chapters if len(chapters) > 1 for n in NAMES.get(knob, ())]
        if c["bad"] is not None:  # its own name, or a combination refused before it was read
            bad = {"window": "sliding_window", "k": "speculative", "beam_width": "beam_width",
                   "block_size": "block_size"}[c["bad"]]
            assert any(n in message for n in [bad, *combination]), (c, message)
            return
        names = [n for knob in [*chapters, "pool"] for n in NAMES.get(knob, ())]
        assert any(n in message for n in names), (c, message)
        return
    assert c["bad"] is None, f"{c['bad']}={c[c['bad']]} was accepted: {c}"
    eos = None if c["ignore_eos"] else tokenizer.eos_token_id
    if kind == "engine":
        for ids, out in zip(prompts, results):
            expected, certain = reference_greedy(tuple(ids), window, c["max_tokens"], eos)
            assert out.token_ids[:certain] == expected[:certain], (c, ids)
            if certain == len(expected):
                assert out.token_ids == expected, (c, ids)
        return
    for ids, result in zip(prompts, results):
        scores = [b.score for b in result.beams]
        assert len(result.beams) == c["beam_width"] and scores == sorted(scores, reverse=True)
        for beam in result.beams:
            want = reference_logprob(ids, beam.token_ids, window) / len(beam.token_ids)
            assert abs(beam.score - want) <= 1e-4 * max(1.0, abs(want)), (c, ids, beam)
