"""The bug lab page through AppTest: loads in both languages, a fault shows a drift marker and "fault off" shows
none, the URL restores the chosen fault and scenario, and a missing model is a friendly error with its fix."""

from __future__ import annotations

import re

import pytest
import streamlit as st

import paged.model as model_pkg
import paged.model.io as model_io
from ui.strings import t

from .app_util import app_test

PAGE = "app_pages/5_Bug_lab.py"


def have_model() -> bool:
    return (model_io.DEFAULT_DIR / "config.json").is_file()


needs_model = pytest.mark.skipif(not have_model(), reason="shipped weights missing: python -m paged.model.train")


def ok(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def markers(at) -> list[str]:
    """The request boxes that highlight a first diverging token."""
    return [m.value for m in at.markdown if "bl-marker" in m.value]


def drifted(at) -> list[int]:
    return [d.request_id for d in at.session_state["buglab.drifts"] if d.first_divergence is not None]


@needs_model
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_loads_in_both_languages(lang):
    """The default fault (early increment) runs: three charts (logits, rel err, pool), no error box."""
    at = app_test(PAGE, lang).run()
    ok(at)
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == t("buglab.title", lang)
    assert at.subheader[0].value == t("buglab.title_early_increment", lang)
    assert len(at.get("plotly_chart")) == 3


@needs_model
@pytest.mark.parametrize("fault", ["slot_off_by_one", "use_after_free"])
def test_fault_drifts_then_fault_off_is_green(fault):
    """With the fault some request drifts (a marked token, a warning); switched off, every request matches, no
    marker, no wrong cell, and the URL says off=1."""
    at = app_test(PAGE, params={"fault": fault}).run()
    ok(at)
    assert drifted(at) and markers(at) and at.warning
    assert at.session_state["buglab.tensor_runs"]  # the random-tensor run is cached per session too
    at.toggle(key="buglab.off_widget").set_value(True).run()
    ok(at)
    assert drifted(at) == [] and markers(at) == [] and not at.warning
    assert at.success and at.query_params["off"] == "1" and at.query_params["fault"] == fault


@needs_model
def test_url_restores_fault_and_scenario():
    """A shared link brings back the fault, the toggle, the scenario knobs and the pool step; a junk value falls
    back to the default."""
    at = app_test(PAGE, "zh", {"fault": "aliased_blocks", "off": "0", "task": "continue", "block_size": 8,
                               "seed": 3, "step": 2}).run()
    ok(at)
    assert at.selectbox(key="buglab.fault").value == "aliased_blocks" and not at.toggle(key="buglab.off_widget").value
    assert at.radio(key="buglab.task").value == "continue" and at.selectbox(key="buglab.block_size").value == 8
    assert at.text_input(key="buglab.seed").value == "3" and at.session_state["buglab.step"] == 2
    assert markers(at)
    assert {k: at.query_params[k] for k in ("fault", "task", "block_size", "seed", "step")} == \
        {"fault": "aliased_blocks", "task": "continue", "block_size": "8", "seed": "3", "step": "2"}
    at = app_test(PAGE, params={"fault": "cosmic_ray", "block_size": 5}).run()
    ok(at)
    assert at.selectbox(key="buglab.fault").value == "early_increment"
    assert at.selectbox(key="buglab.block_size").value == 4


def test_missing_model_is_an_error_with_the_fix(monkeypatch):
    """Without weights the model panel is an error box naming `python -m paged.model.train`; the random-tensor
    panel still works (its two charts), including the honest "no symptom here" for a position bug."""
    def missing(*args, **kwargs):
        raise FileNotFoundError("paged/model/weights: model directory does not exist")

    monkeypatch.setattr(model_pkg, "load_model", missing)
    st.cache_resource.clear()
    try:
        at = app_test(PAGE, params={"fault": "position_off_by_one"}).run()
    finally:
        st.cache_resource.clear()  # the next test loads the real model again
    ok(at)
    assert at.error and "python -m paged.model.train" in at.error[0].value
    assert len(at.get("plotly_chart")) == 2
    assert any(t("buglab.no_symptom", "en")[:40] in i.value for i in at.info)


@needs_model
def test_marker_on_a_special_token_is_well_formed_html():
    """Aliased blocks, recall, block_size 8, seed 0: A's faulty first token is ⟨EOS⟩. The marker shows it as text in
    the marker's own colour; the visible-space stand-in (␣) is applied to text only, never inside a tag."""
    at = app_test(PAGE, params={"fault": "aliased_blocks", "task": "recall", "block_size": 8, "seed": 0}).run()
    ok(at)
    boxes = markers(at)
    assert boxes
    for box in boxes:
        assert not re.search(r"<[^>]*[␣⏎][^>]*>", box), box
    assert any("▶⟨EOS⟩</mark>" in box for box in boxes)
    assert any("▶␣</mark>" in box for box in boxes)  # a real space still gets its stand-in


def test_steps_never_build_the_export(monkeypatch):
    """The export (the tensor run and every model step as dicts) is made only when its button is pressed: loading the
    page and stepping the pool build none of it, so a rerun costs the same however long the run is."""
    from lessons.buglab_tensors import TensorRun

    built = []
    real = TensorRun.to_dict
    monkeypatch.setattr(TensorRun, "to_dict", lambda self: built.append(1) or real(self))
    at = app_test(PAGE, params={"fault": "slot_off_by_one"}).run()
    for _ in range(3):
        at.button(key="buglab.next").click().run()
    ok(at)
    assert at.session_state["buglab.step"] >= 3 and at.get("download_button")
    assert built == []


def test_one_control_for_the_pool_step():
    """The pool's step has one control, the playback bar (no "pool after step" slider beside it): Next moves it
    and the pool's title follows."""
    at = app_test(PAGE, params={"step": 1}).run()
    ok(at)
    assert not at.slider and at.session_state["buglab.step"] == 1
    at.button(key="buglab.next").click().run()
    ok(at)
    assert at.session_state["buglab.step"] == 2 and at.query_params["step"] == "2"
    assert any(t("buglab.pool_title", "en", step=2) in m.value for m in at.markdown)
