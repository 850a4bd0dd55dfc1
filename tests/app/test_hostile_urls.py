"""Hostile URLs: whatever a link holds, every page renders without a traceback and says which values it could not use.

The pure parsers are checked value by value (fast); then every page is opened with all of its own query parameters
set to each hostile value at once (each page's parameters are read from the URL it writes itself).
"""

from __future__ import annotations

import pytest

from lessons.engine_requests import MAX_JSON_DEPTH, decode_requests, encode_requests, json_depth, RequestSpec
from ui.parsers import float_in, int_in, one_of, parse_int_list, text_max

from .app_util import app_test, page_files

HOSTILE = {
    "huge": str(10**12),
    "digits_5000": "9" * 5000,
    "negative": "-5",
    "nan": "nan",
    "inf": "inf",
    "text": "abc",
    "chars_5000": "x" * 5000,
    "unicode_digits": "١٢",
    "empty": "",
    "spaces_400": " " * 400,
    "blank_mixed": "\u3000\t \u00a0",
    "null_byte": "4\x00",
    "html": "<script>alert(1)</script><b>x</b>",
    "deep_nesting": "[" * 7999,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_parsers_take_any_text_without_raising(name):
    """Each parser returns a bounded value or None for every hostile text; never an exception."""
    text = HOSTILE[name]
    i = int_in(1, 32)(text)
    assert i is None or 1 <= i <= 32
    f = float_in(0.0, 2.0)(text)
    assert f is None or 0.0 <= f <= 2.0
    assert one_of([1, 2, 4])(text) in (None, 1, 2, 4)
    cut = text_max(200)(text)
    assert len(cut) <= 200 and "\x00" not in cut
    parsed = parse_int_list(text, 0, 11, 8)
    assert parsed.error is not None or all(0 <= v <= 11 for v in parsed.values)
    specs = decode_requests(text)
    assert specs is None or isinstance(specs, list)


def test_numbers_are_plain_ascii_and_finite():
    """Only plain ASCII numbers parse: unicode digits, nan, inf, '1_0' and 5,000 digits are refused, not converted."""
    assert int_in(0, 100)("١٢") is None and int("١٢") == 12  # int() alone would have taken it
    assert int_in(0, 100)("1_0") is None and int_in(0, 100)("9" * 5000) is None
    assert int_in(0, 100)(" 7 ") == 7 and int_in(0, 100)("-5") == 0 and int_in(0, 100)(str(10**12)) == 100
    assert float_in(0, 2)("nan") is None and float_in(0, 2)("inf") is None and float_in(0, 2)("1e400") == 2
    assert float_in(0, 2)("0.5") == 0.5 and float_in(0, 2)(".25") == 0.25 and float_in(0, 2)("1e-1") == 0.1


def test_a_huge_block_id_is_out_of_the_pool_not_a_non_number():
    """A whole number too big for any pool is named as out of range (or negative), quoted with … when long; a
    non-number is still one."""
    big = parse_int_list("3, 99999999999999999999999999", 0, 11, 8)
    assert (big.error, big.detail["item"]) == ("out_of_range", "9" * 19 + "…")
    assert parse_int_list("1234567890", 0, 11, 8).detail == {"item": "1234567890", "lo": 0, "hi": 11}
    assert parse_int_list("-12345678901", 0, 11, 8).error == "negative"
    assert parse_int_list("12a", 0, 11, 8).error == "not_a_number"


def test_block_table_accepts_full_width_separators():
    """A table typed with a Chinese input method (full-width comma, 、, full-width digits) reads as ASCII would."""
    assert parse_int_list("7，2，9", 0, 11, 8).values == [7, 2, 9]
    assert parse_int_list("7、2、9", 0, 11, 8).values == [7, 2, 9]
    assert parse_int_list("［７　２；９］", 0, 11, 8).values == [7, 2, 9]
    assert parse_int_list("١٢", 0, 11, 8).error == "not_a_number"


def test_request_list_depth_is_bounded_before_parsing():
    """Deep nesting is refused by counting brackets (never by the recursive JSON parser); brackets inside a prompt
    do not count; a real request list still round-trips."""
    assert json_depth("[" * 7999) == 7999 and decode_requests("[" * 7999) is None
    assert decode_requests("[" * 7999 + "]" * 7999) is None
    assert decode_requests('[{"p": "x"}, [[[["deep"]]]]]') is None  # depth 5 > MAX_JSON_DEPTH
    assert MAX_JSON_DEPTH >= json_depth('[{"p":"a"}]')
    specs = [RequestSpec("a [[[[ { \" b", "recall", 8, 0.5, 3, 2, 1)]
    assert decode_requests(encode_requests(specs)) == specs


def _own_params(path) -> dict[str, str]:
    """The query parameters a page writes for itself at its defaults (what a shared link of it holds)."""
    at = app_test(path).run()
    assert not at.exception
    return {k: v for k, v in at.query_params.items() if k != "lang"}


PAGES = page_files()


@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_every_page_survives_every_hostile_value(path):
    """All of the page's own parameters (plus `reqs` and `ops`, which some pages read) set to one hostile value at
    a time: no exception, no traceback, and a page that reads parameters lists what it could not use."""
    own = _own_params(path)
    names = set(own) | {"reqs", "ops", "steps", "step"}
    for label, value in HOSTILE.items():
        at = app_test(path, params={name: value for name in names}).run()
        assert not at.exception, f"{path.name} ?{label}: {at.exception[0].value if at.exception else ''}"
        if own:
            shown = " ".join(w.value for w in at.warning)
            assert "could not be used" in shown, f"{path.name} ?{label}: no warning"


@pytest.mark.parametrize("lang,title", [("en", "could not be used"), ("zh", "无法按原样使用")])
def test_clamped_and_ignored_values_are_reported_in_the_pages_language(lang, title):
    """A clamped number and an unreadable request list are each named, with the value used, in a translated box."""
    engine = next(p for p in PAGES if p.stem == "4_Engine")
    at = app_test(engine, lang=lang, params={"num_blocks": 10**12, "reqs": "[" * 7999}).run()
    assert not at.exception
    box = " ".join(w.value for w in at.warning)
    assert title in box and "`num_blocks`" in box and "`256`" in box and "`reqs`" in box
    assert at.slider(key="engine.num_blocks").value == 256


def test_values_a_link_holds_exactly_raise_no_warning():
    """A page opened from its own link shows no warning box: only values that were changed are reported."""
    for path in PAGES[:4]:
        at = app_test(path, params=_own_params(path)).run()
        assert not at.exception
        assert not [w for w in at.warning if "could not be used" in w.value], path.name


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_blank_or_huge_value_is_named_in_the_link_box(lang):
    """Page 3's seed= of 400 spaces (it used to fall back with the value invisible in the box) is named, with its
    length in words; so are a blank and a 5000-character value of each of its other knobs."""
    from ui.strings import t

    batch = next(p for p in PAGES if p.stem == "3_Batch_decode")
    at = app_test(batch, lang=lang, params={"seed": " " * 400}).run()
    assert not at.exception
    box = " ".join(w.value for w in at.warning)
    assert "`seed`" in box and t("common.url_blank", lang, count=400) in box
    knobs = sorted(set(_own_params(batch)) - {"seed"})
    assert knobs, "page 3 writes no other knob to its URL"
    for value, said in ((" \t ", t("common.url_blank", lang, count=3)), ("7" * 5000, "5000")):
        at = app_test(batch, lang=lang, params={name: value for name in knobs}).run()
        assert not at.exception
        box = " ".join(w.value for w in at.warning)
        missing = [name for name in knobs if f"`{name}` = `" not in box]
        assert not missing and said in box, (value[:8], missing, box[:300])
