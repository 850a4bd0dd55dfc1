"""Every page through Streamlit's AppTest: loads in both languages, steps change the state as they should, the seed
example is shown, bad input gives an error box (never an exception), and the URL restores a state."""

from __future__ import annotations

import pytest

from lessons.batch import BatchConfig, BatchLesson
from ui.strings import t
from ui.parsers import duplicates, int_in, one_of, parse_int_list

from .app_util import APP, page_files, app_test

ADDRESS = "app_pages/1_Address_translation.py"
GATHER = "app_pages/2_Gather_and_attend.py"
BATCH = "app_pages/3_Batch_decode.py"


def ok(at) -> None:
    """No exception and no error box."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


# --- every page -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("path", page_files(), ids=lambda p: p.stem)
def test_page_loads_in_both_languages(path, lang):
    """Each page (pages added later included) runs without an exception in English and in 简体中文. A friendly
    st.error is a legitimate state for a page whose prerequisites are missing (e.g. untrained model weights), so
    only the walkthrough pages here must also be free of error boxes."""
    at = app_test(path, lang).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, "a page should have a title"
    if path.relative_to(APP.parent).as_posix() in ("app.py", ADDRESS, GATHER, BATCH):
        assert not at.error, [e.value for e in at.error]
    assert at.session_state["_lang"] == lang


def test_titles_are_translated():
    for path, module in ((APP, "home"), (ADDRESS, "address"), (GATHER, "gather"), (BATCH, "batch")):
        assert app_test(path, "zh").run().title[0].value == t(f"{module}.title", "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_home_links_name_each_page_as_the_navigation_does(lang):
    """The walkthrough on the home page calls each page by its name in the sidebar (in 简体中文 it said "3 · Batch
    decode" and "4 · Engine" where the sidebar says "3 · 批量解码" and "4 · 推理引擎"), every listed page once, in the
    listed order, the guide (8) included."""
    from ui.nav import BY_NAME, title

    at = app_test("app_pages/0_Home.py", lang).run()
    ok(at)
    shown = "\n".join(m.value for m in at.markdown)
    names = ("address", "gather", "batch", "engine", "buglab", "sharing", "fast", "guide", "beam", "swap", "window",
             "spec")
    found = [shown.find(f"[{title(BY_NAME[name], lang)}{'：' if lang == 'zh' else ': '}") for name in names]
    assert -1 not in found, (dict(zip(names, found)), shown[-600:])
    assert found == sorted(found), dict(zip(names, found))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_home_starts_with_the_core_path_and_names_the_article(lang):
    """Before the address chain: "Start here" with pages 1-4 as links; the article named by its title (the same in
    both languages), and a table saying what each page takes from it."""
    from ui.nav import BY_NAME, title

    at = app_test("app_pages/0_Home.py", lang).run()
    ok(at)
    headers = [h.value for h in at.subheader]
    assert headers[0] == t("home.start_here", lang) and headers[1] == t("home.chain_heading", lang)
    shown = "\n".join(m.value for m in at.markdown)
    core = [shown.find(f"[{title(BY_NAME[name], lang)}") for name in ("address", "gather", "batch", "engine")]
    assert -1 not in core and core == sorted(core)
    assert "实现教学版 PagedAttention：从 block table 读取历史 KV cache" in shown
    assert "| 1 · " in shown and "扩展到 batch" in shown  # the table: page 3's section, in both languages


def test_language_switch_persists_across_pages():
    """Switching to 简体中文 in the sidebar re-renders the page and carries over to the next page."""
    at = app_test(APP, "en").run()
    at.radio(key="_lang_widget").set_value("zh").run()
    assert at.title[0].value == t("home.title", "zh") and at.query_params["lang"] == "zh"
    at.switch_page(ADDRESS).run()
    ok(at)
    assert at.title[0].value == t("address.title", "zh")


# --- page 1: address translation ---------------------------------------------------------------------------------
def test_address_page_shows_the_seed_example():
    """Defaults: block_size 4, block_table [7, 2, 9]; token 5 -> logical 1, physical 2, offset 1, slot 9."""
    at = app_test(ADDRESS).run()
    ok(at)
    assert metrics(at) == {"token_index": "5", "logical_block_id": "1", "physical_block_id": "2",
                           "block_offset": "1", "slot": "9"}
    assert at.text_input(key="address.table").value == "7, 2, 9"
    assert at.slider(key="address.block_size").value == 4 and at.slider(key="address.num_blocks").value == 12


def test_address_page_follows_the_token_slider():
    at = app_test(ADDRESS).run()
    at.slider(key="address.token").set_value(9).run()
    assert metrics(at)["physical_block_id"] == "9" and metrics(at)["slot"] == "37"
    assert at.query_params["token"] == "9"


@pytest.mark.parametrize("text, error", [("7, x", "not_a_number"), ("", "empty"), ("7, -2", "negative"),
                                         ("7, 2, 99", "out_of_range")])
def test_bad_block_table_shows_an_error_not_an_exception(text, error):
    at = app_test(ADDRESS).run()
    at.text_input(key="address.table").set_value(text).run()
    assert not at.exception
    assert at.error and t(f"common.fix_{error}", "en", lo=0, hi=11, max_len=32) in at.error[0].value


def test_block_listed_twice_is_a_warning_with_the_reason():
    at = app_test(ADDRESS, params={"table": "7,2,2", "token": 9}).run()
    ok(at)
    assert at.warning and "overwrites" in at.warning[0].value
    assert metrics(at)["physical_block_id"] == "2"


def test_address_query_params_restore_and_clamp():
    at = app_test(ADDRESS, params={"block_size": 2, "num_blocks": 999, "table": "3,0,5", "token": 3}).run()
    ok(at)
    assert at.slider(key="address.block_size").value == 2 and at.slider(key="address.num_blocks").value == 64
    assert at.text_input(key="address.table").value == "3,0,5"
    assert metrics(at) == {"token_index": "3", "logical_block_id": "1", "physical_block_id": "0",
                           "block_offset": "1", "slot": "1"}


def test_randomise_gives_a_valid_table():
    at = app_test(ADDRESS).run()
    at.button(key="address.randomise").click().run()
    ok(at)
    parsed = parse_int_list(at.text_input(key="address.table").value, 0, 11, 32)
    assert parsed.ok and len(parsed.values) == 3 and not duplicates(parsed.values)


# --- page 2: gather & attend -------------------------------------------------------------------------------------
def test_gather_steps_then_matches_contiguous():
    at = app_test(GATHER).run()
    ok(at)
    for expected in (1, 2, 3):
        at.button(key="gather.next").click().run()
        assert at.session_state["gather.step"] == expected
    assert at.query_params["step"] == "3" and not at.metric  # no attention before the gather is complete
    at.button(key="gather.all").click().run()
    ok(at)
    result = at.session_state["gather.lesson"].result()
    assert result.ok and result.rel_err < result.tolerance
    assert metrics(at)["verdict"] == t("common.ok", "en")
    at.button(key="gather.reset").click().run()
    assert at.session_state["gather.step"] == 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gather_prefill_from_the_url(dtype):
    """A shared link to prefill, q_len 4, fully gathered: the mask and weights are shown and the check passes."""
    at = app_test(GATHER, "zh", {"mode": "prefill", "q_len": 4, "step": 10, "dtype": dtype}).run()
    ok(at)
    assert at.radio(key="gather.mode").value == "prefill" and at.slider(key="gather.q_len").value == 4
    assert at.session_state["gather.lesson"].config.dtype == dtype
    assert metrics(at)[t("gather.verdict", "zh")] == t("common.ok", "zh")
    assert len(at.get("plotly_chart")) == 6  # chain, pool, strip, mask, weights, diff


def test_gather_refuses_impossible_settings_kindly():
    at = app_test(GATHER, params={"num_kv_heads": 8}).run()
    assert not at.exception and at.error and "num_kv_heads" in at.error[0].value
    at = app_test(GATHER, params={"context_len": 512, "block_size": 1}).run()
    assert not at.exception and at.error and "block_size" in at.error[0].value


# --- page 3: batch decode ----------------------------------------------------------------------------------------
def test_batch_decode_steps_finish_and_add():
    at = app_test(BATCH).run()
    ok(at)
    at.button(key="batch.decode").click().run()
    at.button(key="batch.decode").click().run()
    ok(at)
    demo = at.session_state["batch.lesson"]
    assert demo.ops == ["d", "d"] and demo.cached_token_counts() == {0: 12, 1: 8, 2: 17}
    assert any("C" in i.value and "10" in i.value for i in at.info), "C's new block is announced"
    assert all(c.ok for c in demo.checks)
    assert set(at.table[0].value[t("batch.verdict", "en")]) == {t("common.ok", "en")}
    at.selectbox(key="batch.target").set_value(1).run()
    at.button(key="batch.finish").click().run()
    assert 1 not in demo.tables() and {1, 4} <= set(demo.playground.manager.free_block_ids)
    at.text_input(key="batch.new_len").input("7").run()
    at.button(key="batch.add").click().run()
    ok(at)
    assert demo.cached_token_counts()[3] == 7 and at.query_params["ops"] == "d,d,f1,a7"
    assert at.button(key="batch.export").label == t("common.export", "en")


def test_full_pool_gives_a_friendly_message():
    at = app_test(BATCH, params={"ops": "d,d,d,d,d"}).run()
    at.button(key="batch.decode").click().run()
    assert not at.exception and at.warning
    assert at.session_state["batch.lesson"].ops == ["d"] * 5


def test_batch_url_replays_the_exact_state():
    ops = "d,d,f1,a5,d"
    at = app_test(BATCH, params={"ops": ops, "dtype": "float16", "seed": 3}).run()
    ok(at)
    replayed, _ = BatchLesson.replay(BatchConfig(dtype="float16", seed=3), ops.split(","), device=None)
    assert at.session_state["batch.lesson"].trace() == replayed.trace()
    assert at.query_params["ops"] == ops


def test_batch_ignores_junk_in_the_url():
    at = app_test(BATCH, params={"ops": "d,zz,f99,d", "num_blocks": -3}).run()
    assert not at.exception
    assert at.slider(key="batch.num_blocks").value == 4  # clamped to the minimum


# --- pure helpers of ui/ -------------------------------------------------------------------------------------------
SEED_KNOBS = [("app_pages/2_Gather_and_attend.py", "gather.seed", 9999), (BATCH, "batch.seed", 9999),
              ("app_pages/5_Bug_lab.py", "buglab.seed", 999), ("app_pages/7_Correct_to_fast.py", "fast.seed", 9999)]


@pytest.mark.parametrize("path, key, hi", SEED_KNOBS, ids=lambda v: v if isinstance(v, str) and "." in v else "")
def test_a_seed_knob_says_what_it_does_with_any_text(path, key, hi):
    """Each page's seed box: a seed in range is used and goes to the URL; 2**53 (which a number input would mark red
    and silently replace by the old value), hi + 1, -1 and "abc" each give an error box naming the range and the
    seed still in use, in the page's language, and the URL keeps that seed."""
    at = app_test(path, "zh", {"requests": 40}).run()
    at.text_input(key=key).input("7").run()
    ok(at)
    assert at.query_params["seed"] == "7"
    label = at.text_input(key=key).label
    for text, shown in ((str(2**53), str(2**53)), (str(hi + 1), str(hi + 1)), ("-1", "\\-1"), ("abc", "abc")):
        at.text_input(key=key).input(text).run()
        assert not at.exception
        assert [e.value for e in at.error] == [t("common.not_whole", "zh", label=label, text=shown, lo=0, hi=hi,
                                                 used=7)]
        assert at.query_params["seed"] == "7"
    at.text_input(key=key).input(f" {hi} ").run()
    ok(at)
    assert at.query_params["seed"] == str(hi)


