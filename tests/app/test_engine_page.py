"""Page 4 · Engine through AppTest: loads in 简体中文, one step is a prefill of the scheduled prompts, the twins agree,
the tiny-pool scenario preempts, bad requests give an error box (never an exception), and the URL replays a session
to the exact step."""

from __future__ import annotations

import pytest

from lessons.engine_requests import MAX_PROMPT_CHARS
from ui.strings import t

from .app_util import app_test, fragment_click

ENGINE = "app_pages/4_Engine.py"


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def demo(at):
    return at.session_state["engine.lesson"]


def test_loads_in_chinese_with_the_default_requests():
    at = app_test(ENGINE, "zh").run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == t("engine.title", "zh")
    assert len(demo(at).requests) == 3 and not demo(at).steps
    assert at.query_params["steps"] == "0"


def test_the_schedulers_reason_speaks_the_pages_language():
    """In 简体中文 the decision box gives the scheduler's reason in Chinese too, with the same numbers."""
    at = app_test(ENGINE, "zh").run()
    at.button(key="engine.step").click().run()
    no_exception(at)
    reason = t("engine.why_prefill", "zh", count=3, tokens=demo(at).last.paged.why[0][1]["tokens"])
    assert "等待中的 prompt" in reason
    assert any(reason in i.value and "原因" in i.value for i in at.info), [i.value for i in at.info]
    assert not any("waiting prompt(s)" in i.value for i in at.info)


