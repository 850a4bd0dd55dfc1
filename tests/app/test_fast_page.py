"""Page 7 (correct → fast) through AppTest: loads in both languages without measuring anything, "run" checks every
rung (✔) and draws the sweeps, the result is kept for the session (an unrelated rerun does not measure again), the
memory section shows paged wasting less than a max_model_len reservation, the URL restores the configuration, and
a bad head split is an error box with its fix."""

from __future__ import annotations

import pytest

import lessons.fast as ladder
from ui.strings import t

from .app_util import app_test, no_exception

PAGE = "app_pages/7_Correct_to_fast.py"
TINY = dict(batch=1, context_len=32, num_heads=2, num_kv_heads=1, head_dim=32, block_size=4, requests=40)
MEMORY_CHARTS = 4  # trace, waste, fit, fragmentation
LADDER_CHARTS = 4  # ladder bars, ms vs context_len, GB/s vs context_len, ms vs block_size


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def counted_runs(monkeypatch):
    """run_ladder with a small bandwidth probe, counting its calls."""
    calls = []
    real = ladder.run_ladder

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(ladder, "BANDWIDTH_MB", 8)
    monkeypatch.setattr(ladder, "run_ladder", counting)
    return calls


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_loads_in_both_languages_and_waits_for_run(lang, counted_runs):
    """Nothing is measured on arrival: an info box says to press run; the memory section is drawn, and paged
    (block_size 16) wastes far less than reserving max_model_len and fits more requests."""
    at = app_test(PAGE, lang, {"requests": 60}).run()
    no_exception(at)
    assert at.title[0].value == t("fast.title", lang) and counted_runs == []
    assert at.info[0].value == t("fast.press_run", lang)
    assert len(at.get("plotly_chart")) == MEMORY_CHARTS
    report = next(iter(at.session_state["fast.memory"].values()))
    by = {(r.scheme, r.block_size): r for r in report.results}
    assert by[("paged", 16)].waste_pct < by[("max_len", None)].waste_pct
    assert by[("paged", 1)].waste_pct == 0 and by[("paged", 16)].fit_requests > by[("max_len", None)].fit_requests
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics[t("fast.m_waste_paged", lang)].rstrip("%")) < \
        float(metrics[t("fast.m_waste_max", lang)].rstrip("%"))
    assert at.button(key="fast.export")


def test_run_checks_every_rung_and_is_kept_for_the_session(counted_runs):
    """Clicking run at tiny sizes: a ✔ row for loop, gather, fused, native and contiguous SDPA, the ladder and sweep
    charts; a rerun for an unrelated knob (the trace seed) shows the same result without measuring again."""
    at = app_test(PAGE, params=TINY).run()
    at.button(key="fast.run").click().run()
    no_exception(at)
    assert len(counted_runs) == 1
    rows = at.session_state["fast.rows"]
    check = t("fast.col_check", "en")
    assert [r[t("fast.col_rung", "en")] for r in rows] == ["loop", "gather", "fused", "native",
                                                           t("fast.impl_sdpa", "en")]
    assert all(r[check] == t("common.ok", "en") for r in rows)
    assert at.success[0].value == t("fast.all_ok", "en")
    assert len(at.get("plotly_chart")) == LADDER_CHARTS + MEMORY_CHARTS
    at.text_input(key="fast.seed").input("5").run()
    no_exception(at)
    assert len(counted_runs) == 1 and len(at.get("plotly_chart")) == LADDER_CHARTS + MEMORY_CHARTS
    assert at.query_params["seed"] == "5"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_run_cut_short_by_a_setting_change_says_so(lang, monkeypatch):
    """A setting changed while the ladder measures: Streamlit stops the script at its next call (the progress bar)
    and starts it over. The page then says the run was stopped and nothing kept (not a silent "press Run"), once;
    Run measures again."""
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    def cut_short(config, progress, **_):
        progress(1, 3)
        raise StopException()  # what Streamlit raises in the script when a newer run preempts it

    monkeypatch.setattr(ladder, "run_ladder", cut_short)
    at = app_test(PAGE, lang, TINY).run()
    at.button(key="fast.run").click().run()
    no_exception(at)
    assert not at.session_state["fast.runs"] and not at.warning  # stopped mid-way: nothing kept, nothing said yet
    at.slider(key="fast.batch").set_value(2).run()  # the change that stopped it: the page starts over
    no_exception(at)
    assert [w.value for w in at.warning] == [t("fast.run_stopped", lang)]
    assert t("fast.press_run", lang) in [i.value for i in at.info]  # and what to do next
    at.slider(key="fast.batch").set_value(3).run()
    assert not at.warning, "said once, not on every later run"
    monkeypatch.undo()  # the real ladder again
    monkeypatch.setattr(ladder, "BANDWIDTH_MB", 8)
    at.button(key="fast.run").click().run()
    no_exception(at)
    assert not at.warning and at.success[0].value == t("fast.all_ok", lang)


