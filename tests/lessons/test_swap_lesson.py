"""lessons/swap.py: the swap page's scenario in both modes, its break-its caught by the contiguous twin, its quiz."""

import pytest

from helpers import named_numbers
from lessons.swap import MAX_TOKENS, PROMPTS, SwapConfig, SwapLesson, min_num_blocks, step_words
from paged.addressing import blocks_needed


@pytest.fixture(scope="module")
def lesson(shipped):
    return SwapLesson(SwapConfig(), *shipped)


def test_both_modes_preempt_and_end_with_the_same_tokens(lesson):
    """The default scenario swaps (swap mode) and recomputes (recompute mode) at least once each; same tokens, the
    twin agrees at every step, and swap mode re-feeds no token while recompute re-feeds some."""
    swap, recompute = lesson.swap.steps[-1], lesson.recompute.steps[-1]
    assert swap.swaps >= 1 and swap.recomputes == 0 and recompute.recomputes >= 1 and recompute.swaps == 0
    assert lesson.same_tokens() and lesson.twin_break() is None
    assert swap.tokens_recomputed == 0 and recompute.tokens_recomputed > 0
    assert swap.blocks_copied > 0 and recompute.blocks_copied == 0
    assert not swap.swap_tables, "every swapped sequence came back"


def test_state_between_swap_out_and_in_is_in_the_swap_pool(lesson):
    """Between its swap-out and its swap-in, a victim holds no pool block and exactly its swap blocks."""
    out = next(i for i, s in enumerate(lesson.swap.steps) if s.trace.swap_out)
    sid, pairs = next(iter(lesson.swap.steps[out].trace.swap_out.items()))
    back = next(i for i, s in enumerate(lesson.swap.steps) if sid in s.trace.swap_in)
    assert back > out
    for state in lesson.swap.steps[out:back]:
        assert sid not in state.tables and state.swap_tables[sid] == [b for _, b in pairs]
    assert sid in lesson.swap.steps[back].tables and sid not in lesson.swap.steps[back].swap_tables


@pytest.mark.parametrize("how", ["no_copy", "wrong_blocks"])
def test_each_break_is_caught_by_the_twin_at_the_first_swap_in(shipped, how):
    """A broken swap-in shows as a logits difference from the contiguous twin at the step it swaps in."""
    broken = SwapLesson(SwapConfig(break_it=how), *shipped)
    first_in = next(i + 1 for i, s in enumerate(broken.swap.steps) if s.trace.swap_in)
    assert broken.twin_break() == first_in
    assert broken.diffs[first_in - 1][0] > 1e-3


def test_a_small_swap_pool_recomputes_instead(shipped):
    """swap_space smaller than a victim's table: swap mode recomputes that one and says why; tokens unchanged."""
    small = SwapLesson(SwapConfig(swap_space=3), *shipped)
    assert small.swap.steps[-1].recomputes >= 1
    fell = [(code, v) for s in small.swap.steps for code, v in s.trace.why if code.startswith("swap_") and
            code not in ("swap_wait",)]
    assert fell and small.same_tokens()
    # issue 38: a victim needing more than the whole swap pool is "too small", never "full" with every block free
    assert all((code == "swap_too_small") == (v["need"] > v["swap_space"]) for code, v in fell)
    assert any(code == "swap_too_small" and v["free"] == v["swap_space"] == 3 for code, v in fell)


def test_quiz_answers_come_true_in_the_step_they_name(lesson, shipped):
    """The swap question's answer is the victim's block count, ceil(cached tokens / block_size); the recompute
    question's is the prompt plus the tokens generated so far."""
    _, tok = shipped
    seen = set()
    for seed in range(12):
        q = lesson.question(0, seed)
        seen.add(q.kind)
        step, sid = q.prompt[1]["step"], q.prompt[1]["seq"]
        if q.kind == "swap_blocks":
            before = max(i for i, s in enumerate(lesson.swap.steps[:step - 1])
                         if sid in [x.seq_id for x in s.trace.seqs])
            cached = next(x.cached_token_count for x in lesson.swap.steps[before].trace.seqs if x.seq_id == sid)
            assert q.answer == blocks_needed(cached, lesson.config.block_size)
        else:
            state = next(x for x in lesson.recompute.steps[step - 1].trace.seqs if x.seq_id == sid)
            assert q.answer == len(tok.encode(PROMPTS[sid])) + state.generated_len - 1
    assert seen == {"swap_blocks", "recompute_tokens"}
    assert lesson.question(lesson.total, 0) is None


