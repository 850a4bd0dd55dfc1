"""The scheduler's rules, step by step through the engine's StepTraces: an idle step, the why of a step with the
numbers that stopped it, preemption only when the free blocks fall short, a chunked step using its budget to the
last token, parallel samples taking their seats, and a scheduler that cannot run anything raising instead of
idling forever."""

import pytest

from paged.block_manager import BlockManager
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine, Scheduler
from paged.sequence import Sequence, SequenceStatus

from helpers import tiny_model

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)


def make_engine(tiny, budget: int = 64, num_blocks: int = 64, block_size: int = 4, chunked: bool = False,
                max_num_seqs: int = 8) -> LLMEngine:
    model, tok = tiny
    return LLMEngine(model, tok, CacheConfig(block_size=block_size, num_blocks=num_blocks, watermark=0.0),
                     SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=max_num_seqs,
                                     enable_chunked_prefill=chunked), attn_impl="gather")


def prompt(n: int, salt: int = 0) -> list[int]:
    return [(5 * i + 17 * salt) % 256 for i in range(n)]


def fed(trace) -> dict[int, int]:
    return {s.seq_id: len(s.tokens_in) for s in trace.seqs}


@pytest.mark.parametrize("chunked", [False, True])
def test_a_step_with_nothing_to_run_is_idle(tiny, chunked):
    """An engine with no request (or whose requests all finished) steps idle: no sequence, nothing allocated,
    freed or preempted, and the reason says so."""
    eng = make_engine(tiny, chunked=chunked)
    for _ in range(2):
        t = eng.step()
        assert (t.phase, t.seqs, t.why, t.reason) == ("idle", [], [("idle", {})], "nothing to run")
        assert (t.preempted, t.blocks_allocated, t.blocks_freed) == ([], {}, {})
        rid = eng.add_request(prompt(3), SamplingParams(max_tokens=1, ignore_eos=True))
        assert eng.step().finished == [rid] and not eng.has_unfinished()
    assert eng.step().num_free_blocks == eng.num_blocks


def test_whole_prompt_steps_say_what_stopped_them(tiny):
    """Whole-prompt prefill, budget 12, 4 blocks of 4: each step's why names what ran and, with its numbers, what
    stopped the next prompt (the token budget, then the free blocks), and a decode that lacks a block preempts the
    newest sequence, which is recomputed once blocks are back."""
    eng = make_engine(tiny, budget=12, num_blocks=4)
    params = SamplingParams(max_tokens=2, ignore_eos=True)
    a, b, c = (eng.add_request(prompt(n, i), params) for i, n in enumerate((5, 8, 3)))
    t0 = eng.step()  # a: 5 tokens, 2 blocks; b would make 13 tokens
    assert t0.why == [("prefill", {"count": 1, "tokens": 5}), ("stop_tokens", {"seq": b, "tokens": 8, "budget": 12})]
    assert t0.reason == ("prefill 1 waiting prompt(s), 5 tokens; stopped: seq 1 (8 tokens) would pass "
                         "max_num_batched_tokens 12")
    t1 = eng.step()  # b: 8 tokens take the last 2 blocks; c needs 1
    assert t1.why == [("prefill", {"count": 1, "tokens": 8}),
                      ("stop_blocks", {"seq": c, "need": 1, "free": 0, "watermark": 0})]
    assert t1.reason == "prefill 1 waiting prompt(s), 8 tokens; stopped: seq 2 needs 1 blocks, 0 free (watermark 0)"
    t2 = eng.step()  # a's token 5 fits its block; b's token 8 needs a third block: none free, b is preempted
    assert t2.why == [("decode", {"count": 1}), ("preempted", {"seqs": [b]})]
    assert t2.reason == "decode 1 running sequence(s), one token each; preempted [1] by recompute (pool full)"
    assert (t2.scheduled, t2.preempted, t2.finished) == ([a], [b], [a])
    assert sorted(t2.blocks_freed[b]) == sorted(t1.blocks_allocated[b])
    t3 = eng.step()  # b recomputed (8 + 1 tokens) beside c's 3: exactly the budget
    assert (t3.why, sorted(t3.scheduled)) == ([("prefill", {"count": 2, "tokens": 12})], [b, c])
    assert [len(eng.output(r).token_ids) for r in (a, b, c)] == [2, 2, 1]


