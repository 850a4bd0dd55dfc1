"""paged.engine.admission.check_fits: a request that could never run raises AdmissionError, a ValueError with the
same English sentence as before plus a code and the numbers its fix needs; each suggested number is the boundary
(it passes, one step further fails), checked against check_fits itself rather than restated."""

from __future__ import annotations

import pytest

from paged.block_manager import BlockManager
from paged.config import ModelConfig, SamplingParams, SchedulerConfig
from paged.engine.admission import AdmissionError, check_fits

pytestmark = pytest.mark.engine

MODEL = ModelConfig(max_position_embeddings=256)


def refused(prompt: int, params: SamplingParams, bm: BlockManager, sched: SchedulerConfig) -> AdmissionError:
    with pytest.raises(AdmissionError) as info:
        check_fits(prompt, params, MODEL, bm, sched)
    assert isinstance(info.value, ValueError), "callers catching ValueError still catch it"
    return info.value


def fits(prompt: int, params: SamplingParams, bm: BlockManager, sched: SchedulerConfig) -> bool:
    try:
        check_fits(prompt, params, MODEL, bm, sched)
    except AdmissionError:
        return False
    return True


def test_positions():
    bm, sched = BlockManager(64, 8, watermark=0.0), SchedulerConfig(512, 8)
    err = refused(201, SamplingParams(max_tokens=100), bm, sched)
    assert str(err) == ("prompt (201 tokens) + max_tokens (100) = 301 exceeds max_position_embeddings (256); "
                        "shorten the prompt or lower max_tokens")
    assert err.code == "positions" and err.values == dict(tokens=301, prompt=201, max_positions=256, fit=55)
    assert fits(201, SamplingParams(max_tokens=55), bm, sched)


def test_pool_and_the_smallest_pool_that_holds_it():
    """71 tokens need 9 blocks of 8; 6 blocks less a 0.2 watermark (1 block) leave 5; 11 blocks leave 11 - 2 = 9."""
    sched = SchedulerConfig(512, 8)
    err = refused(31, SamplingParams(max_tokens=40), BlockManager(6, 8, watermark=0.2), sched)
    assert str(err) == ("this request could never fit even in an empty pool: 71 tokens need 9 blocks of 8, the pool "
                        "has 6 (watermark 1); raise num_blocks or lower max_tokens")
    assert err.code == "pool" and err.values == dict(tokens=71, need=9, usable=5, min_blocks=11, fit_tokens=40)
    assert fits(31, SamplingParams(max_tokens=40), BlockManager(11, 8, watermark=0.2), sched)
    assert not fits(31, SamplingParams(max_tokens=40), BlockManager(10, 8, watermark=0.2), sched)
    assert fits(31, SamplingParams(max_tokens=40 - 31), BlockManager(6, 8, watermark=0.2), sched)


def test_samples():
    """n = 4 of 16 new tokens after a 31-token prompt: 3 shared blocks + 4 x 3 own = 15 > 10; n = 2 needs 9."""
    bm, sched = BlockManager(10, 8, watermark=0.0), SchedulerConfig(512, 8)
    err = refused(31, SamplingParams(max_tokens=16, n=4), bm, sched)
    assert str(err) == ("n=4 parallel samples could never run together: they need up to 15 blocks (pool 10) and 4 "
                        "sequence slots (max_num_seqs 8); lower n or max_tokens")
    assert err.code == "samples" and err.values == dict(n=4, n_fit=2, max_num_seqs=8, need=15, usable=10)
    assert fits(31, SamplingParams(max_tokens=16, n=2), bm, sched)
    assert not fits(31, SamplingParams(max_tokens=16, n=3), bm, sched)


def test_batch_tokens_only_without_chunked_prefill():
    bm = BlockManager(64, 8, watermark=0.0)
    err = refused(31, SamplingParams(max_tokens=40), bm, SchedulerConfig(64, 8))
    assert str(err) == ("71 tokens exceed max_num_batched_tokens (64): a preempted request could not be recomputed "
                        "in one step")
    assert err.code == "batch_tokens" and err.values == dict(tokens=71, budget=64)
    assert fits(31, SamplingParams(max_tokens=40), bm, SchedulerConfig(64, 8, enable_chunked_prefill=True))
