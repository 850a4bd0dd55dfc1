"""Numbers say what they are (issue 27): a note that no longer holds is not shown, a shape is called a shape, a
comparison names what it compares, in what dtype, to what tolerance; sequences are named by letter everywhere."""

from __future__ import annotations

import re

import pytest

from ui.engine_actions import explain_step
from ui.chain_live import slot_runs
from ui.page import PageContext
from ui.strings import t, translator

from .app_util import app_test, no_exception

ADDRESS, GATHER = "app_pages/1_Address_translation.py", "app_pages/2_Gather_and_attend.py"
ENGINE = "app_pages/4_Engine.py"


def notes(at) -> list[str]:
    return [i.value for i in at.info]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_block_listed_twice_drops_the_in_order_note(lang):
    """Table 7, 2, 7: the warning names block 7, and the pool's note no longer says reading the table in order gives
    tokens 0, 1, 2, … (it does not: block 7's cells hold two tokens each); a table without a repeat keeps it."""
    at = app_test(ADDRESS, lang, {"table": "7,2,7"}).run()
    no_exception(at)
    plain = t("address.pool_notice", lang, token_index=5, slot=9, physical_block_id=2)
    assert not any(plain in n for n in notes(at))
    assert any(t("address.pool_notice_duplicate", lang, token_index=5, slot=9, physical_block_id=2, block="7") in n
               for n in notes(at))
    fine = app_test(ADDRESS, lang, {"table": "7,2,9"}).run()
    assert any(plain in n for n in notes(fine))


def test_a_bad_token_in_the_link_is_named_once():
    """?token=abc: the note naming it appears once, not once per reading of the link."""
    at = app_test(ADDRESS, "en", {"token": "abc"}).run()
    no_exception(at)
    said = " ".join(w.value for w in at.warning)
    assert said.count(t("common.url_ignored", "en", name="token", raw="abc")) == 1


def test_the_gather_page_calls_a_shape_a_shape_and_names_its_comparisons():
    """Decode, 10 tokens gathered: the strip's title calls [10, 2, 8] a shape (tokens × num_kv_heads × head_dim),
    and the bit-for-bit note names the two comparisons with the dtype, the error and the tolerance."""
    at = app_test(GATHER, "en", {"context_len": 10, "step": 10}).run()
    no_exception(at)
    assert any("shape [10, 2, 8] (tokens × num_kv_heads × head_dim)" in m.value for m in at.markdown)
    result = at.session_state["gather.lesson"].result()
    note = [n for n in notes(at) if "bit-for-bit" in n]
    assert len(note) == 1 and "float32" in note[0] and "float64" in note[0]
    assert f"{result.max_abs_err:.2e}" in note[0] and "1e-05" in note[0]


def test_slot_runs_never_join_slots_that_are_not_neighbours():
    """24–27 and 40–45 are two runs (two blocks), not "24…45"; a third run is counted, not hidden."""
    ctx = PageContext("engine", "en", translator("engine", "en"))
    assert slot_runs(ctx, [24, 25, 26, 27, 40, 41, 42, 43, 44, 45]).replace("\u2060", "") == "24–27, 40–45"
    assert slot_runs(ctx, [7]) == "7" and slot_runs(ctx, []) == "—"
    assert slot_runs(ctx, [0, 1, 8, 9, 4]).replace("\u2060", "") == "0–1, 8–9, " + t("chain.slots_more", "en", count=1)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_steps_why_names_sequences_by_letter(lang):
    """The scheduler's why with seq 2 and preempted [1]: "C" and "B", never "seq 2" or "[1]"; pieces joined with
    "; " in English and "；" in 简体中文."""
    ctx = PageContext("engine", lang, translator("engine", lang))
    why = [("prefill_chunk", dict(seq=2, start=0, end=15, total=40)), ("preempted", dict(seqs=[1]))]
    text = explain_step(ctx, why)
    assert "seq 2" not in text and "[1]" not in text and "C" in text and "B" in text
    assert ("；" in text and "; " not in text) if lang == "zh" else "; " in text


def _runs_named(cell: str) -> list[tuple[int, int]]:
    """The runs a slot cell names ("24–31, 56–63, +4 more runs" -> [(24, 31), (56, 63)]), read independently of
    ui.widgets.slot_runs."""
    out = []
    for part in cell.replace("\u2060", "").split(", "):
        ends = [int(x) for x in re.findall(r"\d+", part)]
        if re.fullmatch(r"\d+(–\d+)?", part.strip()):
            out.append((ends[0], ends[-1]))
    return out


def test_the_fault_rule_table_names_only_runs_of_slots_the_prefill_wrote():
    """Issue 38.6 (page 4, late_increment): a prefill's slot cell names runs of neighbouring slots it really wrote
    (never one "24…45" range over blocks that are not neighbours), and counts the runs it leaves out."""
    at = app_test(ENGINE, "en", {"fault": "late_increment", "steps": 3, "model": "shipped"}).run()
    no_exception(at)
    checks = [c for c in at.session_state["engine.fault_checks"] if c.phase == "prefill" and len(c.slots) > 1]
    assert checks
    table = next(tb.value for tb in at.table if t("engine_fault.col_position", "en") in tb.value.columns)
    for c in checks:
        cell = str(table.loc[str(c.step), t("engine_fault.col_slot", "en")])
        assert "…" not in cell.split("+")[0] and _runs_named(cell)
        for lo, hi in _runs_named(cell):
            assert set(range(lo, hi + 1)) <= set(c.slots)
        runs = 1 + sum(b != a + 1 for a, b in zip(c.slots, c.slots[1:]))
        assert (runs > 2) == (t("chain.slots_more", "en", count=runs - 2) in cell)


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_the_offset_notice_names_the_last_offset_as_a_number(block_size):
    """Issue 38.6 (page 1): the table's notice says the offset counts 0 … block_size - 1 with that number worked
    out ("0 … 3" at block_size 4), never "0 … 4-1"."""
    at = app_test(ADDRESS, "en", {"block_size": block_size}).run()
    no_exception(at)
    said = " ".join(notes(at))
    assert f"0 … {block_size - 1} " in said and f"{block_size}-1" not in said


def test_the_speed_menu_says_step_for_one_and_steps_otherwise():
    """Issue 38.6: "1 step/s" (not "1 steps/s"), "0.5 steps/s" and "2 steps/s"; the same number in 简体中文."""
    from ui.playback import SPEEDS, speed_text

    en, zh = translator("engine", "en"), translator("engine", "zh")
    for speed in SPEEDS:
        text = speed_text(en, speed)
        assert text.startswith(f"{speed} ") and text.endswith("step/s" if float(speed) == 1 else "steps/s")
        assert speed in speed_text(zh, speed) and "step" not in speed_text(zh, speed)
