"""Accessibility of the figures themselves: text on every cell colour meets WCAG AA contrast (computed here from
the WCAG formula, independently of viz.colors), and each figure's text alternative (viz.describe) says what the
figure shows with numbers recomputed here from the state it was drawn from."""

from __future__ import annotations

import re

import pytest

from paged.block_manager import BlockManager
from paged.sequence import Sequence
from viz.colors import (FREE_COLOR, OKABE_ITO, RESERVED_ALPHA, SEQUENCE_COLORS, contrast_ratio, ink, text_color,
                        tint)
from viz.describe import AltWords, figure_alt, markup_alt, pool_sentence
from viz.cells import queues_html
from viz.pool import pool_figure, pool_html
from viz.sharing import CACHED_FREE_COLOR, refcount_pool_figure

pytestmark = pytest.mark.usefixtures("validate_figures")  # conftest: plotly validation on


def wcag_ratio(a: str, b: str) -> float:
    """The WCAG 2.1 contrast ratio, written out here (the reference the app's helper is checked against)."""
    def lum(c: str) -> float:
        ch = [int(c[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        ch = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in ch]
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


FILLS = ([FREE_COLOR, CACHED_FREE_COLOR] + list(SEQUENCE_COLORS) + [tint(c, a) for c in SEQUENCE_COLORS
                                                                     for a in (RESERVED_ALPHA, 0.6)])


@pytest.mark.parametrize("fill", FILLS)
def test_cell_text_meets_aa_on_every_fill(fill):
    """Black or white, the one picked for a cell's fill, reads at >= 4.5:1 on it (Okabe–Ito and its tints)."""
    assert wcag_ratio(text_color(fill), fill) >= 4.5
    assert contrast_ratio(text_color(fill), fill) == pytest.approx(wcag_ratio(text_color(fill), fill), rel=1e-9)


def test_ink_darkens_a_colour_until_it_reads_on_white():
    """Okabe–Ito colours too light for text on white (3.9:1 for vermillion) are darkened to >= 4.5:1; blue,
    already 5.2:1, is kept."""
    assert wcag_ratio(OKABE_ITO["vermillion"], "#FFFFFF") < 4.5
    for color in SEQUENCE_COLORS:
        assert wcag_ratio(ink(color), "#FFFFFF") >= 4.5
    assert ink(OKABE_ITO["blue"]) == OKABE_ITO["blue"]


def test_pool_figure_prints_every_label_in_a_readable_colour():
    """Each written cell of the pool grid: its text colour on its marker colour >= 4.5:1."""
    fig = pool_figure(8, 4, {0: [3, 1], 1: [0], 2: [5, 6], 3: [7], 4: [2], 5: [4]},
                      {0: 8, 1: 2, 2: 5, 3: 4, 4: 1, 5: 3}).to_dict()
    checked = 0
    for trace in fig["data"]:
        marker, font = trace.get("marker") or {}, trace.get("textfont") or {}
        if not isinstance(marker.get("color"), (list, tuple)):
            continue
        for text, fill, ink_ in zip(trace["text"], marker["color"], font["color"]):
            if text:
                assert wcag_ratio(ink_, fill) >= 4.5, (text, fill, ink_)
                checked += 1
    assert checked == 8 + 2 + 5 + 4 + 1 + 3


def _manager_state() -> tuple[BlockManager, dict[int, Sequence]]:
    """Three sequences allocated, then one freed, on a 24-block pool with a shuffled free list."""
    manager = BlockManager(24, 4, watermark=0.0, seed=7)
    seqs = {i: Sequence(i, list(range(100 * i, 100 * i + n))) for i, n in enumerate((10, 5, 13))}
    for seq in seqs.values():
        manager.allocate(seq)
    manager.free(seqs.pop(1))
    return manager, seqs


def test_pool_sentence_counts_what_the_block_manager_holds():
    """The pool figure's words: free blocks = the manager's own count of free blocks; each sequence's blocks in
    its block_table's order."""
    manager, seqs = _manager_state()
    tables = {i: list(s.block_table) for i, s in seqs.items()}
    counts = {i: len(s.prompt_token_ids) for i, s in seqs.items()}
    text = figure_alt(pool_figure(24, 4, tables, counts).to_dict())
    assert text.startswith(f"pool: {manager.num_free_blocks} of 24 blocks free; ")
    assert manager.num_free_blocks == 24 - 3 - 4  # 10 and 13 tokens in blocks of 4
    for i, seq in seqs.items():
        assert f"{'ABC'[i]} holds {', '.join(map(str, seq.block_table))}" in text
    assert "B holds" not in text
    html_text = markup_alt(pool_html(24, 4, tables, counts))
    assert html_text == text, "the HTML grid and the plotly grid say the same"


def test_refcount_pool_sentence_names_the_shared_blocks_in_chinese():
    """A block in two tables is counted once and named as shared; the words come in the language passed."""
    words = AltWords(pool="pool：{num_blocks} 个 block 中 {free} 个空闲", holds="{seq} 占用 {blocks}",
                     shared="多个序列共享：{blocks}", sep="；")
    tables = {0: [0, 1, 2], 1: [0, 1, 5]}
    refs = [2, 2, 1, 0, 0, 1, 0, 0]
    text = figure_alt(refcount_pool_figure(8, 4, tables, {0: 12, 1: 10}, refs).to_dict(), words)
    assert text == "pool：8 个 block 中 4 个空闲；A 占用 0, 1, 2；B 占用 0, 1, 5；多个序列共享：0, 1"


def test_line_and_bar_figures_read_their_own_numbers():
    """A line's clause gives its point count, x range, y range and last value; values drawn are the sentence's."""
    from viz.sharing import memory_figure

    held, table = [0, 10, 12, 15], [0, 10, 20, 30]
    fig = memory_figure([0, 1, 2, 3], held, table, 64, title="memory")
    text = figure_alt(fig.to_dict())
    numbers = [re.findall(r"\d+", clause) for clause in text.split("; ")]
    assert any(n[:1] == ["4"] and n[-3:] == [str(min(held)), str(max(held)), str(held[-1])] for n in numbers), text
    assert any(n[-3:] == [str(min(table)), str(max(table)), str(table[-1])] for n in numbers), text


def test_pool_sentence_lists_long_tables_in_part():
    """A table longer than MAX_ITEMS blocks lists its first 12 and counts the rest."""
    text = pool_sentence({"num_blocks": 40, "tables": [["A", list(range(20))]]})
    assert text == ("pool: 20 of 40 blocks free; A holds 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 … and 8 more")


def test_queues_read_lane_by_lane():
    """The scheduler's lanes as words: each lane's name and the sequences in it."""
    text = markup_alt(queues_html([2], [0, 1], []))
    assert text == "waiting: C; running: A, B; finished: —"
