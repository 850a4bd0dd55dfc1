"""Page 7's touchable "what comes next" (ui.beyond_lab) through AppTest, in both languages and in presenter mode: the
partition-size knob changes the plan and the timed run, whose reduce is checked; the layouts' pools are drawn and
agree."""

from __future__ import annotations

import pytest

from ui.strings import t

from .app_util import app_test, no_exception

FAST = "app_pages/7_Correct_to_fast.py"


@pytest.mark.parametrize("lang,present", [("en", 0), ("zh", 1)])
def test_partition_knob_changes_the_plan_and_the_reduce_stays_exact(lang, present):
    at = app_test(FAST, lang, {"present": present}).run()
    no_exception(at)
    run = at.session_state["fast.split_run"]
    assert len(run.plan) == 4096 // 512 and run.ok
    at.select_slider(key="fast.split_part").set_value(128).run()
    no_exception(at)
    run = at.session_state["fast.split_run"]
    assert len(run.plan) == 32 and run.ok and run.split_ms > 0 and run.unsplit_ms > 0
    shown = " ".join(s.value for s in at.success)
    assert t("beyond.lab_check", lang, err=f"{run.rel_err:.1e}") in shown
    assert t("beyond.layouts_agree", lang, count=31) in shown
    plan = "".join(e.proto.body for e in at.get("html") if "pg-split" in e.proto.body)
    assert plan.count('class="pg-part"') == 17  # 15 partitions, "… 16 more", the last
    assert ('class="pg-split pg-big"' in plan) == bool(present)
