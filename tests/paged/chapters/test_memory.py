"""The memory-waste simulation: hand-checkable cases, properties on a trace, and the printer."""

from __future__ import annotations

import pytest

from paged.chapters.memory import (BLOCK_SIZES, Request, TraceSpec, evaluate, fit_count, format_memory_report,
                                   make_trace, paged_slots, reserved_slots, simulate)

pytestmark = pytest.mark.chapters

SMALL = TraceSpec(num_requests=200, seed=7)


def test_seventeen_tokens_in_blocks_of_sixteen():
    """One request of 17 tokens with block_size 16 holds 2 blocks: 32 slots, 15 wasted."""
    assert paged_slots(17, 16) == 32
    result = evaluate("paged", [Request(prompt_len=10, output_len=7)], max_model_len=64, budget_slots=100,
                      block_size=16)
    assert (result.reserved_slots, result.needed_slots, result.waste_slots) == (32, 17, 15)
    assert result.waste_pct == pytest.approx(100 * 15 / 32)


def test_max_len_reservation_waste_formula():
    """Reserving max_model_len M for k requests of final lengths n_i wastes 1 - sum(n_i) / (k * M)."""
    trace = [Request(10, 5), Request(100, 28), Request(3, 1)]
    result = evaluate("max_len", trace, max_model_len=256, budget_slots=600)
    assert result.reserved_slots == 3 * 256 and result.needed_slots == 15 + 128 + 4
    assert result.waste_pct == pytest.approx(100 * (1 - 147 / 768))
    assert result.fit_requests == 2  # 600 // 256


def test_oracle_wastes_nothing_at_the_end_but_holds_the_future_while_decoding():
    """Prompt 2, output 2: the cache holds 3 then 4 tokens (7 needed) while the oracle holds 4 + 4 = 8."""
    result = evaluate("oracle", [Request(2, 2)], max_model_len=16, budget_slots=16)
    assert result.waste_slots == 0 and result.waste_pct == 0
    assert result.decode_waste_pct == pytest.approx(100 * 1 / 8)


def test_paged_decode_waste_by_hand():
    """Prompt 2, output 3, block_size 4: lengths 3, 4, 5 hold 4, 4, 8 slots: needed 12 of 16 reserved."""
    result = evaluate("paged", [Request(2, 3)], max_model_len=16, budget_slots=16, block_size=4)
    assert result.decode_waste_pct == pytest.approx(100 * 4 / 16)
    assert result.reserved_slots == 8 and result.waste_slots == 3


def test_fit_count_stops_at_the_first_request_that_does_not_fit():
    """fit_count takes reservations in order and stops at the first one over budget."""
    assert fit_count([3, 3, 3], 7) == 2
    assert fit_count([5, 1, 1], 5) == 1
    assert fit_count([1, 1], 10) == 2
    assert fit_count([], 10) == 0


def test_paged_never_reserves_less_than_needed():
    """For every length and block size, paged holds >= length slots and fewer than length + block_size."""
    for block_size in BLOCK_SIZES + (3, 5, 7):
        for length in range(0, 600):
            held = paged_slots(length, block_size)
            assert length <= held < length + block_size and held % block_size == 0


def test_waste_grows_along_the_doubling_ladder():
    """On a fixed trace, waste (final and during decode) never decreases as block_size doubles."""
    report = simulate(SMALL)
    paged = [r for r in report.results if r.scheme == "paged"]
    assert [r.block_size for r in paged] == list(BLOCK_SIZES)
    for small, big in zip(paged, paged[1:]):
        assert small.waste_slots <= big.waste_slots
        assert small.decode_waste_pct <= big.decode_waste_pct
        assert small.fit_requests >= big.fit_requests
    assert paged[0].waste_slots == 0 and paged[0].decode_waste_pct == 0  # block_size 1 wastes nothing


def test_waste_is_not_monotone_for_sizes_that_do_not_divide():
    """Why the ladder doubles: 6 tokens waste 4 slots in blocks of 5 but none in blocks of 6."""
    assert paged_slots(6, 5) - 6 == 4 and paged_slots(6, 6) - 6 == 0


def test_paged_block16_beats_contiguous_reservation_on_the_default_trace():
    """The measured story: paged with block 16 wastes a few %, max_len reservation most of the memory."""
    report = simulate(SMALL)
    by_name = {(r.scheme, r.block_size): r for r in report.results}
    paged16, max_len, oracle = by_name[("paged", 16)], by_name[("max_len", None)], by_name[("oracle", None)]
    assert paged16.waste_pct < 4 < 50 < max_len.waste_pct
    assert paged16.decode_waste_pct < oracle.decode_waste_pct
    assert max_len.fit_requests == report.budget_slots // SMALL.max_model_len
    assert paged16.fit_requests > 3 * max_len.fit_requests


def test_trace_is_seeded_and_clipped():
    """The same spec gives the same trace; lengths stay inside their stated ranges; another seed differs."""
    spec = TraceSpec(num_requests=300, seed=3)
    trace = make_trace(spec)
    assert trace == make_trace(spec) and trace != make_trace(TraceSpec(num_requests=300, seed=4))
    assert all(spec.prompt_min <= r.prompt_len <= spec.prompt_max for r in trace)
    assert all(spec.output_min <= r.output_len <= spec.output_max for r in trace)
    assert all(r.final_len <= spec.max_model_len for r in trace)


def test_bad_inputs_raise_value_error():
    """A spec whose max_model_len cannot hold the longest request, or an unknown scheme, raises ValueError."""
    with pytest.raises(ValueError, match="max_model_len"):
        TraceSpec(max_model_len=1000)
    with pytest.raises(ValueError, match="unknown scheme"):
        reserved_slots("buddy", 5, 5, 16)
    with pytest.raises(ValueError, match="block_size"):
        paged_slots(5, 0)


def test_report_prints_the_distribution_and_every_scheme():
    """The printed table states the trace distribution and has one line per scheme / block size."""
    report = simulate(SMALL)
    text = format_memory_report(report)
    assert "lognormal(median 200" in text and "clipped to [16, 1024]" in text
    assert "max_len" in text and "oracle" in text and "paged bs=256" in text
    assert len(text.splitlines()) == 3 + 2 + len(BLOCK_SIZES)
    assert report.to_dict()["results"][0]["scheme"] == "max_len"
