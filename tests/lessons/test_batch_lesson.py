"""lessons.batch: a prompt length outside 1..MAX_PROMPT_LEN is refused by name (from the form or a link), and the
bounds themselves are accepted."""

from __future__ import annotations

from lessons.batch import MAX_PROMPT_LEN, BatchConfig, BatchLesson


def test_prompt_length_bounds():
    demo = BatchLesson(BatchConfig(num_blocks=64))
    for bad in (0, -3, MAX_PROMPT_LEN + 1, 9999):
        event = demo.add(bad)
        assert not event.ok and event.reason == "out_of_range" and demo.last_event is event
        assert event.counts == {"value": bad, "lo": 1, "hi": MAX_PROMPT_LEN}
    assert demo.ops == []
    assert demo.add(1).ok and demo.add(MAX_PROMPT_LEN).ok and demo.ops == ["a1", f"a{MAX_PROMPT_LEN}"]
    assert demo.checks and all(c.ok for c in demo.checks)
    _, applied = BatchLesson.replay(BatchConfig(num_blocks=64), ["d", f"a{MAX_PROMPT_LEN + 1}"])
    assert applied == 1, "a link's too-long prompt stops the replay there"


def test_the_pool_contents_follow_the_writes_not_the_tables():
    """The article's batch (A [7, 2, 9] with 10 tokens, C [8, 5, 3, 6] with 15): after "w2" the playground's `holds`
    says slot 28 (A's token 0 by the table) holds C's token 15 and slot 27 (C's token 15 by the table) holds
    nothing; finishing A drops its freed blocks' slots (old K/V are nobody's tokens), the stray C15 in block 7
    included."""
    lesson, applied = BatchLesson.replay(BatchConfig(), ["w2"])
    holds = lesson.playground.holds
    assert applied == 1 and holds[28] == (2, 15) and 27 not in holds
    assert holds[29] == (0, 1) and holds[26] == (2, 14) and holds[9 * 4 + 2] == (0, 10)
    lesson.apply("f0")
    assert not [s for s in holds if s // 4 in (7, 2, 9)] and holds[26] == (2, 14)
