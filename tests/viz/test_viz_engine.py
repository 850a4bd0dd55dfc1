"""Engine and sharing figure builders: the right traces, one stable colour per sequence, labels and slots printed,
the state rule drawn next to the cached counts, twin diffs judged against the tolerance, ref counts printed per
block with shared blocks outlined, copy-on-write arrows, hits per logical block. Built with plotly's validation on."""

from __future__ import annotations

import pytest

from viz.colors import FREE_COLOR, OKABE_ITO, seq_color
from viz.cells import (QueueWords, SlotWords, TwinWords, queues_html, read_bars, read_cells, slot_mapping_html,
                        twin_diff_html)
import base64
import html
import re

from viz.engine import cache_rule_html, nice_step
from viz.sharing import (CACHED_FREE_COLOR, COPY_COLOR, HIT_COLOR, MISS_COLOR, hits_html, memory_figure,
                         refcount_pool_figure)
from viz_util import trace

pytestmark = pytest.mark.usefixtures("validate_figures")  # conftest: plotly validation on


def test_queues_lanes_labels_and_colours():
    """Each lane lists its sequences by label in their own colour; scheduled and preempted are outlined."""
    import re
    words = QueueWords("w", "r", "f", "{seq}|{seq_id}|{lane}")
    markup = queues_html([2], [0, 3], [1], preempted=[2], scheduled=[0, 3], words=words)
    lanes = dict(re.findall(r'data-lane="(\w+)">(.*?)</div></div>', markup))
    cells = {lane: read_cells(body) for lane, body in lanes.items()}
    assert [c["text"] for c in cells["waiting"]] == ["C"] and [c["text"] for c in cells["running"]] == ["A", "D"]
    assert [c["color"] for c in cells["running"]] == [seq_color(0), seq_color(3)]
    assert [c["color"] for c in cells["finished"]] == [seq_color(1)]
    assert ["pg-sched" in c["classes"] for c in cells["running"]] == [True, True]
    assert "pg-pre" in cells["waiting"][0]["classes"] and "pg-sched" not in cells["waiting"][0]["classes"]
    assert cells["running"][1]["title"] == "D|3|r"  # the page's words
    assert read_cells(queues_html([], [3], []))[0]["title"] == "D (seq 3): running"  # English by default
    # the same sequence keeps its colour wherever it is
    again = read_cells(queues_html([], [], [0, 1, 2, 3]))
    assert [c["color"] for c in again] == [seq_color(s) for s in range(4)]


def test_slot_mapping_prints_slots_and_wraps():
    """One cell per fed token with its slot, in feed order, one row per sequence wrapping after max_cols cells;
    the tooltip holds the address chain; text is escaped; bad input is refused."""
    positions = list(range(40))
    slots = [(7 if p < 4 else 2) * 4 + p % 4 for p in positions]
    markup = slot_mapping_html([(0, positions, slots), (1, [5], [13])], block_size=4, max_cols=32)
    cells = read_cells(markup)
    assert [c["text"] for c in cells[:5]] == ["28", "29", "30", "31", "8"] and len(cells) == 41
    assert cells[4]["title"] == "A token 4 → logical block 1, offset 0 → slot 8 (physical block 2, offset 0)"
    assert cells[0]["color"] == seq_color(0) and cells[40]["color"] == seq_color(1)
    assert markup.count('class="pg-row"') == 2 and f"max-width:{32 * 29}px" in markup
    assert "\n" not in markup
    skipped = read_cells(slot_mapping_html([(1, [6], [-1])], block_size=4, words=SlotWords(
        token="{seq}|{position}|{logical}|{offset}|{slot}|{where}", place="P{block}/{offset}", skipped="SKIP")))
    assert skipped[0]["title"] == "B|6|1|2|-1|SKIP"  # a page's words, the skipped slot's among them
    with pytest.raises(ValueError, match="positions but"):
        slot_mapping_html([(0, [1, 2], [3])], block_size=4)
    with pytest.raises(ValueError, match="block_size"):
        slot_mapping_html([], block_size=0)


