"""Page 3 · Batch decode, the "Finish" selector: it always shows a running sequence (or is disabled with a clear
label when none runs), and Finish finishes exactly the sequence it shows, after a finish and after a settings
change."""

from __future__ import annotations

from ui.strings import t

from .app_util import app_test, no_exception

BATCH = "app_pages/3_Batch_decode.py"


def running(at) -> list[int]:
    return [s.seq_id for s in at.session_state["batch.lesson"].playground.running()]


def shown(at):
    """The selector as drawn: (its value, its options as labels)."""
    box = at.selectbox(key="batch.target")
    return box.value, list(box.options)


def test_finish_always_finishes_the_sequence_shown():
    """Finish A: the selector then shows a running sequence (not A); Finish again finishes that one; and so on
    until none runs, when the selector and Finish are disabled and say so."""
    at = app_test(BATCH).run()
    no_exception(at)
    assert shown(at) == (0, ["A", "B", "C"])
    for _ in range(3):
        value, options = shown(at)
        assert value in running(at) and len(options) == len(running(at))
        at.button(key="batch.finish").click().run()
        no_exception(at)
        assert at.session_state["batch.lesson"].last_event.seq_id == value, "Finish finished another sequence"
        assert value not in running(at)
    assert running(at) == []
    box = at.selectbox(key="batch.target")
    assert box.disabled and box.value is None and box.placeholder == t("batch.none_running", "en")
    assert at.button(key="batch.finish").disabled


def test_a_settings_change_keeps_a_live_sequence_selected():
    """Add D and select it, then change head_dim (the demo restarts with A, B, C): the selector shows A, not an
    empty "Choose an option", and Finish finishes A."""
    at = app_test(BATCH).run()
    at.button(key="batch.add").click().run()
    at.selectbox(key="batch.target").set_value(3).run()
    assert shown(at)[0] == 3
    at.selectbox(key="batch.head_dim").set_value(16).run()
    no_exception(at)
    assert running(at) == [0, 1, 2] and shown(at)[0] == 0
    at.button(key="batch.finish").click().run()
    assert at.session_state["batch.lesson"].last_event.seq_id == 0 and shown(at)[0] == 1


def test_a_prompt_length_out_of_range_is_refused_by_name():
    """Prompt length 9999 (the form allows 1–64): a warning names the value and the range, nothing is added (the
    old behaviour silently added a sequence of the previous length)."""
    at = app_test(BATCH).run()
    for value in (9999, 0):
        at.text_input(key="batch.new_len").input(str(value)).run()
        at.button(key="batch.add").click().run()
        no_exception(at)
        assert running(at) == [0, 1, 2] and at.session_state["batch.lesson"].ops == []
        assert [w.value for w in at.warning] == [t("batch.refused_add_out_of_range", "en", value=value, lo=1, hi=64)]
    at.text_input(key="batch.new_len").input("7").run()
    at.button(key="batch.add").click().run()
    assert at.session_state["batch.lesson"].ops == ["a7"] and not at.warning


def pool_cells_shown(at) -> list[dict]:
    """The pool grid as drawn (viz.pool.pool_html markup inside the page's st.html), one dict per slot."""
    from viz.pool import read_pool

    (markup,) = [h.proto.body for h in at.get("html") if 'class="pp-grid"' in h.proto.body]
    return read_pool(markup)


def test_a_typed_prompt_length_that_is_no_number_is_refused_by_name():
    """Text in the length box: 2**53 reaches the lesson and is refused as out of range (a number input would have
    kept its old value silently); "abc" and "5.5" are refused as not whole numbers; nothing is added."""
    at = app_test(BATCH, "zh").run()
    at.text_input(key="batch.new_len").input(str(2**53)).run()
    at.button(key="batch.add").click().run()
    no_exception(at)
    assert [w.value for w in at.warning] == [t("batch.refused_add_out_of_range", "zh", value=2**53, lo=1, hi=64)]
    for text, shown in (("abc", "abc"), ("5.5", "5\\.5")):
        at.text_input(key="batch.new_len").input(text).run()
        at.button(key="batch.add").click().run()
        no_exception(at)
        assert at.session_state["batch.lesson"].ops == []
        assert [w.value for w in at.warning] == [t("batch.refused_add_not_a_number", "zh", text=shown, lo=1, hi=64)]
    at.button(key="batch.decode").click().run()  # the note is for that Add only
    assert not at.warning and at.session_state["batch.lesson"].ops == ["d"]