@pytest.mark.parametrize("raw, used, noted", [(str(2**53), "9999", "common.url_adjusted"),
                                               ("-5", "0", "common.url_adjusted"), ("abc", "0", "common.url_ignored"),
                                               ("9" * 19, "0", "common.url_ignored"), ("42", "42", None)])
def test_a_seed_in_the_url_is_clamped_or_ignored_with_a_note(raw, used, noted):
    """?seed= on page 2: a whole number is clamped to 0–9999 (2**53 too), anything else (text, more than 18 digits)
    leaves the default; either way the box at the top says which value was not used as given."""
    at = app_test(GATHER, "en", {"seed": raw}).run()
    assert not at.exception
    assert at.text_input(key="gather.seed").value == used and at.query_params["seed"] == used
    notes = " ".join(w.value for w in at.warning)
    if noted is None:
        assert t("common.url_title", "en") not in notes
    else:
        assert t("common.url_title", "en") in notes and "seed" in notes


def test_parsers_bound_every_value():
    assert parse_int_list("[7 2, 9]", 0, 11, 8).values == [7, 2, 9]
    assert parse_int_list("1,2,3", 0, 11, 2).error == "too_long"
    assert parse_int_list("1e9", 0, 11, 8).error == "not_a_number"
    assert int_in(1, 16)("999") == 16 and int_in(1, 16)("x") is None
    assert one_of(["decode", "prefill"])("prefill") == "prefill" and one_of([1, 2])("3") is None
    assert duplicates([7, 2, 2, 7, 2]) == [2, 7]


def test_gather_hovers_speak_the_pages_language():
    """In 简体中文 the K/V strip's hover says where each token is read from (token 0 ← physical block …，块内偏移 …)
    and which are not gathered yet, and the causal mask's (drawn once the gather is complete) says visible / masked,
    in Chinese (they were English)."""
    import json

    def hovers(step: int) -> list[str]:
        at = app_test(GATHER, "zh", {"mode": "prefill", "q_len": 4, "context_len": 6, "step": step}).run()
        ok(at)
        out = []
        for chart in at.get("plotly_chart"):
            for tr in json.loads(chart.proto.spec)["data"]:
                text = tr.get("hovertext") or []
                out += [h for row in text for h in (row if isinstance(row, list) else [row])]
        return out

    partway, complete = hovers(3), hovers(6)
    assert any(h.endswith("（尚未 gather）") for h in partway)
    assert any(h.startswith("token 0 ← physical block ") and "，块内偏移 0，slot " in h for h in partway), partway[:3]
    assert any(h.endswith(": 可见") for h in complete) and any(h.endswith(": 被遮蔽") for h in complete)
    english = ("not gathered", ", offset ")
    assert not [h for h in partway + complete if any(w in h for w in english) or h.endswith(("visible", "masked"))]
