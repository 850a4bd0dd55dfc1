"""Page 6 · Sharing through AppTest: loads in 简体中文, the shared-prefix and same-prompt scenarios report prefix-cache
hits (all but the last block for the same prompt), n = 3 forks and copies on write, bad requests give an error box,
and the URL replays a session to the exact step."""

from __future__ import annotations

from lessons.engine_requests import RequestSpec, encode_requests
from ui.strings import t

from .app_util import app_test, fragment_click

SHARING = "app_pages/6_Sharing.py"


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def demo(at):
    return at.session_state["sharing.lesson"]


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
    samples = [c.value for c in at.get("code")]
    assert len(set(samples)) >= 2, f"the samples should diverge: {samples}"


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


def test_a_forking_request_does_not_relabel_the_scenarios_prompt():
    """Shared-prefix scenario (A now, B after step 1); before step 1 the learner adds a request with n = 4. It is C
    (C, D, E, F with its samples); the scenario's second prompt is still B when it arrives, and its row says so."""
    at = app_test(SHARING).run()
    at.text_input(key="sharing.new_n").input("4").run()
    at.button(key="sharing.add").click().run()
    no_exception(at)
    assert any(s.value == t("engine.added", "en", seq="C") for s in at.success)
    steps(at, 1)
    assert any(i.value.startswith("C forked into D, E, F after its prefill") for i in at.info)
    steps(at, 1)
    assert any(s.value.startswith("B's prompt") and "prefix-cache hits" in s.value for s in at.success)
    table = at.table[0].value  # the per-sequence state table (ui.state_table): sequence labels are its index
    rows = dict(zip(table.index, table[t("engine.col_prompt", "en")]))
    assert rows["B"].endswith("Q22 ⟨SEP⟩") and sorted(rows) == list("ABCDEF")


def test_undecodable_bytes_are_shown_as_their_values():
    """At temperature 2 the samples contain bytes that are not UTF-8: shown as ⟨0xNN⟩, never as U+FFFD."""
    reqs = encode_requests([RequestSpec("a b c", "continue", max_tokens=24, temperature=2.0, seed=0, n=3)])
    at = app_test(SHARING, params={"reqs": reqs, "steps": 30}).run()
    no_exception(at)
    shown = [c.value for c in at.get("code")] + list(at.table[0].value[t("engine.col_output", "en")])
    assert not any("\ufffd" in text for text in shown), shown
    assert any("⟨0x" in text for text in shown)


def test_a_number_out_of_range_is_refused_by_name():
    """n = 9 (the form allows 1–4) and seed 10⁶ (0–9999): an error box names the field, its range and the fix;
    nothing is added."""
    at = app_test(SHARING).run()
    count = len(demo(at).all_specs())
    for key, value, label, lo, hi in (("sharing.new_n", 9, t("sharing.n", "en"), 1, 4),
                                      ("sharing.new_seed", 10**6, t("engine.seed", "en"), 0, 9999)):
        at.text_input(key=key).input(str(value)).run()
        at.button(key="sharing.add").click().run()
        no_exception(at)
        assert len(at.error) == 1 and len(demo(at).all_specs()) == count
        assert at.error[0].value.startswith(f"**{t('engine.err_out_of_range', 'en', label=label, value=value, lo=lo, hi=hi)}**")
        assert t("engine.fix_out_of_range", "en", label=label, lo=lo, hi=hi) in at.error[0].value
        at.text_input(key=key).input(str(lo)).run()


def test_a_step_does_not_redraw_the_request_form(monkeypatch):
    """Steps rerun the step fragment only: the "add a request" form outside it is drawn once."""
    import streamlit

    expanders = []
    real = streamlit.expander
    monkeypatch.setattr(streamlit, "expander", lambda label, *a, **k: expanders.append(label) or real(label, *a, **k))
    at = app_test(SHARING).run()
    assert expanders == [t("engine.add_header", "en")]
    for _ in range(3):
        fragment_click(at, "sharing.step", monkeypatch)
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.session_state["sharing.lesson"].steps) == 3 and len(expanders) == 1


def test_the_hits_rows_speak_the_pages_language():
    """In 简体中文 the prefix-cache rows are named "B · 第 2 步" and their tooltips are Chinese: no English left."""
    from viz.cells import read_cells

    at = steps(app_test(SHARING, "zh").run(), 2)
    (markup,) = [h.proto.body for h in at.get("html") if 'class="pg-name"' in h.proto.body]
    assert "B · 第 2 步" in markup and "A · 第 1 步" in markup and "step" not in markup
    titles = [c["title"] for c in read_cells(markup)]
    assert titles and all(title.startswith(("A 的 logical block", "B 的 logical block")) for title in titles)
    assert any(title.endswith("命中 prefix cache，直接复用 K/V") for title in titles)
    assert not [title for title in titles if "prefill" in title and "computed" in title]


def test_the_pool_hover_speaks_the_pages_language():
    """In 简体中文 every block's hover in the ref-count pool is Chinese around the article's vocabulary: held blocks
    name their holders ("持有者"), free ones say "空闲"; no English sentence ("held by", "slots written") is left."""
    import json

    at = steps(app_test(SHARING, "zh").run(), 2)
    hovers = [h for c in at.get("plotly_chart") for tr in json.loads(c.proto.spec)["data"]
              if tr.get("name") == "blocks" for h in tr["hovertext"]]
    assert any("持有者" in h for h in hovers) and any("空闲" in h for h in hovers)
    assert not [h for h in hovers if "held by" in h or "slots written" in h or "free (" in h]


NO_STEP_LINKS = ["[]", '[{"p":"hello","T":1e-45}]']  # no request at all; one the engine refuses (issue 35)


def test_a_link_where_no_step_can_run_says_so_in_both_languages():
    """reqs=[] and a request the engine refuses: no traceback (the page once asked its own strings for the engine
    page's "no_step_possible"), Step is off and the decision box says why, in either language."""
    for reqs in NO_STEP_LINKS:
        for lang in ("en", "zh"):
            at = app_test(SHARING, lang, {"reqs": reqs}).run()
            no_exception(at)
            assert at.button(key="sharing.step").disabled, (reqs, lang)
            assert t("engine.no_step_possible", lang) in [i.value for i in at.info], (reqs, lang)