@pytest.mark.parametrize("chunked", [False, True])
def test_decode_preempts_only_when_the_free_blocks_fall_short(tiny, chunked):
    """Two sequences whose last blocks are full need one block each: with exactly two free, nobody is preempted
    and each takes one; with none free the newest is preempted and its blocks go to the other (whole-prompt and
    chunked prefill alike)."""
    eng = make_engine(tiny, num_blocks=4, block_size=2, chunked=chunked)
    params = SamplingParams(max_tokens=5, ignore_eos=True)
    a, b = eng.add_request(prompt(2), params), eng.add_request(prompt(2, 1), params)
    t0 = eng.step()
    assert t0.num_free_blocks == 2
    t1 = eng.step()  # token 2 of each opens its second block: 2 needed, 2 free
    assert (t1.preempted, sorted(t1.blocks_allocated)) == ([], [a, b])
    assert t1.why == [("decode", {"count": 2}), ("new_blocks", {"count": 2})] and t1.num_free_blocks == 0
    t2 = eng.step()  # token 3 fits: nothing taken
    assert (t2.why, t2.blocks_allocated) == ([("decode", {"count": 2})], {})
    t3 = eng.step()  # token 4 needs a third block each, none free: b goes, a takes one of its blocks
    assert t3.why == [("decode", {"count": 1}), ("new_blocks", {"count": 1}), ("preempted", {"seqs": [b]})]
    assert sorted(t3.blocks_freed[b]) == sorted(t2.block_tables_after[b])
    assert t3.blocks_allocated[a][0] in t3.blocks_freed[b]
    assert (eng.output(a).num_preemptions, eng.output(b).num_preemptions) == (0, 1)


def test_chunked_step_uses_its_budget_to_the_last_token(tiny):
    """Chunked prefill: three decodes fill a budget of 3; with one token of budget left after the running
    sequences, a waiting prompt gets a one-token chunk."""
    eng = make_engine(tiny, budget=3, chunked=True)
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    ids = [eng.add_request(prompt(1, i), params) for i in range(3)]
    t0 = eng.step()
    assert (t0.phase, t0.why, fed(t0)) == ("prefill", [("prefill", {"count": 3, "tokens": 3})], dict.fromkeys(ids, 1))
    t1 = eng.step()
    assert (t1.phase, t1.why, fed(t1)) == ("decode", [("decode", {"count": 3})], dict.fromkeys(ids, 1))

    eng = make_engine(tiny, budget=10, chunked=True)
    a, b = eng.add_request(prompt(1), params), eng.add_request(prompt(17, 1), params)
    t0 = eng.step()  # a whole (1), b's first chunk (9)
    assert t0.why == [("prefill", {"count": 1, "tokens": 1}),
                      ("prefill_chunk", {"seq": b, "start": 0, "end": 8, "total": 17})]
    c = eng.add_request(prompt(5, 2), params)
    t1 = eng.step()  # a decodes (1), b's last chunk (8) grows it from 3 to 5 blocks, c gets the last token
    assert (t1.phase, fed(t1)) == ("mixed", {a: 1, b: 8, c: 1})
    assert t1.why == [("prefill_chunk", {"seq": b, "start": 9, "end": 16, "total": 17}),
                      ("prefill_chunk", {"seq": c, "start": 0, "end": 0, "total": 5}),
                      ("decode", {"count": 1}), ("new_blocks", {"count": 1})]
    assert len(t1.blocks_allocated[b]) == 2 and not set(t1.blocks_allocated[b]) & set(t1.block_tables_before[b])


@pytest.mark.parametrize("chunked", [False, True])
def test_parallel_samples_take_their_seats(tiny, chunked):
    """A request with n = 2 takes two of max_num_seqs = 2 seats: a second one waits until both samples finish."""
    eng = make_engine(tiny, chunked=chunked, max_num_seqs=2)
    params = SamplingParams(max_tokens=2, n=2, temperature=1.0, seed=3, ignore_eos=True)
    x, y = eng.add_request(prompt(4), params), eng.add_request(prompt(4, 1), params)
    t0 = eng.step()
    assert (t0.scheduled[0], t0.waiting, len(t0.running)) == (x, [y], 2)  # x and the sample forked from it
    assert ("stop_max_seqs", {"max_num_seqs": 2}) in t0.why
    t1 = eng.step()
    assert len(t1.finished) == 2
    t2 = eng.step()
    assert (t2.scheduled[0], len(t2.running)) == (y, 2)