def test_the_pool_outlines_the_slots_each_decode_wrote():
    """Seed batch, one decode: the pool is HTML cells (no plotly grid), every slot shown once, and the outlined
    cells are exactly each sequence's newest token's slot, worked out from its block table by hand; the written
    cells carry the sequence label and token index; the wrong-slot break outlines where the stray write landed."""
    at = app_test(BATCH).run()
    at.button(key="batch.decode").click().run()
    no_exception(at)
    lesson = at.session_state["batch.lesson"]
    bs, tables, lens = lesson.config.block_size, lesson.tables(), lesson.cached_token_counts()
    cells = pool_cells_shown(at)
    assert [c["slot"] for c in cells] == list(range(lesson.config.num_blocks * bs))
    want = {tables[s][(lens[s] - 1) // bs] * bs + (lens[s] - 1) % bs for s in tables}
    assert len(want) == 3 and {c["slot"] for c in cells if "pp-hl" in c["classes"]} == want
    label = {0: "A", 1: "B", 2: "C"}
    for s, table in tables.items():
        for pos in range(lens[s]):
            slot = table[pos // bs] * bs + pos % bs
            assert cells[slot]["text"] == f"{label[s]}{pos}" and f"slot {slot}" in cells[slot]["title"]
    titles = [m.value for m in at.markdown if "paged-figure-title" in m.value]
    free = lesson.playground.manager.num_free_blocks
    assert any(t("batch.pool_title", "en", free=free, num_blocks=lesson.config.num_blocks) in x for x in titles)

    broken = app_test(BATCH).run()  # the break: C's token 15 belongs in slot 27 and lands in slot 28 (A's token 0)
    broken.toggle(key="batch.wrong").set_value(True).run()
    broken.selectbox(key="batch.wrong_seq").set_value(2).run()
    broken.button(key="batch.decode").click().run()
    no_exception(broken)
    outlined = {c["slot"] for c in pool_cells_shown(broken) if "pp-hl" in c["classes"]}
    assert 28 in outlined and 27 not in outlined


def test_no_plotly_chart_per_step_and_the_mapping_shows_each_table():
    """After a decode the page draws no plotly chart; the block-table image has one tooltip per table entry naming
    its physical block, and the block the step took from the free list (C's block 10) as a dotted line."""
    from viz.mapping import read_mapping

    at = app_test(BATCH).run()
    at.button(key="batch.decode").click().run()
    at.button(key="batch.decode").click().run()
    no_exception(at)
    assert not at.get("plotly_chart")
    tables = at.session_state["batch.lesson"].tables()
    (markup,) = [h.proto.body for h in at.get("html") if "pm-tip" in h.proto.body]
    svg, tips = read_mapping(markup)
    for s, table in tables.items():
        for j, block in enumerate(table):
            assert any(tip.startswith(f"{'ABC'[s]} logical block {j} → physical block {block} ") for tip in tips)
    assert 'class="link new" data-seq="C" data-block="10"' in svg


def test_the_mapping_speaks_the_pages_language():
    """In 简体中文 the block-table image's row labels and every tooltip are the page's Chinese strings: no English
    sentence ("tokens 0–3", "free", "no tokens yet") is left in it."""
    from viz.mapping import read_mapping

    at = app_test(BATCH, "zh").run()
    at.button(key="batch.decode").click().run()
    no_exception(at)
    (markup,) = [h.proto.body for h in at.get("html") if "pm-tip" in h.proto.body]
    svg, tips = read_mapping(markup)
    assert ">逻辑</text>" in svg and ">物理</text>" in svg and 'alt="各 sequence 的 block_table"' in markup
    for s, table in at.session_state["batch.lesson"].tables().items():
        for j, block in enumerate(table):
            assert any(tip.startswith(f"{'ABC'[s]} 的 logical block {j} → physical block {block}（token ")
                       for tip in tips), (s, j, tips)
    assert any(tip.endswith("：空闲") for tip in tips)
    assert not [tip for tip in tips if any(w in tip for w in ("tokens", "free", "no tokens yet"))]


def test_the_pool_hover_speaks_the_pages_language():
    """In 简体中文 a free slot's and a reserved slot's tooltips end in Chinese, not "free" / "not written yet"."""
    at = app_test(BATCH, "zh").run()
    no_exception(at)
    titles = [c["title"] for c in pool_cells_shown(at)]
    assert any(title.endswith("：空闲") or title.endswith(": 空闲") for title in titles), titles[:3]
    assert any("尚未写入" in title for title in titles)
    assert not [title for title in titles if title.endswith("free") or "not written yet" in title]
    # a written slot: its address chain, in Chinese around the article's terms (A's token 0 is in its logical block 0)
    table = at.session_state["batch.lesson"].tables()[0]
    chain = t("common.pool_chain", "zh", seq="A", token=0, logical=0, block=table[0], offset=0, slot=table[0] * 4)
    assert "块内偏移" in chain and any(title.startswith(chain) for title in titles), titles[:3]
    english = ("logical block", "offset", "A token", "B token", "C token")  # "token" itself is the article's term
    assert not [title for title in titles if any(w in title for w in english)], titles[:3]


def test_the_wrong_slot_break_draws_what_the_pool_holds():
    """The article's batch, C's newest token (15, slot 27 by C's table [8, 5, 3, 6]) written one slot too far: the
    pool is drawn from its contents, not from the tables: slot 28 (A's block 7, A's token 0) shows C15, marked
    written wrongly, its tooltip naming C's token and A's lost token 0; slot 27 shows nothing, marked missing; the
    legend names both marks; every other cell is as the tables say, unmarked."""
    at = app_test(BATCH, params={"ops": "w2"}).run()
    no_exception(at)
    cells = pool_cells_shown(at)
    wrong, missing = cells[28], cells[27]
    assert wrong["text"] == "C15" and "pp-wrong" in wrong["classes"]
    assert t("common.pool_lost", "en", seq="A", token=0) in wrong["title"]
    assert t("common.pool_stray", "en", seq="C", token=15, meant=27) in wrong["title"]
    assert missing["text"] == "" and "pp-missing" in missing["classes"]
    assert t("common.pool_missing", "en", seq="C", token=15) in missing["title"]
    assert [c["slot"] for c in cells if {"pp-wrong", "pp-missing"} & set(c["classes"])] == [27, 28]
    assert cells[29]["text"] == "A1" and cells[26]["text"] == "C14"
    (markup,) = [h.proto.body for h in at.get("html") if 'class="pp-grid"' in h.proto.body]
    assert t("common.pool_wrong_key", "en") in markup and t("common.pool_missing_key", "en") in markup


def test_a_link_with_the_break_on_breaks_the_first_decode():
    """?wrong=1&wrong_seq=2 (a link from the guide): the first Decode is already the broken one (op w2), and the
    switch is off after it."""
    at = app_test(BATCH, params={"wrong": 1, "wrong_seq": 2}).run()
    no_exception(at)
    assert at.toggle(key="batch.wrong").value is True and at.selectbox(key="batch.wrong_seq").value == 2
    at.button(key="batch.decode").click().run()
    no_exception(at)
    assert at.session_state["batch.lesson"].ops == ["w2"]
    assert at.toggle(key="batch.wrong").value is False
