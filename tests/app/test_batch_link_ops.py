"""Page 3 · Batch decode, a link's `ops=`: malformed entries are named in the link box with the ops used instead,
as every other link value is, and the well-formed ones still replay; a clean log raises no note."""

from __future__ import annotations

from lessons.batch import MAX_OPS, ops_in_link, parse_ops

from .app_util import app_test, no_exception, url_warning

BATCH = "app_pages/3_Batch_decode.py"


def test_parse_ops_keeps_the_good_and_names_the_rest():
    """d,d,zz -> (d, d) and zz left out; empty entries and entries past MAX_OPS are left out too."""
    assert parse_ops("d,d,zz") == (["d", "d"], ["zz"])
    assert parse_ops("a3,,f1") == (["a3", "f1"], [""])
    assert parse_ops("") == ([], [])
    good, bad = parse_ops(",".join(["d"] * (MAX_OPS + 2)))
    assert len(good) == MAX_OPS and bad == ["d", "d"]
    assert ops_in_link("d,d,zz") == "d,d" and ops_in_link("zz") is None and ops_in_link("") == ""


def test_a_malformed_op_in_a_link_is_named_in_the_link_box():
    """?ops=d,d,zz replays two decodes and the link box quotes the value and the ops used."""
    at = app_test(BATCH, params={"ops": "d,d,zz"}).run()
    no_exception(at)
    assert at.session_state["batch.lesson"].ops == ["d", "d"]
    box = url_warning(at)
    assert "d,d,zz" in box and "`d,d`" in box, box


def test_a_clean_log_raises_no_note():
    """?ops=d,d replays without a note (so the note above is about zz, not about ops= itself)."""
    at = app_test(BATCH, params={"ops": "d,d"}).run()
    no_exception(at)
    assert at.session_state["batch.lesson"].ops == ["d", "d"]
    assert "ops" not in url_warning(at)
