"""The pool grid as HTML (viz.pool.pool_html, page 4): every slot a cell, in slot order, with the colour, printed
label and hover text of the plotly pool_figure (the tooltip reads as the figure's hover does: <br> a new line,
"&lt;s&gt;" shown as "<s>"), the written / read outlines, block columns as the figure's, and a sequence legend."""

from __future__ import annotations

import html

import pytest

from viz.colors import FREE_COLOR, RESERVED_ALPHA, seq_color, tint
from viz.pool import pool_figure, pool_html, read_pool

pytestmark = pytest.mark.usefixtures("validate_figures")  # conftest: plotly validation on

TABLES = {0: [3, 1], 1: [0], 2: [1]}  # block 1 listed by A and C: C's token 0 clashes with A's token 4
LENS = {0: 6, 1: 3, 2: 1}
TEXTS = {0: ["<s>", "The", "␣fox", "'s", "<br>", "&", "unwritten"], 1: ["x", "y", "z"], 2: ["c"]}


def test_cells_carry_the_figures_hover_colour_and_label():
    """Written by hand: A's token 1 at block 3 offset 1 (slot 13), the "<s>" piece as text, a free and a reserved
    cell, the clash's two lines; then every cell equals the figure's point at that slot."""
    markup = pool_html(6, 4, TABLES, LENS, token_text=TEXTS, max_width=680)
    assert "\n" not in markup, "one line of markup"
    cells = read_pool(markup)
    assert [c["slot"] for c in cells] == list(range(24))
    assert cells[13]["title"] == ("A token 1 → logical block 0 → physical block 3 → offset 1 → slot 13"
                                  " · token 'The'")
    assert cells[12]["title"].endswith("· token '<s>'") and cells[12]["text"] == "A0"
    assert cells[12]["color"] == seq_color(0) and cells[1]["color"] == seq_color(1)
    assert cells[20] == {"slot": 20, "classes": [], "color": FREE_COLOR, "font": "#000000", "text": "",
                         "title": "physical block 5, offset 0, slot 20: free"}
    assert cells[3]["color"] == tint(seq_color(1), RESERVED_ALPHA) and "not written yet" in cells[3]["title"]
    assert cells[4]["text"] == "4/0" and cells[4]["title"].count("\n") == 2 and "share one slot" in cells[4]["title"]
    assert cells[4]["title"].startswith("A token 4 → logical block 1 → physical block 1 → offset 0 → slot 4"
                                        " · token '<br>'\n"), "a token piece '<br>' stays text, not a line break"
    fig = pool_figure(6, 4, TABLES, LENS, token_text=TEXTS, max_width=680).to_dict()
    by_slot = {}
    for tr in fig["data"]:
        if tr.get("hovertext") is not None:
            for x, y, text, hover, color in zip(tr["x"], tr["y"], tr["text"], tr["hovertext"], tr["marker"]["color"]):
                by_slot[(x, y)] = (text, html.unescape(hover.replace("<br>", "\n")), color)
    rows = 3  # 6 blocks of 4 in 2 columns (grid_columns): block b at column b // 3, row b % 3
    for c in cells:
        block, offset = divmod(c["slot"], 4)
        assert by_slot[((block // rows) * 5.6 + offset, block % rows)] == (c["text"], c["title"], c["color"])


def test_outlines_escaping_and_legend():
    """Slots to highlight get pp-hl, read ones pp-read (highlight wins); label text is escaped; the legend names the
    sequences holding blocks; bad table entries are skipped as in the figure."""
    markup = pool_html(6, 4, {0: [3, 1, 99]}, {0: 6}, highlight=[13], read=[12, 13], labels={0: "<A>"})
    cells = read_pool(markup)
    assert cells[13]["classes"] == ["pp-hl"] and cells[12]["classes"] == ["pp-read"] and cells[0]["classes"] == []
    assert cells[12]["text"] == "<A>0" and "&lt;A&gt;0" in markup and "<A>" not in markup
    assert markup.count('class="pp-key"') == 1 and len(cells) == 24
    assert markup.count('class="pp-col"') == 2 and markup.count('class="pp-block"') == 6


def test_small_cells_print_no_label_but_keep_the_hover():
    """Too small to print "A12" (< 22 px a cell, as the figure): text empty, hover intact."""
    cells = read_pool(pool_html(64, 16, {0: [0]}, {0: 3}, max_width=300))
    assert cells[0]["text"] == "" and cells[0]["title"].startswith("A token 0 →")


def test_the_hovers_sentences_are_the_words_given():
    """A free cell, a reserved one and a clash say the caller's sentences (a page passes its language's); the
    address chain (the article's vocabulary) is unchanged."""
    from viz.pool import PoolWords

    words = PoolWords(free="FREE", reserved="HELD BY {owners}", clash="CLASH")
    cells = read_pool(pool_html(6, 4, TABLES, LENS, words=words))
    assert cells[20]["title"] == "physical block 5, offset 0, slot 20: FREE"
    assert cells[3]["title"] == "physical block 0, offset 3, slot 3: HELD BY B"
    assert cells[4]["title"].endswith("\nCLASH") and cells[4]["title"].startswith("A token 4 → logical block 1")