def test_the_slot_and_pool_hovers_speak_the_pages_language():
    """In 简体中文, after a step, each slot_mapping cell's tooltip is the page's Chinese sentence (token → 逻辑 block,
    块内偏移 → slot) with the numbers of the cell, and so is each written pool slot's address chain: no English
    "logical block", "offset" or "token 3 →" is left."""
    from viz.cells import read_cells

    at = app_test(ENGINE, "zh").run()
    at.button(key="engine.step").click().run()
    no_exception(at)
    cells = [c for h in at.get("html") if "pg-list" in h.proto.body for c in read_cells(h.proto.body)]  # + queues
    seq = demo(at).last.paged.seqs[0]
    position, slot = seq.positions[1], seq.slots[1]
    where = t("engine.slots_place", "zh", block=slot // 8, offset=slot % 8)
    want = t("engine.slots_token", "zh", seq="A", position=position, logical=position // 8, offset=position % 8,
             slot=slot, where=where)
    assert want in [c["title"] for c in cells], [c["title"] for c in cells][:3]
    english = ("logical block", "offset", "A token", "B token", "C token")  # "token" itself is the article's term
    assert not [c["title"] for c in cells if any(w in c["title"] for w in english)]
    pool = [h.proto.body for h in at.get("html") if 'class="pp-grid"' in h.proto.body]
    assert pool and "块内偏移" in pool[0] and "logical block" not in pool[0]


def test_one_step_is_a_prefill_then_running_to_the_end_the_twins_agree():
    """Step 1 prefills A, B and C (named in the decision box); the URL counts the step; after "Run to end" every
    request finished and the paged and contiguous twins agreed at every step (max |Δlogits| < 1e-4)."""
    at = app_test(ENGINE).run()
    at.button(key="engine.step").click().run()
    no_exception(at)
    last = demo(at).last.paged
    assert last.phase == "prefill" and last.scheduled == [0, 1, 2]
    assert any("Step 1 · prefill" in i.value and "3 waiting prompt(s)" in i.value for i in at.info)
    assert at.query_params["steps"] == "1"
    at.button(key="engine.run").click().run()
    no_exception(at)
    d = demo(at)
    waiting, running, finished = d.queues()
    assert not waiting and not running and finished == [0, 1, 2]
    worst, agree = d.twin_summary()
    assert agree and worst < 1e-4
    assert any(m.value.startswith(":material/check_circle:") for m in at.markdown)
    assert at.button(key="engine.step").disabled


def test_tiny_pool_scenario_preempts_and_recomputes():
    """The tiny-pool scenario sets num_blocks 20; within 40 steps some sequence is preempted (warning shown at that
    step), and it later finishes with the same tokens as its contiguous twin."""
    at = app_test(ENGINE).run()
    at.selectbox(key="engine.scenario").set_value("tiny_pool").run()
    assert at.slider(key="engine.num_blocks").value == 20
    for _ in range(40):
        at.button(key="engine.step").click().run()
        if demo(at).last.paged.preempted:
            break
    no_exception(at)
    assert demo(at).last.paged.preempted, "no preemption within 40 steps"
    assert any("Preempted by recompute" in w.value for w in at.warning)
    at.button(key="engine.run").click().run()
    rows = demo(at).rows()
    assert any(r.preemptions for r in rows) and all(r.status == "finished" for r in rows)
    assert demo(at).twin_summary()[1]


def test_bad_requests_show_errors_not_exceptions():
    """An empty prompt, a long prompt over the step's token budget, and requests the pool can never hold: each an
    error box with its real fix (the knob and the number to set), no exception, and no request added."""
    at = app_test(ENGINE).run()
    count = len(demo(at).all_specs())
    at.text_input(key="engine.new_text").set_value("").run()
    at.button(key="engine.add").click().run()
    no_exception(at)
    assert at.error and at.error[0].value.startswith(f"**{t('engine.err_empty', 'en')}**")
    at.selectbox(key="engine.max_num_batched_tokens").set_value(128).run()
    at.slider(key="engine.num_blocks").set_value(64).run()
    at.text_input(key="engine.new_text").set_value("x" * MAX_PROMPT_CHARS).run()  # 202 + 64 tokens > 128
    at.button(key="engine.add").click().run()
    no_exception(at)
    assert len(at.error) == 1 and at.error[0].value.endswith(
        t("engine.fix_batch_tokens", "en", tokens=266, budget=128))
    assert len(demo(at).all_specs()) == count
    at.slider(key="engine.num_blocks").set_value(4).run()  # now the pool is too small for every default request
    no_exception(at)
    assert len(at.error) == count
    assert all("Raise num_blocks to" in e.value and "never run" in e.value for e in at.error)
    at.slider(key="engine.num_blocks").set_value(32).run()  # the link kept them: a big pool runs them again
    no_exception(at)
    assert not at.error and len(demo(at).requests) == count


def test_no_error_says_do_what_the_message_says():
    """The pool's fix names the smallest num_blocks that holds the request; following it, the request is accepted."""
    at = app_test(ENGINE).run()
    at.slider(key="engine.num_blocks").set_value(4).run()
    fix = at.error[0].value.split(t("common.fix", "en"))[1]
    assert "message says" not in fix
    need = int(fix.split("Raise num_blocks to ")[1].split()[0])
    at.slider(key="engine.num_blocks").set_value(need).run()
    no_exception(at)
    assert len(demo(at).requests) >= 1 and len(at.error) < 3


def test_a_seed_out_of_range_is_refused_by_name():
    at = app_test(ENGINE).run()
    count = len(demo(at).all_specs())
    at.text_input(key="engine.new_seed").input("12345").run()
    at.button(key="engine.add").click().run()
    no_exception(at)
    label = t("engine.seed", "en")
    assert len(at.error) == 1 and len(demo(at).all_specs()) == count
    assert at.error[0].value.startswith(
        f"**{t('engine.err_out_of_range', 'en', label=label, value=12345, lo=0, hi=9999)}**")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_any_typed_seed_is_used_or_refused_by_name(lang):
    """The seed box takes text and Add checks it: 2**53 and 2**64 (which Streamlit's number input would mark red and
    silently replace by the old value) are refused as out of range, non-numbers as not a whole number, each by name
    with nothing added; ４２ typed with a Chinese IME is 42, and the request is added with exactly that seed."""
    at = app_test(ENGINE, lang).run()
    count, label = len(demo(at).all_specs()), t("engine.seed", lang)
    for text in (str(2**53), str(2**64), "-1"):
        at.text_input(key="engine.new_seed").input(text).run()
        at.button(key="engine.add").click().run()
        no_exception(at)
        assert len(demo(at).all_specs()) == count and len(at.error) == 1
        assert at.error[0].value.startswith(
            f"**{t('engine.err_out_of_range', lang, label=label, value=int(text), lo=0, hi=9999)}**")
    for text, shown in (("abc", "abc"), ("1.5", "1\\.5"), ("1e3", "1e3"), ("", "")):
        at.text_input(key="engine.new_seed").input(text).run()
        at.button(key="engine.add").click().run()
        no_exception(at)
        assert len(demo(at).all_specs()) == count and len(at.error) == 1
        assert at.error[0].value.startswith(f"**{t('engine.err_not_a_number', lang, label=label, text=shown)}**")
        assert t("engine.fix_not_a_number", lang, label=label, lo=0, hi=9999) in at.error[0].value
    at.text_input(key="engine.new_seed").input("４２").run()
    at.button(key="engine.add").click().run()
    no_exception(at)
    assert not at.error and len(demo(at).all_specs()) == count + 1 and demo(at).all_specs()[-1].seed == 42


def test_query_params_replay_to_the_exact_step():
    """A link with the requests and steps=5 lands on step 5 with the same state as clicking Step five times."""
    at = app_test(ENGINE).run()
    for _ in range(5):
        at.button(key="engine.step").click().run()
    params = dict(at.query_params)
    assert params["steps"] == "5"
    shared = app_test(ENGINE, params={k: v for k, v in params.items() if k != "lang"}).run()
    no_exception(shared)
    a, b = demo(at), demo(shared)
    assert len(b.steps) == 5
    assert [(r.seq_id, r.text, r.cached_token_count) for r in b.rows()] == \
        [(r.seq_id, r.text, r.cached_token_count) for r in a.rows()]
    assert b.last.paged.slot_mapping == a.last.paged.slot_mapping


def test_an_engine_failure_is_an_error_box(monkeypatch):
    """Should the engine ever raise during a step, the learner sees an error box with a fix, not a traceback."""
    from lessons.engine import EngineLesson

    at = app_test(ENGINE).run()

    def boom(self):
        raise RuntimeError("scheduler stuck: test")

    monkeypatch.setattr(EngineLesson, "step", boom)
    at.button(key="engine.step").click().run()
    no_exception(at)
    assert at.error and "scheduler stuck: test" in at.error[0].value
    assert at.error[0].value.endswith(t("engine.fix_step_failed", "en"))


def test_back_reset_and_a_new_config_keep_one_lesson_that_replays():
    """The page keeps ONE lesson in session_state: Back, Reset and a sidebar change replay it in place. Back lands
    on the same rows as a fresh page opened at that step; a new num_blocks restarts the same requests at step 0 under
    the new pool (with a toast); Reset restarts them under the same config."""
    at = app_test(ENGINE).run()
    lesson = demo(at)
    for _ in range(3):
        at.button(key="engine.step").click().run()
    at.button(key="engine.back").click().run()
    no_exception(at)
    assert demo(at) is lesson and len(lesson.steps) == 2 and at.query_params["steps"] == "2"
    fresh = app_test(ENGINE, params={"steps": 2}).run()
    assert [(r.seq_id, r.text, r.cached_token_count) for r in demo(fresh).rows()] == \
        [(r.seq_id, r.text, r.cached_token_count) for r in lesson.rows()]
    at.slider(key="engine.num_blocks").set_value(48).run()
    no_exception(at)
    assert demo(at) is lesson and not lesson.steps and lesson.config.num_blocks == 48
    assert [toast.value for toast in at.toast] == [t("engine.restarted", "en")]
    assert len(lesson.requests) == 3
    at.button(key="engine.step").click().run()
    at.button(key="engine.reset").click().run()
    no_exception(at)
    assert demo(at) is lesson and not lesson.steps and lesson.config.num_blocks == 48 and not at.toast


def test_a_step_reruns_only_what_it_changes(monkeypatch):
    """A step reruns the step fragment only: the "add a request" form (outside it) is not drawn again, the chain's
    source code is read once per process, and the new request form still adds a request (a whole-page rerun)."""
    import streamlit

    import lessons.chain
    import ui.chain_live

    expanders, reads = [], []
    real_expander, real_sources = streamlit.expander, lessons.chain.stage_sources
    monkeypatch.setattr(streamlit, "expander", lambda label, *a, **k: expanders.append(label) or
                        real_expander(label, *a, **k))
    monkeypatch.setattr(ui.chain_live, "stage_sources", lambda key: reads.append(key) or real_sources(key))
    ui.chain_live.sources.cache_clear()
    at = app_test(ENGINE, "en").run()
    form = t("engine.add_header", "en")  # the chain's code expander is inside the fragment: it may be drawn again
    drawn = expanders.count(form)
    assert drawn == 1
    for _ in range(3):
        fragment_click(at, "engine.step", monkeypatch)
    no_exception(at)
    assert len(demo(at).steps) == 3
    assert expanders.count(form) == drawn, expanders  # three fragment reruns, no form redrawn
    assert reads == ["scheduler"], reads  # the picked module's code: read once, not once per step
    at.run()  # AppTest's tree after a fragment rerun holds that fragment only: draw the page again
    at.button(key="engine.add").click().run()
    no_exception(at)
    assert len(demo(at).requests) == 4 and expanders.count(form) > drawn


def test_a_pool_too_small_to_run_anything_says_so_and_names_each_refusal():
    """num_blocks 4: every default request is refused. No box says "press Step" (Step is disabled); the page says no
    step can run; each refusal names its request by its prompt, in both languages."""
    from ui.parsers import quoted

    for lang in ("en", "zh"):
        at = app_test(ENGINE, lang, {"num_blocks": 4}).run()
        no_exception(at)
        lesson = at.session_state["engine.lesson"]
        assert lesson.rejected and not lesson.can_step() and at.button(key="engine.step").disabled
        infos = [i.value for i in at.info]
        assert t("engine.no_step_possible", lang) in infos and t("engine.no_step_yet", lang) not in infos
        errors = [e.value for e in at.error]
        for spec, _ in lesson.rejected:
            named = t("engine.refused_request", lang, prompt=quoted(spec.prompt, 40), step=spec.at_step)
            assert any(e.lstrip("*").startswith(named) for e in errors), (named, errors)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_run_to_end_is_capped_per_press_and_says_so(monkeypatch, lang):
    """With MAX_RUN_STEPS at 3, one press of Run to end runs 3 steps and says in the page's language that it
    stopped at the cap; a second press goes on to step 6."""
    import ui.engine_actions as actions

    monkeypatch.setattr(actions, "MAX_RUN_STEPS", 3)
    at = app_test(ENGINE, lang).run()
    at.button(key="engine.run").click().run()
    no_exception(at)
    assert len(demo(at).steps) == 3 and at.query_params["steps"] == "3"
    assert t("engine.run_capped", lang, steps=3) in [i.value for i in at.info]
    at.button(key="engine.run").click().run()
    assert len(demo(at).steps) == 6


@pytest.mark.slow
def test_a_long_session_draws_only_its_newest_steps():
    """At step RECENT_STEPS + 6 of a long session, page 4 draws only the newest RECENT_STEPS steps: the twins chart
    has a bar for each of steps 7 … 70 and none before, the cache chart's dots are at those steps only, the state
    rule's table is cut to RECENT_STEPS rows under a note, and both chart titles say how many steps they show."""
    import re

    from ui.bench.history import long_session_specs
    from lessons.engine_requests import encode_requests
    from viz.cells import read_bars
    from viz.engine import RECENT_STEPS

    n = RECENT_STEPS + 6
    at = app_test(ENGINE, params={"reqs": encode_requests(long_session_specs())}).run()
    while len(demo(at).steps) < n:
        assert demo(at).forward()
    at.run()
    no_exception(at)
    markup = [h.proto.body for h in at.get("html")]
    bars = next(read_bars(m) for m in markup if 'class="paged-bars"' in m)
    assert [b["step"] for b in bars] == list(range(7, n + 1))
    cache = next(m for m in markup if 'class="pc-plot"' in m)
    dot_steps = {int(s) for s in re.findall(r'title="\w step (\d+): cached_token_count', cache)}
    assert min(dot_steps) == 7 and max(dot_steps) == n
    recent = t("engine.cache_recent", "en", shown=RECENT_STEPS, steps=n)
    titles = " ".join(m.value for m in at.markdown)
    assert titles.count(html_escaped(recent)) == 2, "both charts' titles name the steps shown"
    rows = at.session_state["engine.rule_rows"]
    assert len(rows) == n  # the sequence ran at every step; the table draws the newest RECENT_STEPS of them
    assert t("chain.rule_recent", "en", shown=RECENT_STEPS, rows=n) in [c.value for c in at.caption]


def html_escaped(text: str) -> str:
    import html

    return html.escape(text)
