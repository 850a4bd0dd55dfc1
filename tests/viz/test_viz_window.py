"""viz/window.py: holes drawn as freed blocks (the step's own ringed, naming the block released), the tokens the
next token reads outlined, the next slot dashed."""

from __future__ import annotations

from viz.window import window_table_html


def test_holes_window_and_next_slot():
    """Table [-1, -1, 7, 9] (block_size 2), 7 tokens cached, the next token reads from token 4: two holes, one
    ringed (it was block 3 before the step); tokens 4-6 outlined; token 7's slot dashed; slot tooltips give the
    physical address (block 9, offset 0 -> slot 18)."""
    labels = list("abcdefgh")
    markup = window_table_html([(0, [-1, -1, 7, 9], labels, 7, 4, [-1, 3, 7, 9])], 2)
    assert markup.count('class="pw-hole"') == 2 and markup.count("pw-freed-now") == 2  # css rule + one block
    assert "L1: P3 freed now" in markup and "L0: freed" in markup
    assert markup.count("pw-slot pw-read") == 3 and markup.count("pw-slot pw-next") == 1
    assert "physical block 9, slot 18" in markup


def test_a_named_token_fits_its_cell_and_the_hover_keeps_it_whole():
    """Issue 38 (page 11): ⟨SEP⟩ shows as "SEP" in its 3-character cell, not "⟨S…"; its hover names ⟨SEP⟩ whole;
    an ordinary long label is still cut with "…"."""
    markup = window_table_html([(0, [4], ["a", "⟨SEP⟩", "hello", "d"], 4, 0, [4])], 4)
    assert ">SEP</span>" in markup and "⟨S…" not in markup and "token 1 “⟨SEP⟩”" in markup
    assert ">he…</span>" in markup