def test_bad_config_and_the_smallest_pool(shipped):
    """A block size or break-it outside the menu is refused by name; min_num_blocks fits the longest request."""
    _, tok = shipped
    with pytest.raises(ValueError, match="block_size"):
        SwapConfig(block_size=3)
    with pytest.raises(ValueError, match="break_it"):
        SwapConfig(break_it="bogus")
    longest = max(len(tok.encode(p)) for p in PROMPTS) + MAX_TOKENS
    assert min_num_blocks(4, tok) == -(-longest // 4)


def _cached_before(run, k: int, sid: int) -> int:
    """sid's cached_token_count after the last step before step k (1-based) that scheduled it: read from traces."""
    return next((s.cached_token_count for state in reversed(run.steps[:k - 1]) for s in state.trace.seqs
                 if s.seq_id == sid), 0)


def test_what_a_preempted_sequence_kept_and_re_feeds_adds_up(lesson):
    """Issue 38.3: a swapped-out sequence's kept cached_token_count and a recomputed one's "cached once" are both
    its count at its last scheduled step; the re-fed prefill is that many plus the sampled tokens never cached
    (n - cached >= 0), and what it had cached fit in the blocks it freed."""
    bs = lesson.config.block_size
    for run in (lesson.swap, lesson.recompute):
        for k, state in enumerate(run.steps, 1):
            for sid in state.trace.preempted:
                assert state.kept[sid] == _cached_before(run, k, sid)
                assert state.kept[sid] <= len(state.trace.blocks_freed[sid]) * bs
    backs = [(k, sid, n, s.cached_once[sid]) for k, s in enumerate(lesson.recompute.steps, 1)
             for sid, n in s.recomputed_now.items()]
    assert backs
    for k, sid, n, once in backs:
        was = next(j for j in range(k - 1, 0, -1) if sid in lesson.recompute.steps[j - 1].trace.preempted)
        assert once == lesson.recompute.steps[was - 1].kept[sid] == _cached_before(lesson.recompute, was, sid)
        assert 0 < n - once and n == next(len(x.tokens_in) for x in lesson.recompute.steps[k - 1].trace.seqs
                                          if x.seq_id == sid)


def test_blocks_taken_in_the_step_they_were_left_are_handed_not_left(lesson):
    """Issue 38.2: a block a preempted sequence freed and another sequence was allocated in the same step is in
    handed() (who left it, who took it), read from the trace's blocks_freed and blocks_allocated."""
    seen = 0
    for state in lesson.swap.steps + lesson.recompute.steps:
        t = state.trace
        left = {b: sid for sid in t.preempted for b in t.blocks_freed.get(sid, [])}
        expect = {b: (left[b], sid) for sid, bs in t.blocks_allocated.items() for b in bs if b in left}
        assert state.handed() == expect
        for b, (prev, now) in expect.items():
            assert t.block_tables_after[now].count(b) == 1 and prev not in t.block_tables_after
        seen += len(expect)
    assert seen, "the default scenario hands a block over in the step that frees it"


def test_every_sentence_names_only_blocks_and_counts_the_step_holds(lesson):
    """Issue 38, the general rule on page 10: at every step of both modes, a sentence's pool blocks are ones the
    step moved or freed for that very sequence, its swap blocks the ones the step copied to or from, its token
    counts add up (re-fed = cached once + never cached) and never exceed what the freed blocks held."""
    bs = lesson.config.block_size
    for run in (lesson.swap, lesson.recompute):
        for state in run.steps:
            t = state.trace
            for key, values in step_words(state):
                sid, numbers = values["seq"], named_numbers(values)
                if key == "out_msg":
                    assert set(numbers["src"]) == set(t.blocks_freed[sid])
                    assert numbers["dst"] == state.swap_tables[sid]
                    assert values["cached"] <= len(numbers["src"]) * bs
                elif key == "in_msg":
                    assert set(numbers["dst"]) <= set(t.block_tables_after[sid])
                    assert len(numbers["src"]) == len(numbers["dst"])
                elif key == "recompute_msg":
                    assert sid in t.preempted and numbers["blocks"] == t.blocks_freed[sid]
                else:
                    assert key == "back_msg" and values["n"] == values["cached"] + values["new"]
                    refed = next(x for x in t.seqs if x.seq_id == sid)
                    assert values["n"] == len(refed.tokens_in) and values["new"] >= 1
