"""Figure builders: the right traces and shapes, cells coloured per owner with ids printed, the highlighted cell
present, hover text holding the whole address chain, diverging scales symmetric around 0. Figures are built with
plotly's validation on, so an invalid property fails here rather than in the browser."""

from __future__ import annotations

import pytest
import torch

from paged.addressing import address_table, locate
from lessons.address import MissingEntry, follow
from viz.attention import StripWords, diverging_figure, kv_strip_figure, mask_figure, weights_figure
from viz.chain import chain_figure
from viz.colors import FREE_COLOR, OKABE_ITO, seq_color, seq_label, text_color, tint
from viz.pool import pool_figure
from viz_util import trace

pytestmark = pytest.mark.usefixtures("validate_figures")  # conftest: plotly validation on

SEED_TABLES = {0: [7, 2, 9], 1: [4, 1], 2: [8, 5, 3, 6]}
SEED_LENS = {0: 10, 1: 6, 2: 15}


def cell_of(fig, text):
    """(trace, index) of the cell whose printed text is `text`."""
    for t in fig.data:
        if t.mode and "markers" in t.mode and t.text is not None and text in t.text:
            return t, list(t.text).index(text)
    raise AssertionError(f"no cell printed {text!r}")


def test_colors_are_okabe_ito_stable_and_distinct():
    """Sequence colours come from the Okabe–Ito palette, repeat only after 7 ids, and never change."""
    colors = [seq_color(i) for i in range(7)]
    assert len(set(colors)) == 7 and set(colors) <= set(OKABE_ITO.values())
    assert seq_color(9) == seq_color(2) and seq_color(2) == seq_color(2)
    assert [seq_label(i) for i in (0, 1, 2, 26)] == ["A", "B", "C", "S26"]
    assert text_color("#000000") == "#FFFFFF" and text_color("#F0E442") == "#000000"
    assert tint("#000000", 0.0) == "#FFFFFF" and tint("#E69F00", 1.0) == "#E69F00"


def test_pool_cells_coloured_per_owner_with_ids():
    """Every written cell of a sequence has that sequence's colour and prints its label and token index."""
    fig = pool_figure(12, 4, SEED_TABLES, SEED_LENS)
    for seq_id, table in SEED_TABLES.items():
        t = trace(fig, seq_label(seq_id))
        written = [c for c, txt in zip(t.marker.color, t.text) if txt]
        assert len(written) == SEED_LENS[seq_id]
        assert set(written) == {seq_color(seq_id)}
        assert f"{seq_label(seq_id)}0" in t.text
    free = trace(fig, "free")
    assert len(free.x) == (12 - 9) * 4 and set(free.marker.color) == {FREE_COLOR}


def test_pool_reserved_slots_are_tinted():
    """B holds 8 slots but wrote 6: its last two slots are drawn in a tint, with no text."""
    t = trace(pool_figure(12, 4, SEED_TABLES, SEED_LENS), "B")
    reserved = [c for c, txt in zip(t.marker.color, t.text) if not txt]
    assert reserved == [tint(seq_color(1), 0.35)] * 2


def test_pool_highlight_and_hover_chain():
    """The highlighted slot sits exactly on its cell, and hovering a cell shows the whole chain."""
    fig = pool_figure(12, 4, {0: [7, 2, 9]}, {0: 10}, highlight=[9], read=[28, 29])
    owner, i = cell_of(fig, "A5")
    hi = trace(fig, "highlight")
    assert list(hi.customdata) == [9] and (hi.x[0], hi.y[0]) == (owner.x[i], owner.y[i])
    assert owner.hovertext[i] == "A token 5 → logical block 1 → physical block 2 → offset 1 → slot 9"
    assert list(trace(fig, "read").customdata) == [28, 29]


def test_pool_block_listed_twice_is_drawn_not_raised():
    """A duplicated physical block puts two tokens on one slot: both are printed and the hover explains it."""
    fig = pool_figure(12, 4, {0: [7, 2, 2]}, {0: 12})
    t, i = cell_of(fig, "5/9")
    assert "token 5" in t.hovertext[i] and "token 9" in t.hovertext[i] and "overwrites" in t.hovertext[i]


def test_pool_skips_entries_outside_the_pool():
    fig = pool_figure(4, 2, {0: [1, 99]}, {0: 4})
    assert len(trace(fig, "A").x) == 2


def test_chain_figure_shows_every_link():
    """Five boxes (one per link) plus one per table entry; the seed example's values are in the text."""
    address = locate(5, [7, 2, 9], 4)
    fig = chain_figure(address, 4, [7, 2, 9])
    assert len(fig.layout.shapes) == 5 + 3
    text = " ".join(a.text for a in fig.layout.annotations)
    for piece in ("5 // 4<br>= <b>1</b>", "block_table[1]<br>= <b>2</b>", "5 % 4<br>= <b>1</b>", "= <b>9</b>",
                  "key_cache[2, 1]"):
        assert piece in text
    used = fig.layout.shapes[5 + 1]
    assert used.line.width == 3


