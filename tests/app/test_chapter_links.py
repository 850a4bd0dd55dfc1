"""Chapter pages' links: `step=` and `steps=` both open the step asked for (one name documented, the other an alias),
and a value that cannot be used as given is named in the link box (pages 9-12, with 4 for the engine pages)."""

from __future__ import annotations

import pytest

from .app_util import PAGES_DIR, app_test, no_exception, url_warning

BEAM, SWAP, WINDOW, SPEC = ("9_Beam_search.py", "10_Swap_or_recompute.py", "11_Sliding_window.py",
                            "12_Speculative_decoding.py")


def _open(page: str, **params):
    at = app_test(PAGES_DIR / page, params=params).run()
    no_exception(at)
    return at


@pytest.mark.parametrize("page,key,name", [(BEAM, "beam.step", "steps"), (SWAP, "swap.step", "steps"),
                                           (WINDOW, "window.step", "steps"), (SPEC, None, "step")])
def test_the_other_step_name_opens_the_same_step(page, key, name):
    """A link with the page's undocumented step name (an alias) opens step 2, raises no warning and is rewritten
    with the documented name."""
    at = _open(page, **{name: 2})
    shown = len(at.session_state["spec.lesson"].steps) if key is None else at.session_state[key]
    assert shown == 2
    assert "could not be used" not in url_warning(at)
    documented = "steps" if name == "step" else "step"
    assert at.query_params.get(documented) in ("2", ["2"]) and name not in at.query_params


def test_engine_page_takes_step_as_an_alias_of_steps():
    """Page 4 replays the link's `step=1` as it does `steps=1`."""
    at = _open("4_Engine.py", step=1, model="shipped")
    assert len(at.session_state["engine.lesson"].steps) == 1
    assert "could not be used" not in url_warning(at)


@pytest.mark.parametrize("page,params,named", [
    (BEAM, {"steps": "abc"}, "`steps`"),
    (BEAM, {"step": "-3"}, "`step`"),
    (BEAM, {"step": "999"}, "`step`"),
    (BEAM, {"beam_width": "100"}, "`beam_width`"),
    (BEAM, {"block_size": "7"}, "`block_size`"),
    (SWAP, {"steps": "9999"}, "`steps`"),
    (SWAP, {"block_size": "7"}, "`block_size`"),
    (WINDOW, {"window": "0"}, "`window`"),
    (WINDOW, {"prompt": "nope"}, "`prompt`"),
    (SPEC, {"k": "999"}, "`k`"),
    (SPEC, {"scenario": "nope"}, "`scenario`"),
    (SPEC, {"step": "abc"}, "`step`"),
    (SPEC, {"steps": "299"}, "`steps`"),
    ("4_Engine.py", {"step": "299", "model": "shipped"}, "`step`"),
])
def test_an_unusable_link_value_is_named(page, params, named):
    """Each unusable value (not a number, negative, past the run's end, not an option) is listed in the link box
    under the name the link used."""
    box = url_warning(_open(page, **params))
    assert "could not be used" in box and named in box, box


@pytest.mark.parametrize("page,prefix", [(BEAM, "beam"), (SWAP, "swap"), (WINDOW, "window")])
def test_reset_in_the_playback_row_goes_back_to_step_0(page, prefix):
    """Pages 9-11 have the Reset of pages 4, 6 and 12 beside their playback bar: from a link's step 3 it shows step
    0, and it is disabled there."""
    at = _open(page, step=3)
    assert at.session_state[f"{prefix}.step"] == 3 and not at.button(key=f"{prefix}.reset").disabled
    at = at.button(key=f"{prefix}.reset").click().run()
    no_exception(at)
    assert at.session_state[f"{prefix}.step"] == 0 and at.button(key=f"{prefix}.reset").disabled


@pytest.mark.parametrize("page,key,part", [(SWAP, "swap.export", "recompute"), (WINDOW, "window.export", "frames")])
def test_swap_and_window_pages_export_their_run(page, key, part):
    """Pages 10 and 11 have the Export of the other chapter pages: pressed at a link's step 4, it hands the browser
    JSON holding every step of the run (the configuration too)."""
    import json

    at = _open(page, step=4)
    at = at.button(key=key).click().run()
    no_exception(at)
    (saver,) = [e for e in at.get("bidi_component") if e.proto.component_name == "paged_save"]
    (file,) = json.loads(saver.proto.json)["files"]  # one press, one file (ui/export.py queues each press's)
    data = json.loads(file["text"])
    assert data["config"]["block_size"] == 4 and len(data[part]) > 4