def test_a_scheduler_that_cannot_run_anything_raises(tiny):
    """A waiting prompt bigger than the whole pool, with nothing running (the engine's admission refuses such a
    request; the scheduler alone must not idle forever): schedule() raises RuntimeError naming why."""
    for chunked in (False, True):
        sched = Scheduler(SchedulerConfig(enable_chunked_prefill=chunked), BlockManager(2, 4, watermark=0.0))
        sched.add(Sequence(0, prompt(12)))
        with pytest.raises(RuntimeError, match=r"scheduler stuck: stopped: seq 0 needs 3 blocks, 2 free"):
            sched.schedule()


def test_a_lone_sequence_that_cannot_grow_is_preempted(tiny):
    """Whole-prompt prefill: the only running sequence needs a block and none is free: it is preempted (its
    blocks freed, back to waiting) and the step is idle; the next schedule, unable to start it, raises."""
    bm = BlockManager(1, 2, watermark=0.0)
    sched = Scheduler(SchedulerConfig(), bm)
    seq = Sequence(0, [1, 2])
    sched.add(seq)
    out = sched.schedule()
    assert (out.phase, out.seqs, out.allocated) == ("prefill", [seq], {0: seq.block_table})
    block = seq.block_table[0]
    seq.on_prefill_done(3)
    out = sched.schedule()
    assert (out.phase, out.seqs, out.preempted, out.freed, out.allocated) == ("idle", [], [0], {0: [block]}, {})
    assert ("preempted", {"seqs": [0]}) in out.why
    assert (list(sched.waiting), sched.running, bm.num_free_blocks) == ([seq], [], 1)
    with pytest.raises(RuntimeError, match="scheduler stuck"):
        sched.schedule()


def test_add_queues_a_sequence_as_waiting():
    """Scheduler.add puts a sequence at the back of the waiting queue, marked waiting whatever it was."""
    sched = Scheduler(SchedulerConfig(), BlockManager(4, 4, watermark=0.0))
    seq = Sequence(0, [1, 2])
    seq.status = SequenceStatus.RUNNING
    sched.add(seq)
    assert (seq.status, list(sched.waiting)) == (SequenceStatus.WAITING, [seq])


@pytest.mark.parametrize("chunked", [False, True])
def test_a_recomputed_sequence_takes_one_seat(chunked):
    """A preempted sequence (its sampled tokens kept, to be recomputed) is one sequence: with max_num_seqs 2 and
    one running it is admitted."""
    sched = Scheduler(SchedulerConfig(max_num_seqs=2, enable_chunked_prefill=chunked), BlockManager(16, 4, 0.0))
    a = Sequence(0, [1, 2, 3])
    sched.add(a)
    sched.schedule()
    a.on_prefill_done(4)
    b = Sequence(1, [5, 6, 7], generated_token_ids=[8, 9])
    sched.add(b)
    out = sched.schedule()
    assert b in out.seqs and b.status is SequenceStatus.RUNNING and len(sched.running) == 2


def test_chunked_lone_sequence_that_cannot_grow_raises():
    """Chunked prefill: the only running sequence needs a block and none is free: it preempts itself, nothing is
    left to run, and schedule() raises saying the batch is empty."""
    bm = BlockManager(1, 2, watermark=0.0)
    sched = Scheduler(SchedulerConfig(enable_chunked_prefill=True), bm)
    seq = Sequence(0, [1, 2])
    sched.add(seq)
    assert sched.schedule().num_tokens == {0: 2}
    seq.on_prefill_done(3)
    with pytest.raises(RuntimeError, match="scheduler stuck: empty batch"):
        sched.schedule()
    assert (list(sched.waiting), sched.running, bm.num_free_blocks) == ([seq], [], 1)


