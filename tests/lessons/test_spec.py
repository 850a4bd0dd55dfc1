"""lessons/spec.py: page 12's speculating paged engine and its contiguous twin, what each step did to the guesses,
the break-it (the rollback forgotten) and the quiz question."""

from __future__ import annotations

from functools import lru_cache

import pytest

from lessons.spec import SpecConfig, SpecLesson, spec_question
from paged.config import SamplingParams
from paged.engine import LLMEngine
from paged.model import load_model


@lru_cache(maxsize=1)
def shipped():
    return load_model()


@lru_cache(maxsize=None)
def finished(config: SpecConfig) -> SpecLesson:
    lesson = SpecLesson(config, *shipped())
    while lesson.step():
        assert lesson.table_lengths_ok()
    return lesson


def plain_tokens(lesson: SpecLesson) -> list[list[int]]:
    """Plain greedy decoding of the lesson's prompts (no speculation): the reference."""
    e = LLMEngine(*shipped())
    seqs = [lesson.twin.requests[r] for r in sorted(lesson.twin.requests)]
    return [o.token_ids for o in e.generate([list(s.prompt_token_ids) for s in seqs], SamplingParams(max_tokens=48))]


def test_both_twins_equal_plain_greedy_and_free_the_rejected_tails_blocks():
    """With the rollback, the paged output and the twin's equal plain greedy decoding; the count's rejected guesses
    opened blocks that were freed; guesses on the copy pay: more than one token per forward pass."""
    lesson = finished(SpecConfig(k=4, block_size=2, scenario="mixed"))
    assert [p for _, p, _ in lesson.outputs()] == [t for _, _, t in lesson.outputs()] == plain_tokens(lesson)
    rows = [r for i in range(len(lesson.steps)) for r in lesson.rows(i)]
    assert any(r.blocks_freed for r in rows) and all(set(r.blocks_freed) <= set(r.blocks_taken) for r in rows)
    assert all(r.cached_after == r.twin_cached_after for r in rows)
    totals = lesson.totals()
    assert 0 < totals["rate"] < 1 and totals["per_pass"] > 1.5 and lesson.first_divergence() is None


def test_forgetting_the_rollback_drifts_from_the_twin():
    """The break-it: cached_token_count runs ahead of num_tokens - 1 once a guess is rejected, and the paged output
    parts from the twin's (which still equals plain greedy decoding)."""
    lesson = SpecLesson(SpecConfig(forget_rollback=True), *shipped())
    ahead = 0
    while lesson.step():
        ahead = max([ahead, *lesson.drift().values()])
    assert ahead > 0 and lesson.first_divergence() is not None
    assert [t for _, _, t in lesson.outputs()] == plain_tokens(lesson)


def test_replay_lands_where_stepping_lands():
    """Back and share links: a fresh replay to step n shows what stepping there showed."""
    config = SpecConfig(k=2, block_size=4, scenario="copies")
    stepped = SpecLesson(config, *shipped())
    for _ in range(5):
        stepped.step()
    assert SpecLesson.replay(config, 5, *shipped()).rows() == stepped.rows() != []


def test_the_question_is_answered_by_the_step():
    """The quiz's answer is the cached_token_count the step's own trace records for that sequence."""
    lesson = SpecLesson(SpecConfig(k=4, block_size=4, scenario="copies"), *shipped())
    asked = 0
    while lesson.step():
        q = spec_question(lesson, seed=len(lesson.steps))
        if q is not None:
            row = next(r for r in lesson.rows() if r.seq_id == q.prompt[1]["seq"])
            assert q.answer == row.cached_after and len(set(q.choices)) == 4
            asked += 1
    assert asked >= 3


def test_config_refuses_values_off_the_menu():
    """A k, block_size or scenario the page does not offer is refused by name."""
    with pytest.raises(ValueError, match="k must be one of"):
        SpecConfig(k=3)


def _state(lesson: SpecLesson) -> tuple:
    """Everything the page reads of a lesson and every step's whole trace (its wall time aside): what Back
    must restore."""
    def trace(step) -> dict:
        return {k: v for k, v in step.to_dict().items() if k != "elapsed_ms"}
    return ([lesson.rows(i) for i in range(len(lesson.steps))], lesson.outputs(), lesson.drift(),
            [(trace(p), trace(c)) for p, c in lesson.steps])


@pytest.mark.parametrize("config", [SpecConfig(k=1, block_size=4, scenario="mixed"),
                                    SpecConfig(k=4, block_size=2, forget_rollback=True)])