def test_chain_figure_windows_a_long_table():
    fig = chain_figure(locate(100, list(range(64)), 2), 2, list(range(64)))
    assert len(fig.layout.shapes) == 5 + 14


def test_chain_text_fits_its_boxes_in_a_narrow_column():
    """In a 540 px plot (1024x768 with the sidebar open) every line of a box's text fits inside its box (text
    measured at 0.47 em a character, the app's font measured 0.44), and key_cache[…] stays inside the figure."""
    import re

    fig = chain_figure(locate(55, list(range(14)), 4), 4, list(range(14)))
    lo, hi = fig.layout.xaxis.range
    px = 540 / (hi - lo)
    boxes = [(b.x0, b.x1) for b in fig.layout.shapes[:5]]
    checked = 0
    for note in (n for n in fig.layout.annotations if n.text):  # (an arrow has no text)
        lines = [re.sub(r"<[^>]+>", "", line) for line in note.text.split("<br>")]
        width = max(len(line) for line in lines) * note.font.size * 0.47 / px
        if note.text.startswith("key_cache"):
            assert note.xanchor == "right" and note.x <= hi and note.x - width * 0.6 / 0.47 >= lo
            continue
        box = next(((x0, x1) for x0, x1 in boxes if x0 < note.x < x1 and 0 <= note.y <= 1), None)
        if box is not None:
            assert width <= box[1] - box[0], (note.text, width * px, (box[1] - box[0]) * px)
            checked += 1
    assert checked == 10  # each of the 5 boxes: its name and its rule with the value


def test_chain_figure_stops_at_a_missing_table_entry():
    """Token 11 of a one-entry table (block_size 4): the chain reaches logical block 2 and stops; the table is drawn
    with dashed cells for the missing logical blocks 1 and 2, the one read marked "?"."""
    address = follow(11, [7], 4)
    assert isinstance(address, MissingEntry) and (address.logical_block_id, address.block_offset) == (2, 3)
    assert address.capacity == 4 and follow(3, [7], 4) == locate(3, [7], 4)
    fig = chain_figure(address, 4, [7])
    text = [a.text for a in fig.layout.annotations]
    assert "11 // 4<br>= <b>2</b>" in text and "block_table[2]<br>= <b>—</b>" in text and "key_cache[?, 3]" in text
    table = fig.layout.shapes[5:]
    assert len(table) == 3 and [c.line.dash for c in table] == [None, "dash", "dash"] and "?" in text
    assert fig.layout.shapes[2].line.width == 4  # the physical_block_id box: where the chain breaks


def test_diverging_scale_is_symmetric_around_zero():
    values = torch.tensor([[0.5, -2.0], [1.0, 0.25]])
    hm = diverging_figure(values).data[0]
    assert hm.zmid == 0 and hm.zmax == 2.0 and hm.zmin == -2.0
    assert hm.colorscale[0][1] != hm.colorscale[-1][1]
    zero = diverging_figure([[0.0, 0.0]]).data[0]
    assert zero.zmin == -zero.zmax and zero.zmax > 0


def test_weights_heatmap_heads_by_tokens():
    hm = weights_figure(torch.softmax(torch.randn(4, 10), -1)).data[0]
    assert hm.type == "heatmap" and len(hm.z) == 4 and len(hm.z[0]) == 10 and hm.zmin == 0
    assert list(hm.y) == ["h0", "h1", "h2", "h3"]
    assert "weight %{z" in hm.hovertemplate
    assert "权重 %{z" in weights_figure([[1.0]], weight="权重").data[0].hovertemplate


def test_mask_is_causal_and_aligned_to_the_end():
    """q_len 3 over 5 tokens, the library's mask drawn: query i (token 2 + i) sees keys 0 … 2 + i."""
    from paged.attention import causal_mask

    fig = mask_figure(causal_mask(3, 5).tolist())
    assert [list(r) for r in fig.data[0].z] == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert list(fig.data[0].y) == ["q2", "q3", "q4"]


def test_kv_strip_marks_gathered_tokens():
    fig = kv_strip_figure(address_table([7, 2, 9], 10, 4), step=6)
    strip = trace(fig, "gathered")
    assert list(strip.marker.color).count(seq_color(0)) == 6
    assert strip.text[5] == "2:1" and strip.text[6] == ""
    assert list(trace(fig, "highlight").x) == [5]
    assert strip.hovertext[5] == "token 5 ← physical block 2, offset 1, slot 9"  # block_table [7, 2, 9]
    assert strip.hovertext[6] == "token 6 ← physical block 2, offset 2, slot 10 (not gathered yet)"
    worded = trace(kv_strip_figure(address_table([7, 2, 9], 10, 4), step=6, words=StripWords(
        token="{token}:{block}:{offset}:{slot}", not_gathered="[{read}]")), "gathered")
    assert list(worded.hovertext[5:7]) == ["5:2:1:9", "[6:2:2:10]"]  # a page's words

