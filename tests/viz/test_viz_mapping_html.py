"""viz.mapping.mapping_html: the block tables as an image (page 3), every table entry a line to its physical block."""

from __future__ import annotations

import re

import pytest

from viz.colors import FREE_COLOR, seq_color
from viz.mapping import mapping_html, read_mapping

TABLES, LENS = {0: [7, 2, 9], 1: [4, 1], 2: [0, 5, 6, 11]}, {0: 10, 1: 6, 2: 13}


def attrs(svg: str, tag: str) -> list[dict]:
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', m)) for m in re.findall(rf"<{tag} ([^>]*)/?>", svg)]


def test_one_line_per_table_entry_ending_on_its_physical_block():
    svg, tips = read_mapping(mapping_html(TABLES, LENS, 4, 12, new_blocks={2: [11]}))
    links = attrs(svg, "line")
    want = sorted((label, str(b)) for label, s in zip("ABC", TABLES) for b in TABLES[s])
    assert sorted((a["data-seq"], a["data-block"]) for a in links) == want
    boxes = {a["data-block"]: a for a in attrs(svg, "rect") if "data-block" in a}
    assert sorted(boxes, key=int) == [str(b) for b in range(12)]
    for a in links:  # the line ends on the centre of its physical box
        box = boxes[a["data-block"]]
        assert float(a["x2"]) == pytest.approx(float(box["x"]) + float(box["width"]) / 2, abs=0.1)
    assert [(a["data-seq"], a["data-block"]) for a in links if "new" in a["class"]] == [("C", "11")]
    assert "C logical block 3 → physical block 11 (tokens 12–12)" in tips
    assert "A logical block 2 → physical block 9 (tokens 8–9)" in tips
    assert "physical block 3: free" in tips and "physical block 4: B" in tips
    assert len(tips) == 9 + 12  # one per logical box, one per physical box
    colour = dict(zip("ABC", map(seq_color, TABLES)))
    assert all(a["stroke"] == colour[a["data-seq"]] for a in links)  # a line in its sequence's colour
    assert boxes["7"]["fill"] == seq_color(0) and boxes["3"]["fill"] == FREE_COLOR  # held by A; free


def test_bad_sizes_are_refused_by_name():
    with pytest.raises(ValueError, match="num_blocks=0"):
        mapping_html({}, {}, 4, 0)


def test_every_word_comes_from_the_labels_given():
    """The row labels, the image's alt text and every tooltip are the caller's words (a page passes its language's)."""
    from viz.mapping import MappingLabels

    words = MappingLabels(logical="LOG", physical="PHY", entry="<{seq}|{logical}|{block}|{tokens}>",
                          tokens="t{first}-{last}", no_tokens="NONE", block="P{block}={owner}", free="FREE", alt="ALT")
    markup = mapping_html({0: [2, 0], 1: [3]}, {0: 5, 1: 0}, 4, 5, labels=words)
    svg, tips = read_mapping(markup)
    assert ">LOG</text>" in svg and ">PHY</text>" in svg and 'alt="ALT"' in markup
    assert tips == ["<A|0|2|t0-3>", "<A|1|0|t4-4>", "<B|0|3|NONE>", "P0=A", "P1=FREE", "P2=A", "P3=B", "P4=FREE"]
