"""Back on page 3: BatchLesson.without_last() is exactly the state a fresh replay of the log minus its last operation
gives (the same tables, contexts, free list, last event and paged-vs-contiguous checks), whatever the log holds."""

from __future__ import annotations

from hypothesis import given, settings, strategies as hs

from lessons.batch import BatchConfig, BatchLesson

OPS = hs.lists(hs.sampled_from(["d", "d", "d", "f0", "f1", "f2", "a3", "a7"]), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(OPS)
def test_without_last_is_a_fresh_replay_of_the_shorter_log(ops):
    demo, _ = BatchLesson.replay(BatchConfig(num_blocks=16), ops)
    if not demo.ops:
        return
    back = demo.without_last()
    fresh, applied = BatchLesson.replay(BatchConfig(num_blocks=16), demo.ops[:-1])
    assert applied == len(demo.ops) - 1
    assert back.ops == demo.ops[:-1] and back.trace() == fresh.trace()


def test_without_last_undoes_a_decode():
    demo, _ = BatchLesson.replay(BatchConfig(), ["d", "d"])
    assert demo.without_last().cached_token_counts() == {0: 11, 1: 7, 2: 16}
