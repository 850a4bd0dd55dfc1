"""The scheduler's budgets, held at their boundaries: no step feeds more than max_num_batched_tokens tokens or runs
more than max_num_seqs sequences, whatever the budgets, the pool, the prompt lengths and chunked prefill; a step
may use its whole token budget, and not one token more.

What a step fed is read from its StepTrace (tokens_in of every scheduled sequence), not from the scheduler."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paged.addressing import blocks_needed
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine

from helpers import tiny_model

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)


def make_engine(tiny, budget: int, max_num_seqs: int = 8, num_blocks: int = 64, block_size: int = 4,
                chunked: bool = False) -> LLMEngine:
    model, tok = tiny
    return LLMEngine(model, tok, CacheConfig(block_size=block_size, num_blocks=num_blocks, watermark=0.0, seed=5),
                     SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=max_num_seqs,
                                     enable_chunked_prefill=chunked), attn_impl="gather")


def fed(trace) -> int:
    """Tokens this step fed to the model, counted from the trace."""
    return sum(len(s.tokens_in) for s in trace.seqs)


def prompt(n: int, salt: int = 0) -> list[int]:
    return [(7 * i + 31 * salt) % 256 for i in range(n)]


@st.composite
def workloads(draw):
    """Budgets, a pool and prompts that admission accepts; two of the prompts are often put at the token budget's
    edge (their lengths summing to the budget, or to one more)."""
    chunked = draw(st.booleans())
    budget = draw(st.integers(2, 40))
    max_num_seqs = draw(st.integers(1, 8))  # above the budget too: a decode step must still fit the budget
    max_tokens = draw(st.integers(1, min(4, budget - 1)))
    cap = 60 if chunked else budget - max_tokens  # whole-prompt: prompt + max_tokens must fit one step (admission)
    lengths = draw(st.lists(st.integers(1, cap), min_size=1, max_size=6))
    edge = draw(st.sampled_from([None, 0, 1, 1]))
    if edge is not None and 1 <= budget + edge - lengths[0] <= cap:
        lengths.insert(1, budget + edge - lengths[0])
    block_size = draw(st.sampled_from([1, 2, 4, 8]))
    need = blocks_needed(max(lengths) + max_tokens, block_size)  # the largest request, alone
    num_blocks = draw(st.integers(need, need * len(lengths) + 2))  # small pools preempt
    late = draw(st.integers(0, len(lengths)))  # prompts added after the first two steps
    return chunked, budget, max_num_seqs, max_tokens, lengths, block_size, num_blocks, late


@settings(max_examples=100, deadline=None)
@given(w=workloads())
def test_every_step_stays_within_its_budgets(tiny, w):
    """Over random budgets, pools, prompt lengths and chunking: every step feeds <= max_num_batched_tokens tokens
    and runs <= max_num_seqs sequences, and every request still gets all its tokens."""
    chunked, budget, max_num_seqs, max_tokens, lengths, block_size, num_blocks, late = w
    eng = make_engine(tiny, budget, max_num_seqs, num_blocks, block_size, chunked)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    early = len(lengths) - late
    ids = [eng.add_request(prompt(n, i), params) for i, n in enumerate(lengths[:early])]
    traces = []
    for _ in range(2000):
        if len(traces) == 2:
            ids += [eng.add_request(prompt(n, early + i), params) for i, n in enumerate(lengths[early:])]
        if len(traces) >= 2 and not eng.has_unfinished():
            break
        traces.append(eng.step())
    else:
        pytest.fail("the workload did not finish in 2000 steps")
    for t in traces:
        assert fed(t) <= budget, f"step {t.step} fed {fed(t)} tokens, budget {budget}: {t.reason}"
        assert len(t.seqs) <= max_num_seqs and len(t.running) <= max_num_seqs, f"step {t.step}: {t.reason}"
    assert [len(eng.output(i).token_ids) for i in ids] == [max_tokens] * len(lengths)


@pytest.mark.parametrize("first, second", [(5, 7), (1, 11), (11, 1)])
def test_whole_prompts_meeting_the_budget_exactly_share_one_step(tiny, first, second):
    """Whole-prompt prefill: two prompts whose lengths sum to exactly max_num_batched_tokens run in one step."""
    eng = make_engine(tiny, budget=12)
    params = SamplingParams(max_tokens=1, ignore_eos=True)
    a, b = eng.add_request(prompt(first), params), eng.add_request(prompt(second, 1), params)
    t = eng.step()
    assert (t.phase, sorted(t.scheduled), fed(t)) == ("prefill", sorted([a, b]), 12)


@pytest.mark.parametrize("first, second", [(5, 8), (2, 11), (11, 2)])
def test_a_prompt_one_token_over_the_budget_waits(tiny, first, second):
    """Whole-prompt prefill: a prompt that would take the step one token past the budget waits for the next step,
    and the step says why."""
    eng = make_engine(tiny, budget=12)
    params = SamplingParams(max_tokens=1, ignore_eos=True)
    a, b = eng.add_request(prompt(first), params), eng.add_request(prompt(second, 1), params)
    t0 = eng.step()
    assert (t0.scheduled, fed(t0), t0.waiting) == ([a], first, [b])
    assert "stop_tokens" in [code for code, _ in t0.why]
    t1 = eng.step()
    assert (t1.phase, t1.scheduled, fed(t1)) == ("prefill", [b], second)


def test_chunks_fill_the_budget_exactly(tiny):
    """Chunked prefill: a prompt longer than the budget is fed in chunks of exactly max_num_batched_tokens tokens,
    then the rest; one that equals the budget is fed whole in one step."""
    eng = make_engine(tiny, budget=12, chunked=True)
    params = SamplingParams(max_tokens=2, ignore_eos=True)
    eng.add_request(prompt(30), params)
    assert [fed(eng.step()) for _ in range(3)] == [12, 12, 6]
    eng = make_engine(tiny, budget=12, chunked=True)
    eng.add_request(prompt(12), params)
    t = eng.step()
    assert fed(t) == 12 and t.seqs[0].token_out is not None, "a prompt of exactly the budget is fed whole"


def test_chunked_decodes_take_their_share_of_the_budget(tiny):
    """Chunked prefill: running decodes are fed first, one token each, and a waiting prompt's chunk gets exactly
    the budget they leave."""
    eng = make_engine(tiny, budget=10, chunked=True)
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    for i in range(3):
        eng.add_request(prompt(2, i), params)
    eng.step()  # three 2-token prompts: 6 tokens
    eng.add_request(prompt(40, 9), params)
    t = eng.step()
    by_seq = {s.seq_id: len(s.tokens_in) for s in t.seqs}
    assert (t.phase, fed(t), sorted(by_seq.values())) == ("mixed", 10, [1, 1, 1, 7])


def test_max_num_seqs_is_reached_not_passed(tiny):
    """max_num_seqs prompts start together; one more waits until a sequence finishes."""
    eng = make_engine(tiny, budget=64, max_num_seqs=3)
    params = SamplingParams(max_tokens=2, ignore_eos=True)
    ids = [eng.add_request(prompt(4, i), params) for i in range(4)]
    t0 = eng.step()
    assert (sorted(t0.scheduled), t0.waiting) == (ids[:3], [ids[3]])
    assert "stop_max_seqs" in [code for code, _ in t0.why]
    t1 = eng.step()
    assert (t1.phase, sorted(t1.scheduled)) == ("decode", ids[:3])  # all three finish here (max_tokens 2)
    t2 = eng.step()
    assert (t2.phase, t2.scheduled) == ("prefill", [ids[3]])


def run_workload(tiny, w):
    """Run workload `w` (see workloads) to the end; returns its traces."""
    chunked, budget, max_num_seqs, max_tokens, lengths, block_size, num_blocks, late = w
    eng = make_engine(tiny, budget, max_num_seqs, num_blocks, block_size, chunked)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    early = len(lengths) - late
    for i, n in enumerate(lengths[:early]):
        eng.add_request(prompt(n, i), params)
    traces = [eng.step(), eng.step()]
    for i, n in enumerate(lengths[early:]):
        eng.add_request(prompt(n, early + i), params)
    while eng.has_unfinished():
        traces.append(eng.step())
        assert len(traces) < 2000, "the workload did not finish"
    return traces


@settings(max_examples=40, deadline=None)
@given(w=workloads())
def test_every_step_tells_what_it_did(tiny, w):
    """Each step's why holds the numbers its trace shows (the whole prompts fed and their tokens, the decodes, the
    running sequences that took a block, the preempted ones); blocks_allocated holds exactly the blocks a running
    sequence's table gained, blocks_freed of a preempted one its whole table; the phase follows what was fed."""
    chunked = w[0]
    for t in run_workload(tiny, w):
        before, after = t.block_tables_before, t.block_tables_after
        why = {}
        for code, values in t.why:
            why.setdefault(code, []).append(values)
        if not t.seqs:
            assert (t.phase, t.reason, t.blocks_allocated) == ("idle", "nothing to run", {})
            continue
        gained = {s: [b for b in after[s] if b not in before.get(s, [])] for s in after}
        kept = {s: b for s, b in t.blocks_allocated.items() if s in after}  # finished ones left the tables
        assert kept == {s: b for s, b in gained.items() if b}, f"step {t.step}: {t.blocks_allocated}"
        assert set(t.blocks_allocated) <= set(t.scheduled)
        grown = sum(1 for s in t.blocks_allocated if s in before)
        assert why.get("new_blocks", []) == ([{"count": grown}] if grown else [])
        assert why.get("preempted", []) == ([{"seqs": t.preempted}] if t.preempted else [])
        for s in t.preempted:
            assert sorted(t.blocks_freed[s]) == sorted(before[s]) and s in t.waiting
        fed_one = [s for s in t.seqs if len(s.tokens_in) == 1 and s.positions[0] > 0 and s.seq_id in before]
        decodes = [s for s in fed_one if s.token_out is not None and s.positions[0] == s.cached_token_count - 1
                   and s.generated_len >= 2]
        whole = [s for s in t.seqs if s.seq_id not in before and s.positions[0] == 0 and s.token_out is not None]
        if not chunked:
            assert t.phase in ("prefill", "decode")
            if t.phase == "decode":
                assert why["decode"] == [{"count": len(t.seqs)}] and len(decodes) == len(t.seqs)
            else:
                assert why["prefill"] == [{"count": len(t.seqs), "tokens": fed(t)}] and "decode" not in why
            continue
        assert why.get("decode", []) == ([{"count": len(decodes)}] if decodes else [])
        assert why.get("prefill", []) == ([{"count": len(whole), "tokens": sum(len(s.tokens_in) for s in whole)}]
                                          if whole else [])
        assert len(why.get("prefill_chunk", [])) == len(t.seqs) - len(decodes) - len(whole)
        phase = "decode" if len(decodes) == len(t.seqs) else "prefill" if not decodes else "mixed"
        assert t.phase == phase, f"step {t.step}: {t.reason}"