def test_finish_frees_a_sequence_wherever_it_is():
    """finish() on a waiting sequence returns the blocks it released ([] when it held none) and marks it
    finished; one already finished releases nothing."""
    bm = BlockManager(8, 4, watermark=0.0)
    sched = Scheduler(SchedulerConfig(), bm)
    bare, holding = Sequence(0, [1, 2]), Sequence(1, [3, 4, 5, 6, 7])
    sched.add(bare)
    sched.add(holding)
    blocks = bm.allocate(holding)
    assert sched.finish(bare) == [] and bare.status is SequenceStatus.FINISHED
    assert sorted(sched.finish(holding)) == sorted(blocks) and bm.num_free_blocks == 8
    assert sched.finish(bare) == [] and not sched.has_unfinished()


def test_forked_samples_copy_their_shared_last_block_once(tiny):
    """After a fork the samples share a partly filled last block; at the first decode exactly one of them takes a
    new block (the copy), the other keeps the old one, and blocks_allocated says so."""
    eng = make_engine(tiny, num_blocks=16)
    rid = eng.add_request(prompt(5), SamplingParams(max_tokens=3, n=2, temperature=1.0, seed=7, ignore_eos=True))
    t0 = eng.step()
    parent, child = t0.block_tables_after[rid], t0.block_tables_after[t0.forked[rid][0]]
    assert parent == child and len(parent) == 2
    t1 = eng.step()
    assert len(t1.copies) == 1 and len(t1.blocks_allocated) == 1
    (sid, new), = t1.blocks_allocated.items()
    assert new[0] not in parent and t1.copies == [(parent[1], new[0])]
    other = next(s for s in t1.block_tables_after if s != sid)
    assert t1.block_tables_after[other] == parent and t1.block_tables_after[sid] == [parent[0], new[0]]


def test_chunked_stop_blocks_names_the_blocks_of_the_whole_prompt(tiny):
    """Chunked prefill: a waiting prompt is admitted only if its whole prompt fits (vLLM 0.32's reservation), though
    a chunk is all the budget leaves it; else it stops the step, and the why names it, the blocks its whole prompt
    needs, the free ones and the watermark."""
    eng = make_engine(tiny, budget=26, num_blocks=12, block_size=2, chunked=True)
    params = SamplingParams(max_tokens=1, ignore_eos=True)
    eng.add_request(prompt(22), params)  # 11 of the 12 blocks
    b = eng.add_request(prompt(20, 1), params)  # 4 tokens of budget left, 1 block free; its prompt needs 10
    t = eng.step()
    assert t.why[-1] == ("stop_blocks", {"seq": b, "need": 10, "free": 1, "watermark": 0}) and t.waiting == [b]


def test_whole_prompt_decodes_stay_within_the_budget_when_max_num_seqs_is_larger(tiny):
    """Whole-prompt prefill with max_num_seqs (6) above max_num_batched_tokens (4): no more prompts start than a
    decode step can feed, so no step feeds more than 4 tokens, the stop names the decode budget, and all six finish."""
    eng = make_engine(tiny, budget=4, max_num_seqs=6)
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    ids = [eng.add_request(prompt(1, i), params) for i in range(6)]
    traces = []
    while eng.has_unfinished():
        traces.append(eng.step())
        assert len(traces) < 100
    assert max(sum(fed(t).values()) for t in traces) <= 4
    assert any(code == "stop_decode_budget" for t in traces for code, _ in t.why)
    assert [len(eng.output(i).token_ids) for i in ids] == [3] * 6


@pytest.mark.parametrize("chunked", [False, True])
def test_two_parallel_sample_requests_admitted_together_keep_max_num_seqs(tiny, chunked):
    """Two requests with n = 2 and max_num_seqs = 3: the second waits, since admitting both in one step would fork
    into four running sequences; every step runs at most 3, and both end with their two samples."""
    eng = make_engine(tiny, max_num_seqs=3, chunked=chunked)
    params = SamplingParams(max_tokens=3, ignore_eos=True, n=2, temperature=1.0, seed=0)
    ids = [eng.add_request(prompt(5, i), params) for i in range(2)]
    traces = []
    while eng.has_unfinished():
        traces.append(eng.step())
        assert len(traces) < 100
    assert max(len(t.running) for t in traces) <= 3
    assert all(len(eng.output(i).samples) == 2 for i in ids)
