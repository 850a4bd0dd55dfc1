"""Fuzzing the library's public constructors and entry points with hostile numbers (10**400, 10**12, nan, inf,
bools, text, None): the only allowed outcomes are a correct result or a ValueError, after a bounded amount of work
(call_budget fails a call that scales with an absurd value instead of letting it hang)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boundary_util import FAST
from call_budget import call_budget
from helpers import tiny_model
from paged.addressing import address_table, blocks_needed
from paged.block_manager import BlockManager
from paged.config import CacheConfig, ModelConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine

pytestmark = pytest.mark.article

HOSTILE = [10**400, -(10**400), 10**12, 2**64, 2**31, 2**24, -1, 0, float("nan"), float("inf"), -float("inf"),
           1e308, -0.0, True, False, None, "1", 1.5]
num = st.one_of(st.integers(-3, 40), st.floats(-2, 3, allow_nan=False), st.sampled_from(HOSTILE))
BUDGET = 200_000  # Python calls + lines: far above any valid call here, far below a scan up to 10**12


def plain_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def plain_real(x) -> bool:
    """An int or float that is a finite float (10**400 is not: it overflows)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def outcome(build):
    """build() under the work budget: its result, or None when it raised ValueError (anything else fails)."""
    with call_budget(BUDGET):
        try:
            return build()
        except ValueError:
            return None


@FAST
@given(max_tokens=num, temperature=num, top_k=num, top_p=num, n=num)
def test_sampling_params(max_tokens, temperature, top_k, top_p, n):
    """SamplingParams either keeps exactly the numbers given (all in range, finite) or raises ValueError."""
    params = outcome(lambda: SamplingParams(max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                                            top_p=top_p, n=n))
    valid = (plain_int(max_tokens) and max_tokens >= 1 and plain_int(top_k) and top_k >= 0 and plain_int(n) and n >= 1
             and plain_real(temperature) and plain_real(top_p)
             and (temperature == 0 or temperature >= 0.01) and 0 < top_p <= 1)
    assert (params is not None) == valid
    if params is not None:
        assert (params.max_tokens, params.top_k, params.n) == (max_tokens, top_k, n)
        assert (params.temperature, params.top_p) == (float(temperature), float(top_p))


@FAST
@given(block_size=num, num_blocks=num, watermark=num, memory=num)
def test_cache_and_scheduler_configs(block_size, num_blocks, watermark, memory):
    """CacheConfig and SchedulerConfig: the given numbers, or a ValueError (overflowing floats included)."""
    cache = outcome(lambda: CacheConfig(block_size=block_size, num_blocks=num_blocks, watermark=watermark,
                                        memory_budget_bytes=memory))
    valid = (plain_int(block_size) and 1 <= block_size <= 2**16 and plain_int(num_blocks) and 1 <= num_blocks <= 2**20
             and plain_real(watermark) and 0 <= watermark < 1 and plain_int(memory) and memory >= 1)
    assert (cache is not None) == valid
    if cache is not None:
        assert (cache.block_size, cache.num_blocks, cache.watermark) == (block_size, num_blocks, float(watermark))
    sched = outcome(lambda: SchedulerConfig(max_num_batched_tokens=block_size, max_num_seqs=num_blocks))
    assert (sched is not None) == (plain_int(block_size) and block_size >= 1 and plain_int(num_blocks)
                                   and num_blocks >= 1)


@FAST
@given(hidden=num, heads=num, kv_heads=num, head_dim=num, layers=num)
def test_model_config(hidden, heads, kv_heads, head_dim, layers):
    """ModelConfig: a config whose sizes are what was given, or a ValueError; never an OverflowError."""
    config = outcome(lambda: ModelConfig(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv_heads,
                                         head_dim=head_dim, num_hidden_layers=layers))
    if config is not None:
        assert (config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim,
                config.num_hidden_layers) == (hidden, heads, kv_heads, head_dim, layers)
        assert heads % kv_heads == 0 and head_dim % 2 == 0


@FAST
@given(table=st.lists(st.integers(0, 9), min_size=1, max_size=4), context_len=num, block_size=num)
def test_address_table(table, context_len, block_size):
    """address_table is the chain computed here by hand for every token, or a ValueError (absurd sizes too)."""
    rows = outcome(lambda: address_table(table, context_len, block_size))
    if rows is not None:
        assert len(rows) == context_len
        for i, a in enumerate(rows):
            pb = table[i // block_size]
            assert (a.logical_block_id, a.physical_block_id, a.block_offset) == (i // block_size, pb, i % block_size)
            assert a.slot == pb * block_size + i % block_size
    covered = plain_int(context_len) and plain_int(block_size) and block_size >= 1 and 0 <= context_len
    if covered and context_len <= 1 << 16 and -(-context_len // block_size) <= len(table):
        assert rows is not None


@FAST
@given(num_tokens=num, block_size=num)
def test_blocks_needed(num_tokens, block_size):
    """blocks_needed is ceil(num_tokens / block_size) or a ValueError."""
    got = outcome(lambda: blocks_needed(num_tokens, block_size))
    if got is not None:
        assert got == -(-num_tokens // block_size)


@FAST
@given(num_blocks=num, block_size=num, watermark=num)
def test_block_manager(num_blocks, block_size, watermark):
    """BlockManager builds a free list of exactly num_blocks blocks, or raises ValueError."""
    bm = outcome(lambda: BlockManager(num_blocks, block_size, watermark=watermark))
    if bm is not None:
        assert bm.num_free_blocks == num_blocks and bm.block_size == block_size


MODEL, TOK = tiny_model(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)


@pytest.fixture(scope="module")
def engine():
    return LLMEngine(MODEL, TOK, CacheConfig(block_size=4, num_blocks=32, watermark=0.0), attn_impl="gather")


@FAST
@given(max_tokens=num, n=num, temperature=num, prompt=st.one_of(st.text(max_size=8), st.lists(num, max_size=4)))
def test_add_request(engine, max_tokens, n, temperature, prompt):
    """add_request queues a request (its id is new) or raises ValueError, never hangs on n = 10**12."""
    before = set(engine.requests)
    params = outcome(lambda: SamplingParams(max_tokens=max_tokens, n=n, temperature=temperature))
    if params is None:
        return
    request_id = outcome(lambda: engine.add_request(prompt, params))
    if request_id is None:
        assert set(engine.requests) == before, "a refused request left something queued"
    else:
        assert request_id not in before and request_id in engine.requests
        engine.abort(request_id)


@pytest.mark.parametrize("call", [
    lambda: SamplingParams(temperature=10**400),
    lambda: SamplingParams(top_p=10**400),
    lambda: CacheConfig(watermark=10**400),
    lambda: address_table([0], 2**24, 2**31),
    lambda: engine_for_cases().add_request([1, 2, 3], SamplingParams(n=10**12)),
], ids=["temperature", "top_p", "watermark", "address_table", "n"])
def test_the_reported_cases_are_value_errors(call):
    """The issue's cases: each raises ValueError (not OverflowError) after a bounded amount of work."""
    with call_budget(BUDGET), pytest.raises(ValueError):
        call()


def engine_for_cases() -> LLMEngine:
    return LLMEngine(MODEL, TOK, CacheConfig(block_size=4, num_blocks=32, watermark=0.0), attn_impl="gather")
