"""Page 1 · Address translation, a token past the end of the block table: the token is kept (never moved), an error
box names the logical block that has no entry and the fix, and the chain is drawn up to the failure. Block tables
typed with a Chinese input method (full-width commas, 、) are read like ASCII ones."""

from __future__ import annotations

import json

import pytest

from ui.strings import t

from .app_util import app_test

ADDRESS = "app_pages/1_Address_translation.py"


def ok(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def chain_texts(at) -> list[str]:
    """The chain figure's annotation texts."""
    return [a.get("text", "") for a in json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["annotations"]]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_token_past_the_table_is_kept_and_its_missing_block_named(lang):
    """?table=7&token=11 (block_size 4): the table addresses tokens 0-3; token 11 lives in logical block 2. The
    slider stays at 11, the error names logical block 2 and the fix (3 entries, or a token below 4), the chain
    stops at physical_block_id, the URL keeps token=11."""
    at = app_test(ADDRESS, lang, {"table": "7", "token": 11}).run()
    ok(at)
    assert at.slider(key="address.token").value == 11
    assert metrics(at) == {"token_index": "11", "logical_block_id": "2", "physical_block_id": "—",
                           "block_offset": "3", "slot": "—"}
    what = t("address.err_missing_entry", lang, token_index=11, logical=2, last=0)
    fix = t("address.fix_missing_entry", lang, needed=3, logical=2, capacity=4)
    assert len(at.error) == 1 and what in at.error[0].value and fix in at.error[0].value
    assert "block_table[2]<br>= <b>—</b>" in chain_texts(at) and "key_cache[?, 3]" in chain_texts(at)
    assert at.query_params["token"] == "11"
    # moving the token back inside the table clears the error and follows the chain again
    at.slider(key="address.token").set_value(3).run()
    ok(at)
    assert not at.error and metrics(at)["slot"] == "31"


def test_shortening_the_table_keeps_the_token():
    """Token 9 of [7, 2, 9]; the learner deletes the last entry: token 9 stays, logical block 2 is named."""
    at = app_test(ADDRESS, params={"token": 9}).run()
    at.text_input(key="address.table").set_value("7, 2").run()
    ok(at)
    assert at.slider(key="address.token").value == 9 and metrics(at)["logical_block_id"] == "2"
    assert at.error and "logical block 2" in at.error[0].value


@pytest.mark.parametrize("text", ["7，2，9", "7、2、9", "７，２，９", "7，　2，　9"])
def test_full_width_separators_are_accepted(text):
    """What a Chinese input method types (full-width comma, 、, full-width digits and spaces) reads as 7, 2, 9."""
    at = app_test(ADDRESS, "zh").run()
    at.text_input(key="address.table").set_value(text).run()
    ok(at)
    assert not at.error, [e.value for e in at.error]
    assert metrics(at)["physical_block_id"] == "2" and metrics(at)["slot"] == "9"