def test_cache_rule_html_draws_both_lines_with_their_values_as_tooltips():
    """Per sequence a dotted rule line and a solid cached line in its colour, one dot per step at the cached value
    whose tooltip gives both values at that step; a legend names each sequence in its colour; the y axis reaches
    the largest value (7 → 8, ticks of 2); text is escaped; mismatched lengths are refused."""
    series = {0: {"step": [1, 2, 3], "cached": [5, 6, 0], "rule": [5, 6, 7]},
              2: {"step": [1, 2], "cached": [3, 4], "rule": [3, 4]}}
    markup = cache_rule_html(series, rule_name="<rule>", y_title="tokens & more")
    svg = base64.b64decode(re.search(r'src="data:image/svg\+xml;base64,([^"]*)"', markup).group(1)).decode()
    groups = re.findall(r'<g data-seq="(\w)"><polyline class="rule" points="([^"]*)" fill="none" stroke="([^"]*)" '
                        r'stroke-width="2" stroke-dasharray="[^"]*"/><polyline class="cached" points="([^"]*)"', svg)
    assert [(g[0], g[2]) for g in groups] == [("A", seq_color(0)), ("C", seq_color(2))]
    a_rule = [float(p.split(",")[1]) for p in groups[0][1].split()]
    a_cached = [float(p.split(",")[1]) for p in groups[0][3].split()]
    assert a_rule[:2] == a_cached[:2] and a_cached[2] > a_rule[2], "A's preempted step drops to 0, under its rule"
    tips = [html.unescape(t) for t in re.findall(r'<span class="pc-dot" style="[^"]*" title="([^"]*)"></span>', markup)]
    assert len(tips) == 5 and tips[2] == "A step 3: cached_token_count = 0\nA step 3: <rule> = 7"
    assert tips[3] == "C step 1: cached_token_count = 3\nC step 1: <rule> = 3"
    worded = cache_rule_html({0: {"step": [2], "cached": [4], "rule": [4]}}, tip="{seq}<{step}>{name}={value}")
    tips = [html.unescape(t) for t in re.findall(r'class="pc-dot" style="[^"]*" title="([^"]*)"', worded)]
    assert tips == ["A<2>cached_token_count=4\nA<2>prompt_len + generated − 1=4"]  # a page's words, escaped
    assert 'title="A step 3: cached_token_count = 0&#10;A step 3: &lt;rule&gt; = 7"' in markup, "escaped, one line"
    keys = re.findall(r'<span class="pp-key"><span style="background:([^"]*)"></span>(\w)</span>', markup)
    assert keys == [(seq_color(0), "A"), (seq_color(2), "C")]
    assert "\n" not in markup, "one line of markup"
    assert ">8</text>" in svg and ">10</text>" not in svg and "tokens &amp; more" in svg
    assert nice_step(7) == 2 and nice_step(300) == 50 and nice_step(301) == 100 and nice_step(5) == 1
    with pytest.raises(ValueError):
        cache_rule_html({0: {"step": [1], "cached": [1, 2], "rule": [1]}})


def test_twin_diff_html_bars_heights_colours_and_hover():
    """The HTML twins chart: one bar per step on the 1e-10 … 1e0 log axis (height by hand: log10 of the diff, an
    exact 0 at the 1e-9 floor), blue within tolerance and agreeing, vermillion otherwise (also when the tokens
    disagree under tolerance), the step, diff and verdict as hover; the tolerance line sits at log10(1e-4) = 60 %;
    text is escaped."""
    args = ([1, 2, 3], [0.0, 3e-7, 5e-3], [True, True, True], 1e-4)
    markup = twin_diff_html(*args, x_title="<step>")
    bars = read_bars(markup)
    assert [b["step"] for b in bars] == [1, 2, 3]
    assert [b["color"] for b in bars] == [OKABE_ITO["blue"], OKABE_ITO["blue"], OKABE_ITO["vermillion"]]
    assert [b["height"] for b in bars] == pytest.approx([10.0, 34.77, 76.99], abs=0.01)
    assert [b["title"] for b in bars] == ["step 1: 0.00e+00 ✔", "step 2: 3.00e-07 ✔", "step 3: 5.00e-03 ✗"]
    assert 'class="pb-tol" style="bottom:60.00%"' in markup
    assert "&lt;step&gt;" in markup and "<step>" not in markup
    assert 'title="tolerance 1e-04"' in markup
    worded = twin_diff_html(*args, words=TwinWords(bar="{verdict}#{step}#{diff}", tolerance="<{tolerance}>"))
    assert [b["title"] for b in read_bars(worded)] == ["✔#1#0.00e+00", "✔#2#3.00e-07", "✗#3#5.00e-03"]
    assert 'title="&lt;1e-04&gt;"' in worded  # a page's words, escaped
    assert read_bars(twin_diff_html([1], [1e-7], [False], 1e-4))[0]["color"] == OKABE_ITO["vermillion"]
    assert markup.count('class="pb-slot"') == 10, "one slot per step up to at least 10"


@pytest.mark.parametrize("args", [([1, 2], [0.0], [True], 1e-4), ([1], [0.0], [True], 0.0),
                                  ([0], [0.0], [True], 1e-4)])
def test_twin_diff_html_rejects_bad_input(args):
    with pytest.raises(ValueError):
        twin_diff_html(*args)


