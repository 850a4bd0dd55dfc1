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
