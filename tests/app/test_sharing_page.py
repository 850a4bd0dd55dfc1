"""Page 6 · Sharing through AppTest: loads in 简体中文, the shared-prefix and same-prompt scenarios report prefix-cache
hits (all but the last block for the same prompt), n = 3 forks and copies on write, bad requests give an error box,
and the URL replays a session to the exact step."""

from __future__ import annotations

from ui.strings import t

from .conftest import app_test

SHARING = "app_pages/6_Sharing.py"


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def demo(at):
    return at.session_state["sharing.demo"]


def steps(at, n: int):
    for _ in range(n):
        at.button(key="sharing.step").click().run()
    no_exception(at)
    return at


def test_loads_in_chinese():
    at = app_test(SHARING, "zh").run()
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == t("sharing.title", "zh")


def test_shared_prefix_reports_hits_and_saves_blocks():
    """Default scenario: B arrives after step 1 and, at its prefill (step 2), reuses A's cached prefix blocks; the
    saving shows in the metrics."""
    at = steps(app_test(SHARING).run(), 2)
    alloc = demo(at).allocations[-1]
    assert alloc.seq_id == 1 and alloc.step == 2 and sum(alloc.hits) >= 5 and not alloc.hits[-1]
    assert any("prefix-cache hits" in s.value and s.value.startswith("B's prompt") for s in at.success)
    metrics = {m.label: int(m.value) for m in at.metric}
    assert metrics[t("sharing.metric_saved", "en")] == sum(alloc.hits) > 0
    assert metrics[t("sharing.metric_held", "en")] < metrics[t("sharing.metric_tables", "en")]
    assert at.query_params["steps"] == "2"


def test_same_prompt_twice_hits_all_but_the_last_block():
    at = app_test(SHARING).run()
    at.selectbox(key="sharing.scenario").set_value("same").run()
    steps(at, 2)
    first, second = demo(at).allocations[:2]
    assert not any(first.hits) and second.hits == [True] * (len(second.hits) - 1) + [False]
    assert second.table[:-1] == first.table[:-1] and second.table[-1] != first.table[-1]


def test_three_samples_fork_and_copy_on_write():
    """n = 3: the prefill forks A into two children sharing its blocks; the first decode copies the shared, partly
    filled last block (a warning names it); three samples are shown side by side; the twins still agree."""
    at = app_test(SHARING).run()
    at.selectbox(key="sharing.scenario").set_value("samples").run()
    steps(at, 1)
    assert demo(at).last.paged.forked == {0: [1, 2]}
    steps(at, 1)
    copies = demo(at).last.paged.copies
    assert copies and any(f"shared block {copies[0][0]}" in w.value for w in at.warning)
    assert len(at.get("code")) == 3
    at.button(key="sharing.run").click().run()
    no_exception(at)
    worst, agree = demo(at).twin_summary()
    assert agree and worst < 1e-4


def test_empty_prompt_is_an_error_and_the_url_replays():
    at = app_test(SHARING).run()
    at.text_input(key="sharing.new_text").set_value("   ").run()
    at.button(key="sharing.add").click().run()
    no_exception(at)
    assert at.error and at.error[0].value.startswith(f"**{t('engine.err_empty', 'en')}**")
    steps(at, 3)
    params = {k: v for k, v in at.query_params.items() if k != "lang"}
    shared = app_test(SHARING, params=params).run()
    no_exception(shared)
    assert len(demo(shared).steps) == 3
    assert [a.hits for a in demo(shared).allocations] == [a.hits for a in demo(at).allocations]