def test_refcount_pool_figure_prints_ref_counts_and_outlines_shared():
    """Block 5 held by A, B and C shows "3" and is outlined with three holder dots; a cached free block shows ♻;
    a copy-on-write pair is outlined and joined by an arrow."""
    tables = {0: [5, 1], 1: [5, 2], 2: [5]}
    refs = [0] * 8
    for t in tables.values():
        for b in t:
            refs[b] += 1
    fig = refcount_pool_figure(8, 4, tables, {0: 6, 1: 5, 2: 4}, refs, cached=[5, 6], copies=[(1, 2)], cols=4)
    blocks = trace(fig, "blocks")
    assert blocks.text[5] == "<b>3</b>" and blocks.text[1] == "<b>1</b>"
    assert blocks.text[6] == "♻" and blocks.marker.color[6] == CACHED_FREE_COLOR
    assert blocks.text[7] == "" and blocks.marker.color[7] == FREE_COLOR
    assert blocks.marker.color[5] == seq_color(0), "a shared block takes its first holder's colour"
    assert "ref count 3" in blocks.hovertext[5] and "C (logical block 0)" in blocks.hovertext[5]
    assert list(trace(fig, "shared").customdata) == [5]
    assert list(trace(fig, "holders").marker.color) == [seq_color(0), seq_color(1), seq_color(2)]
    assert list(trace(fig, "copy-on-write").customdata) == [1, 2]
    (arrow,) = fig.layout.annotations  # the head ends on block 2's top edge, coming down from above
    assert arrow.x == pytest.approx(2) and arrow.y == pytest.approx(-0.42) and arrow.ay < arrow.y
    assert arrow.arrowcolor == COPY_COLOR
    arc = trace(fig, "copy arcs")
    assert (arc.x[0], arc.x[-2]) == pytest.approx((1, 2)) and arc.x[-1] is None  # block 1 → 2
    assert list(trace(fig, "block ids").text) == [str(b) for b in range(8)]


def test_copies_of_one_block_are_separate_arcs_not_a_chain():
    """Issue 38: block 3 copied to 4, 5 and 6 (one row). Straight arrows ran along the row through
    the cells between ("3→4, 3→5, 3→6" read as a chain): each copy is an arc from 3's top edge over
    the row to its own target's, the farther target's arc higher, every point of an arc above the
    cells' tops, and the figure grows to hold them."""
    refs, lens = [0, 0, 0, 1, 1, 1, 1, 0], dict.fromkeys(range(4), 4)
    tables = {0: [3], 1: [4], 2: [5], 3: [6]}
    plain = refcount_pool_figure(8, 4, tables, lens, refs, cols=8)
    fig = refcount_pool_figure(8, 4, tables, lens, refs, copies=[(3, 4), (3, 5), (3, 6)], cols=8)
    arc = trace(fig, "copy arcs")
    xs, ys = list(arc.x), list(arc.y)
    arcs = []
    while xs:
        end = xs.index(None)
        arcs.append((xs[:end], ys[:end]))
        xs, ys = xs[end + 1:], ys[end + 1:]
    assert [(a[0][0], a[0][-1]) for a in arcs] == [(3, 4), (3, 5), (3, 6)]
    assert all(y <= -0.42 + 1e-9 for _, ys in arcs for y in ys), "an arc dips into the row's cells"
    peaks = [min(ys) for _, ys in arcs]
    assert peaks[0] > peaks[1] > peaks[2], peaks  # nested: the farther copy rises higher
    heads = fig.layout.annotations
    assert sorted(round(a.x) for a in heads) == [4, 5, 6]
    assert fig.layout.yaxis.range[1] < min(peaks) and fig.layout.height > plain.layout.height


def test_block_ids_stay_readable_on_a_shared_block():
    """The shared outline runs around the cell (a marker as large as the cell's pitch, larger than the cell's own)
    and the block ids are drawn after it, on top, so the outline never covers a shared block's id."""
    fig = refcount_pool_figure(4, 4, {0: [1], 1: [1]}, {0: 4, 1: 4}, [0, 2, 0, 0], cols=4)
    names = [tr.name for tr in fig.data]
    assert names[-1] == "block ids" and names.index("shared") < names.index("block ids")
    assert trace(fig, "shared").marker.size > trace(fig, "blocks").marker.size


