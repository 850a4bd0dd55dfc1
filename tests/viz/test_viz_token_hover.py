"""Token text in the pool figures' hover: each written cell of the pool grid names its token next to its address
chain, each held block of the ref-count grid lists the tokens its holder wrote there; the text is HTML-escaped (a
"<s>" piece stays text in plotly's hover), and cells not written yet name no token."""

from __future__ import annotations

import pytest

from viz.pool import pool_figure
from viz.sharing import RefcountWords, refcount_pool_figure
from viz_util import trace

pytestmark = pytest.mark.usefixtures("validate_figures")  # conftest: plotly validation on

TABLES = {0: [3, 1], 1: [0]}
LENS = {0: 6, 1: 3}
TEXTS = {0: ["<s>", "The", "␣fox", "'s", "␣quick", "&", "unwritten"], 1: ["x", "y", "z"]}


def test_each_written_cell_names_its_token_after_its_chain():
    """A's token 1 sits at block 3 offset 1: its hover is its chain then "· token 'The'"; "<s>" and "&" arrive
    escaped (a quote is left as it is: plotly knows no &quot;); B's cells carry B's text; A's reserved slots
    (tokens 6, 7) name none, though a text exists for 6."""
    fig = pool_figure(4, 4, TABLES, LENS, token_text=TEXTS)
    hover = list(trace(fig, "A").hovertext)
    chain = "A token 1 → logical block 0 → physical block 3 → offset 1 → slot 13"
    assert f"{chain} · token 'The'" in hover
    assert any(h.endswith("· token '&lt;s&gt;'") for h in hover)
    assert any(h.endswith("· token '&amp;'") for h in hover)
    assert any(h.endswith("· token ''s'") for h in hover)
    assert not any("unwritten" in h for h in hover)
    assert sum("· token '" in h for h in hover) == LENS[0]
    assert [h.rsplit("'", 2)[1] for h in trace(fig, "B").hovertext if "token '" in h] == ["x", "y", "z"]


def test_without_token_text_the_hover_is_the_chain_alone():
    """No token_text (or a sequence missing from it): the hover is unchanged, the address chain only."""
    for texts in (None, {1: ["x", "y", "z"]}):
        hover = list(trace(pool_figure(4, 4, TABLES, LENS, token_text=texts), "A").hovertext)
        assert "A token 1 → logical block 0 → physical block 3 → offset 1 → slot 13" in hover
        assert not any("· token" in h for h in hover)


def test_refcount_blocks_list_the_tokens_written_in_them():
    """Block 3 is A's logical block 0 (4 tokens written), block 1 its logical block 1 (2 of 4 written): each hover
    lists exactly those tokens, escaped; a free block lists none."""
    refs = [1, 1, 0, 1]
    fig = refcount_pool_figure(4, 4, TABLES, LENS, refs, token_text=TEXTS)
    hover = list(trace(fig, "blocks").hovertext)
    assert hover[3].endswith("· tokens '&lt;s&gt;' 'The' '␣fox' ''s'")
    assert hover[1].endswith("· tokens '␣quick' '&amp;'")
    assert hover[0].endswith("· tokens 'x' 'y' 'z'")
    assert "tokens" not in hover[2]
    worded = refcount_pool_figure(4, 4, TABLES, LENS, refs, token_text=TEXTS, words=RefcountWords(tokens="|{tokens}|"))
    assert trace(worded, "blocks").hovertext[0].endswith("|'x' 'y' 'z'|")  # a page's words around the texts
