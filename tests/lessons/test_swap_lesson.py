"""lessons/swap.py: the swap page's scenario in both modes, its break-its caught by the contiguous twin, its quiz."""

import pytest

from lessons.swap import MAX_TOKENS, PROMPTS, SwapConfig, SwapLesson, min_num_blocks
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
    assert any(code == "swap_full" for s in small.swap.steps for code, _ in s.trace.why)
    assert small.same_tokens()


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