def test_memory_figure_shades_the_saving():
    fig = memory_figure([0, 1, 2], [0, 10, 12], [0, 10, 20], 64, held_name="held", without_name="tables")
    assert list(trace(fig, "held").y) == [0, 10, 12] and trace(fig, "held").fill == "tonexty"
    assert list(trace(fig, "tables").y) == [0, 10, 20] and list(trace(fig, "num_blocks").y) == [64, 64]
    (label,) = fig.layout.annotations  # the dashed line is named (it has no legend entry)
    assert label.text == "num_blocks = 64" and label.y == 64 and label.yanchor == "top"


def test_hits_html_rows_cells_and_tooltips():
    """One row per allocation, newest first as given: B's two blocks 5 (hit, blue) and 7 (computed, orange), the
    physical block printed, the mapping and verdict as tooltip; rows cut at max_cols; names escaped; mismatched
    lengths refused."""
    rows = [(2, 1, [5, 7], [True, False]), (1, 0, [5, 6], [False, False])]
    markup = hits_html(rows, hit_name="<hit>")
    cells = read_cells(markup)
    assert [c["text"] for c in cells] == ["5", "7", "5", "6"]
    assert [c["color"] for c in cells] == [HIT_COLOR, MISS_COLOR, MISS_COLOR, MISS_COLOR]
    assert cells[0]["title"] == "B logical block 0 → physical block 5: prefix-cache hit, K/V reused"
    assert [c["title"] for c in cells[1:]] == ["B logical block 1 → physical block 7: computed at prefill",
                                              "A logical block 0 → physical block 5: computed at prefill",
                                              "A logical block 1 → physical block 6: computed at prefill"]
    assert re.findall(r'<div class="pg-name">([^<]*)</div>', markup) == ["B · step 2", "A · step 1"]
    assert [c["text"] for c in read_cells(hits_html(rows, max_cols=1))] == ["5", "5"]
    assert markup.index("B · step 2") < markup.index("A · step 1") and "&lt;hit&gt;" in markup
    with pytest.raises(ValueError):
        hits_html([(1, 0, [5], [])])


def test_hits_html_takes_its_words_from_the_labels_given():
    """Row names and tooltips are the caller's words (a page passes its language's)."""
    from viz.sharing import HitsLabels

    words = HitsLabels(row="<{seq}@{step}>", entry="{seq}|{logical}|{block}|{verdict}", hit="HIT", miss="MISS")
    markup = hits_html([(2, 1, [5, 7], [True, False])], labels=words)
    assert [c["title"] for c in read_cells(markup)] == ["B|0|5|HIT", "B|1|7|MISS"]
    assert re.findall(r'<div class="pg-name">([^<]*)</div>', markup) == ["&lt;B@2&gt;"]


def test_refcount_pool_hover_takes_its_words_from_the_words_given():
    """Held, cached-free and free blocks' hovers are the caller's sentences (a page passes its language's)."""
    from viz.sharing import RefcountWords, refcount_pool_figure

    words = RefcountWords(held="H{block}:{ref}:{holders}:{filled}/{block_size}", holder="{seq}@{logical}",
                          hashed="+HASH", cached_free="C{block}", free="F{block}")
    fig = refcount_pool_figure(4, 2, {0: [1, 2], 1: [1]}, {0: 3, 1: 2}, [0, 2, 1, 0], cached=[3], words=words)
    hover = next(tr for tr in fig.to_dict()["data"] if tr["name"] == "blocks")["hovertext"]
    assert hover == ["F0", "H1:2:A@0, B@0:2/2", "H2:1:A@1:1/2", "C3"]


def test_charts_of_the_newest_steps_start_at_their_first_step():
    """twin_diff_html from first_step 5: slots 5 … 14 only (bars at 5 and 6), a step below it is refused;
    cache_rule_html from first_step 100: its x ticks start at 100 (no tick left of the window) and its dots sit
    inside the plot."""
    markup = twin_diff_html([5, 6], [1e-6, 1e-5], [True, True], 1e-4, first_step=5)
    assert [b["step"] for b in read_bars(markup)] == [5, 6] and markup.count('class="pb-slot"') == 10
    with pytest.raises(ValueError, match="first_step"):
        twin_diff_html([4, 6], [1e-6, 1e-5], [True, True], 1e-4, first_step=5)
    series = {0: {"step": [100, 101, 102], "cached": [5, 6, 7], "rule": [5, 6, 7]}}
    svg = base64.b64decode(re.search(r'base64,([^"]*)"', cache_rule_html(series, first_step=100)).group(1)).decode()
    ticks = [int(x) for x in re.findall(r'text-anchor="middle" fill="#444444">(\d+)</text>', svg)]
    assert ticks and min(ticks) >= 100 and 100 in ticks
    xs = [float(p.split(",")[0]) for p in re.search(r'class="cached" points="([^"]*)"', svg).group(1).split()]
    assert all(52 <= x <= 640 - 12 for x in xs)
