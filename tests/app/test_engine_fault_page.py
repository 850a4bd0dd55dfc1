"""Page 4 · Engine with a module broken on purpose (the bug lab's fault picker, ?fault=): the chain marks the broken
module, the verdict at the top names the first step and sequence where the twins part, and the state rule's table
shows the count the broken link used next to the rule's; with nothing broken none of it is shown."""

from __future__ import annotations

import pytest

from lessons.engine_fault import BROKEN, FAULT_CHOICES
from paged.faults import Fault
from ui.strings import t
from viz.colors import seq_label

from .app_util import app_test, no_exception

ENGINE = "app_pages/4_Engine.py"



@pytest.mark.parametrize("lang", ["en", "zh"])
def test_late_increment_lights_the_runner_names_the_first_step_and_shows_the_short_read(lang):
    """LATE_INCREMENT from the URL at step 3: the chain's ModelRunner box is the broken one, the error box names
    step 2 (the first decode) and sequence A, and A's rule table marks context_len one short (≠, rule: n)."""
    at = app_test(ENGINE, lang, {"fault": "late_increment", "steps": 3, "model": "shipped"}).run()
    no_exception(at)
    lesson = at.session_state["engine.lesson"]
    assert lesson.config.fault == "late_increment" and len(lesson.steps) == 3
    chain = "".join(e.proto.body for e in at.get("html") if "paged-chain" in e.proto.body)
    broken_box = chain.split("pc-broken")[1].split("</div>")[0]
    assert t("chain.stage_model_runner", lang) in broken_box and "context_lens" in broken_box and "×" in broken_box
    assert chain.count("pc-broken") == 2  # the rule in the style sheet is elsewhere: one class use, one CSS rule
    errors = " ".join(e.value for e in at.error)
    parted = t("engine_fault.parted", lang, step=2, seq=seq_label(0), diff="", tol="")
    assert parted.split("{")[0][:12] in errors and "2" in errors and seq_label(0) in errors
    checks = at.session_state["engine.fault_checks"]
    decode = [c for c in checks if c.phase == "decode"]
    assert decode and all(c.context_len == c.cached_after - 1 and "read_short" in c.problems for c in decode)
    assert at.query_params["fault"] == "late_increment"


def test_nothing_broken_shows_no_fault_box_and_no_broken_module():
    """The default: no fault, no error box, no broken mark in the chain, no fault table."""
    at = app_test(ENGINE, "en", {"steps": 2, "model": "shipped"}).run()
    no_exception(at)
    assert at.session_state["engine.lesson"].config.fault is None and not at.error
    assert not any('class="pc-box pc-on pc-broken' in e.proto.body or "×" in e.proto.body for e in at.get("html"))
    assert "engine.fault_checks" not in at.session_state


def test_a_bad_fault_in_the_url_is_named_and_ignored():
    """?fault=cosmic_ray: the page runs without a fault and the URL box says the value could not be used."""
    at = app_test(ENGINE, "en", {"fault": "cosmic_ray", "model": "shipped"}).run()
    no_exception(at)
    assert at.session_state["engine.lesson"].config.fault is None
    assert "cosmic_ray" in " ".join(w.value for w in at.warning)


def test_a_fault_with_chunked_prefill_is_refused_with_the_rule():
    """The engine injects faults with whole-prompt prefill only: with chunked prefill on, the picker says so (a warning
    naming enable_chunked_prefill), nothing is broken, and the page runs on (no error box)."""
    at = app_test(ENGINE, "en", {"fault": "slot_off_by_one", "enable_chunked_prefill": 1, "steps": 2,
                                 "model": "shipped"}).run()
    no_exception(at)
    assert at.session_state["engine.lesson"].config.fault is None and not at.error
    assert t("engine_fault.needs_whole_prefill", "en") in [w.value for w in at.warning]


def test_every_fault_has_a_module_and_a_label_in_both_languages():
    """The picker offers every fault of the catalogue, each mapped to a module of the chain, titled in en and zh."""
    assert set(FAULT_CHOICES[1:]) == {f.value for f in Fault} and set(BROKEN) == set(Fault)
    for fault in Fault:
        assert t(f"buglab.title_{fault.value}", "zh") != t(f"buglab.title_{fault.value}", "en")