def test_a_finished_run_is_not_called_stopped(counted_runs):
    """A run that ends (measured, or refused with its error box) leaves no "stopped" note behind."""
    at = app_test(PAGE, params=TINY).run()
    at.button(key="fast.run").click().run()
    at.slider(key="fast.batch").set_value(2).run()
    no_exception(at)
    assert len(counted_runs) == 1 and not at.warning


def test_without_the_c_kernel_the_page_says_why_and_runs_the_rest(counted_runs, monkeypatch):
    """When native cannot be built, its card says why and the ladder runs without it (no error)."""
    from paged.kernels import native

    monkeypatch.setattr(native, "_state", {"error": "impl='native' needs a C compiler (test)"})
    at = app_test(PAGE, params=TINY).run()
    no_exception(at)
    assert any("needs a C compiler (test)" in c.value for c in at.caption)
    at.button(key="fast.run").click().run()
    no_exception(at)
    rungs = [r[t("fast.col_rung", "en")] for r in at.session_state["fast.rows"]]
    assert rungs == ["loop", "gather", "fused", t("fast.impl_sdpa", "en")]


def test_url_restores_the_configuration():
    """A shared link brings back every knob; out-of-range values clamp and unknown choices fall back."""
    params = dict(batch=8, context_len=700, num_heads=16, num_kv_heads=4, head_dim=128, block_size=32, loop=0,
                  seed=7, requests=50, max_model_len=1024, budget=32768)
    at = app_test(PAGE, "zh", params).run()
    no_exception(at)
    assert {k: at.query_params[k] for k in params} == {k: str(v) for k, v in params.items()}
    assert at.slider(key="fast.batch").value == 8 and at.selectbox(key="fast.head_dim").value == 128
    assert at.checkbox(key="fast.loop_widget").value is False
    assert at.selectbox(key="fast.max_model_len").value == 1024
    at = app_test(PAGE, params=dict(batch=99, head_dim=48, block_size=3, requests=50)).run()
    no_exception(at)
    assert at.slider(key="fast.batch").value == 16 and at.selectbox(key="fast.head_dim").value == 64
    assert at.selectbox(key="fast.block_size").value == 16


def test_loop_is_greyed_on_big_sizes_and_bad_heads_are_an_error():
    """batch × context_len above the loop's limit disables its checkbox with the reason; num_heads not a multiple
    of num_kv_heads is an error box with the fix, the run button is disabled, the memory section still works."""
    at = app_test(PAGE, params=dict(batch=16, context_len=2048, requests=40)).run()
    no_exception(at)
    assert at.checkbox(key="fast.loop_widget").disabled
    assert any(str(16 * 2048) in c.value and str(ladder.LOOP_MAX_TOKENS) in c.value for c in at.caption)
    at = app_test(PAGE, params=dict(num_heads=4, num_kv_heads=8, requests=40)).run()
    assert not at.exception
    assert at.error and t("common.fix", "en") in at.error[0].value
    assert at.button(key="fast.run").disabled and len(at.get("plotly_chart")) == MEMORY_CHARTS


def test_memory_chart_categories_fit_a_narrow_column():
    """The waste and fit charts' category names are short lines (11 px text, 11 categories in a ~530 px plot at
    1024x768 with the sidebar open: about 48 px each), so neighbours do not run into each other ("max_model_len"
    and "oracle" did); both languages."""
    from ui.strings import t

    for lang in ("en", "zh"):
        names = [t("fast.scheme_max_len", lang), t("fast.scheme_oracle", lang),
                 t("fast.scheme_paged", lang, block_size=256)]
        assert max(len(line) for name in names for line in name.split("<br>")) <= 9, names


def test_the_configurations_rungs_are_shown_before_any_sweep_and_the_loop_skips_the_block_size_sweep(
        monkeypatch):
    """run_ladder hands the configuration's own result to `shown` after its first point and before the second
    (kernels first, then with the loop), and times the per-token loop at the configuration and along the context
    sweep only, never along the block_size sweep."""
    monkeypatch.setattr(ladder, "BANDWIDTH_MB", 8)
    events = []
    config = ladder.LadderConfig(batch=1, context_len=32, num_heads=2, num_kv_heads=1, head_dim=32, block_size=4)
    run = ladder.run_ladder(config, progress=lambda done, total: events.append(("progress", done)),
                            shown=lambda case: events.append(("shown", {r.impl for r in case.results})))
    assert events[:3] == [("shown", {"gather", "fused", "native", "sdpa"}),
                          ("shown", {"loop", "gather", "fused", "native", "sdpa"}), ("progress", 1)]
    assert all(kind == "progress" for kind, _ in events[3:])
    assert all(any(r.impl == "loop" for r in c.results) for c in run.by_context)
    assert not any(r.impl == "loop" for c in run.by_block_size if c.case.block_size != config.block_size
                   for r in c.results)
