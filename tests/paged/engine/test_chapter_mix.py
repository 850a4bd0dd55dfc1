"""The chapters' engine options combined: what works together gives plain decoding's tokens, what does not is a
clear ValueError at construction (never a failed step, never a silent wrong result)."""

import pytest

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.windowing import with_window

pytestmark = pytest.mark.engine

PROMPTS = ["1 2 3 4 5 6 7 8", "abcdefghijabcdefghij", "go go go go go go", "the cat sat on the mat"]


def test_swap_and_speculation_under_pressure_give_the_unpressured_tokens(shipped):
    """Swap preemption and n-gram speculation together, in a pool small enough to preempt, decode exactly the
    tokens of a roomy pool with neither, and leave every block free."""
    model, tok = shipped
    params = SamplingParams(max_tokens=24)
    want = [o.token_ids for o in LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=200)).generate(
        PROMPTS, params)]
    for space in (16, 3):  # 3: the swap pool fills, victims fall back to recompute
        engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=14),
                           SchedulerConfig(preemption_mode="swap", swap_space=space, speculative="ngram:4"))
        outs = engine.generate(PROMPTS, params)
        assert [o.token_ids for o in outs] == want
        assert sum(o.num_preemptions for o in outs) > 0
        assert engine.block_manager.num_free_blocks == 14


@pytest.mark.parametrize("option", [dict(speculative="ngram:2"), dict(preemption_mode="swap", swap_space=8)])
def test_a_window_refuses_what_it_does_not_support(shipped, option):
    """A sliding-window model with speculation or swap preemption is refused when the engine is built, naming
    the option."""
    model, tok = shipped
    with pytest.raises(ValueError, match="sliding window"):
        LLMEngine(with_window(model, 6), tok, CacheConfig(block_size=4, num_blocks=32), SchedulerConfig(**option))
