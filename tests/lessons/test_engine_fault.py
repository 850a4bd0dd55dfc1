"""Page 4's "break a module" (lessons.engine_fault): without a fault every step keeps the state rule and the twins
never part; with each fault the twins part at a named step and sequence, and the rule check flags exactly the link
that fault breaks (checked against the rule rebuilt from token indexes and block tables, not from the fault)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lessons.engine import EngineLesson
from lessons.engine_fault import BROKEN, FAULT_CHOICES, broken_stage, first_difference, parse_choice, rule_checks
from lessons.engine_requests import ENGINE_SCENARIOS, SHARING_SCENARIOS, DemoConfig, RequestSpec, Scenario
from lessons.chain import STAGES
from paged.faults import Fault

# the rule each fault breaks, as rule_checks names it (None: not visible in the step's inputs, only in the output)
FLAG = {Fault.EARLY_INCREMENT: "unwritten", Fault.LATE_INCREMENT: "read_short", Fault.SLOT_OFF_BY_ONE: "slot",
        Fault.BLOCK_SIZE_MISMATCH: "slot", Fault.ALIASED_BLOCKS: "slot", Fault.POSITION_OFF_BY_ONE: "position",
        Fault.USE_AFTER_FREE: None, Fault.PAD_NOT_SKIPPED: None}


# a use after free shows once a sequence with a wide table finishes while narrower ones run on (as in the bug lab)
STALE = Scenario(DemoConfig(), (RequestSpec("The quick brown fox jumps over the lazy dog.", max_tokens=4),
                                RequestSpec("abc", "continue", max_tokens=30),
                                RequestSpec("xyz", "continue", max_tokens=30)))


def run(tiny, scenario, steps, fault=None):
    model, tok = tiny
    config = replace(scenario.config, fault=None if fault is None else fault.value)
    return EngineLesson.replay(config, list(scenario.requests), steps, model, tok)


@pytest.mark.parametrize("name", ["three", "tiny_pool", "chunked", "prefix", "samples"])
def test_without_a_fault_every_step_keeps_the_rule(tiny, name):
    """Every scenario (preemption, chunked prefill, prefix hits, forked samples) run 40 steps: no rule broken by
    any sequence, and the twins never part."""
    scenario = {**ENGINE_SCENARIOS, **SHARING_SCENARIOS}[name]
    lesson = run(tiny, scenario, 40)
    assert lesson.steps and first_difference(lesson) is None
    checked = 0
    for seq_id in lesson.view.seqs:
        for check in rule_checks(lesson, seq_id):
            assert check.problems == (), (name, seq_id, check)
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.value)
def test_each_fault_parts_the_twins_and_the_rule_check_names_its_link(tiny, fault):
    """The twins part at some step and sequence; the rows flag the fault's own rule and no other."""
    scenario = {Fault.PAD_NOT_SKIPPED: ENGINE_SCENARIOS["tiny_pool"], Fault.USE_AFTER_FREE: STALE}.get(
        fault, ENGINE_SCENARIOS["three"])
    lesson = run(tiny, scenario, 30, fault)
    first = first_difference(lesson)
    assert first is not None and 1 <= first.step <= 30 and first.seq_id in lesson.view.seqs
    assert first.diff > first.tol
    flags = {p for seq_id in lesson.view.seqs for c in rule_checks(lesson, seq_id) for p in c.problems}
    assert flags == ({FLAG[fault]} if FLAG[fault] else set()), flags
    assert broken_stage(fault)[0] in STAGES


def test_late_increment_reads_one_token_short_from_the_first_decode(tiny):
    """LATE_INCREMENT: the prefill keeps the rule; each decode reads cached_token_count - 1 tokens; the twins part at
    step 2 (the first decode)."""
    lesson = run(tiny, ENGINE_SCENARIOS["three"], 4, Fault.LATE_INCREMENT)
    checks = rule_checks(lesson, 0)
    assert [c.phase for c in checks] == ["prefill", "decode", "decode", "decode"]
    assert checks[0].problems == () and all(c.context_len == c.cached_after - 1 for c in checks[1:])
    assert first_difference(lesson).step == 2


def test_the_picker_choices():
    """'none' and every fault name; anything else is refused by name."""
    assert parse_choice("none") is None and parse_choice("slot_off_by_one") is Fault.SLOT_OFF_BY_ONE
    assert len(FAULT_CHOICES) == len(Fault) + 1 and set(BROKEN) == set(Fault) and broken_stage(None) is None
    with pytest.raises(ValueError, match="cosmic_ray"):
        parse_choice("cosmic_ray")