def test_back_from_a_checkpoint_equals_a_fresh_replay_and_steps_at_most_every_minus_one(
        config, monkeypatch):
    """Back at step n (past several checkpoints) steps at most EVERY - 1 times (counted, not timed), and the
    lesson it gives equals a replay from step 0 to n - 1: now and after both run to the end."""
    from lessons import spec

    model, tokenizer = shipped()
    lesson = SpecLesson.replay(config, 40, model, tokenizer)
    n = len(lesson.steps)
    assert spec.EVERY <= 4 and n >= 30  # far past the first checkpoints
    counted = []
    real_step = SpecLesson.step
    monkeypatch.setattr(SpecLesson, "step", lambda self: counted.append(1) or real_step(self))
    back = lesson.without_last()
    assert len(counted) <= spec.EVERY - 1 and len(lesson.steps) == n  # the lesson Back left is untouched
    monkeypatch.undo()
    fresh = SpecLesson.replay(config, n - 1, model, tokenizer)
    assert len(back.steps) == n - 1 and _state(back) == _state(fresh)
    while back.step():
        pass
    while fresh.step():
        pass
    assert _state(back) == _state(fresh)


def test_backs_all_the_way_to_step_0_and_a_reset_keep_landing_on_replays():
    """Back after Back (each from the checkpoints the first run saved) down to step 0, and Reset then stepping,
    give at every step what a replay from step 0 gives."""
    model, tokenizer = shipped()
    config = SpecConfig(k=2, block_size=4, scenario="copies")
    lesson = SpecLesson.replay(config, 9, model, tokenizer)
    while lesson.steps:
        lesson = lesson.without_last()
        assert _state(lesson) == _state(SpecLesson.replay(config, len(lesson.steps), model, tokenizer))
    with pytest.raises(ValueError, match="at least one step"):
        lesson.without_last()
    again = lesson.restarted()
    for _ in range(5):
        again.step()
    assert _state(again.without_last()) == _state(SpecLesson.replay(config, 4, model, tokenizer))


def test_every_row_past_the_rule_is_flagged_from_its_first_stale_step():
    """Issue 38.4: with the rollback forgotten, each row's `ahead` is how far its cached_token_count passed the
    contiguous twin's (which rolls back) while the outputs still agree, a finishing sequence included (A: 87 -> 92
    with 2 of 4 guesses kept is 2 ahead); first_stale is the first step any row did, before the outputs drift."""
    lesson = SpecLesson.replay(SpecConfig(forget_rollback=True), 12, *shipped())
    assert lesson.first_divergence() is None  # the outputs agree through step 12: the twin's counts are the rule's
    rows = [(i + 1, r) for i in range(len(lesson.steps)) for r in lesson.rows(i)]
    for _, r in rows:
        assert r.twin_cached_after is not None and r.ahead == r.cached_after - r.twin_cached_after
    assert any(r.ahead > 0 and r.seq_id == 0 for _, r in rows)  # A's stale tokens, seen
    step, seq, ahead = lesson.first_stale()
    assert step == min(s for s, r in rows if r.cached_after > r.twin_cached_after) and ahead > 0
    assert SpecLesson.replay(SpecConfig(), 12, *shipped()).first_stale() is None


def test_per_pass_is_per_sequence_and_per_step_counts_the_whole_batch():
    """Issue 38 (page 12): per_pass is the tokens emitted per (sequence, decode step), per_step per decode step
    with every sequence together; both recomputed from the rows."""
    lesson = SpecLesson.replay(SpecConfig(), 12, *shipped())
    per_step = [lesson.rows(i) for i in range(len(lesson.steps)) if lesson.rows(i)]
    emitted = sum(len(r.emitted) for rows in per_step for r in rows)
    totals = lesson.totals()
    assert totals["per_pass"] == pytest.approx(emitted / sum(map(len, per_step)))
    assert totals["per_step"] == pytest.approx(emitted / len(per_step)) and totals["per_step"] > totals["per_pass"]


@pytest.mark.parametrize("forget", [False, True])
def test_every_row_names_only_the_slots_blocks_and_counts_its_step_holds(forget):
    """Issue 38, the general rule on page 12: each decode step's rows (what the page's sentences and cells are
    built from) name the guesses, kept count, slots and blocks of that step's trace.speculative, and
    cached_token_count moves by the fed tokens the rule keeps (+ what the break keeps: ahead)."""
    lesson = SpecLesson.replay(SpecConfig(forget_rollback=forget), 14, *shipped())
    for i, (paged, _) in enumerate(lesson.steps):
        for r in lesson.rows(i):
            spec = paged.speculative.get(r.seq_id)
            state = next(s for s in paged.seqs if s.seq_id == r.seq_id)
            assert r.slots == list(state.slots) and len(r.fed) == len(r.proposed) + 1
            if spec:
                assert (r.proposed, r.accepted) == (spec["proposed"], spec["accepted"])
                assert set(r.discarded_slots) <= set(r.slots) and set(r.blocks_freed) <= set(r.blocks_taken)
                if not forget:
                    assert len(r.discarded_slots) == len(r.proposed) - r.accepted
            kept = len(r.fed) if forget else r.accepted + 1  # the break keeps every fed token as cached
            assert r.cached_after == r.positions[0] + kept
