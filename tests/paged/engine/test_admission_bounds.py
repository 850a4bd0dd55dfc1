"""Admission with absurd numbers: a request for 10**12 parallel samples, or a pool hint for a watermark close to 1,
is answered by arithmetic (a bounded amount of work), and the numbers it suggests are the true boundaries."""

from __future__ import annotations

import pytest

from call_budget import call_budget
from paged.block_manager import BlockManager
from paged.config import ModelConfig, SamplingParams, SchedulerConfig
from paged.engine.admission import AdmissionError, check_fits, smallest_pool

pytestmark = pytest.mark.engine

MODEL = ModelConfig(max_position_embeddings=256)


def test_a_trillion_samples_are_refused_without_counting_to_a_trillion():
    """n = 10**12 raises AdmissionError (a ValueError) after a bounded amount of work, with n_fit the largest n
    that a brute-force scan over small n says fits."""
    bm, sched = BlockManager(10, 8, watermark=0.0), SchedulerConfig(512, 8)
    with call_budget(50_000), pytest.raises(AdmissionError) as info:
        check_fits(31, SamplingParams(max_tokens=16, n=10**12), MODEL, bm, sched)
    assert isinstance(info.value, ValueError) and info.value.code == "samples"

    def fits(n: int) -> bool:
        try:
            check_fits(31, SamplingParams(max_tokens=16, n=n), MODEL, bm, sched)
        except AdmissionError:
            return False
        return True
    assert info.value.values["n_fit"] == max(k for k in range(1, 20) if fits(k)) == 2


@pytest.mark.parametrize("max_num_seqs,num_blocks", [(3, 64), (64, 10), (1, 64), (8, 6)])
def test_n_fit_is_the_boundary(max_num_seqs, num_blocks):
    """For small cases n_fit is what scanning every n would give: the largest n < the refused n that fits (1 when
    none does)."""
    bm, sched = BlockManager(num_blocks, 4, watermark=0.0), SchedulerConfig(512, max_num_seqs)
    params = lambda n: SamplingParams(max_tokens=6, n=n)  # noqa: E731

    def fits(n: int) -> bool:
        try:
            check_fits(9, params(n), MODEL, bm, sched)
        except AdmissionError:
            return False
        return True
    refused_n = next(n for n in range(2, 200) if not fits(n))
    with pytest.raises(AdmissionError) as info:
        check_fits(9, params(refused_n), MODEL, bm, sched)
    assert info.value.values["n_fit"] == max((k for k in range(1, refused_n) if fits(k)), default=1)


@pytest.mark.parametrize("need,num_blocks,watermark", [(9, 6, 0.2), (1, 1, 0.0), (40, 3, 0.5), (7, 100, 0.3),
                                                       (1000, 2, 0.999)])
def test_smallest_pool_is_the_smallest(need, num_blocks, watermark):
    """smallest_pool returns the first size (from num_blocks up) whose usable blocks hold `need`, as a plain
    scan finds it."""
    usable = lambda size: size - int(watermark * size)  # noqa: E731  (the block manager's rule)
    expected = next(size for size in range(num_blocks, 10**7) if usable(size) >= need)
    assert smallest_pool(need, num_blocks, watermark) == expected


def test_smallest_pool_near_a_watermark_of_one_is_bounded_work():
    """With watermark 1 - 1e-9 the answer is about 10**12 blocks: found by doubling and bisection, not a scan."""
    with call_budget(50_000):
        size = smallest_pool(1000, 1, 1 - 1e-9)
    usable = lambda s: s - int((1 - 1e-9) * s)  # noqa: E731
    assert usable(size) >= 1000 and usable(size - 1) < 1000
