"""Page 4 · Engine, the teaching additions through AppTest, in both languages: the chain, live (the code shown is
the library's real source), and the state rule table of a chosen sequence."""

from __future__ import annotations

import html
import inspect
import textwrap

import pytest

from paged.block_manager import BlockManager
from paged.engine.scheduler import Scheduler
from paged.sequence import Sequence
from ui.strings import t
from viz.chain_live import chain_labels

from .app_util import app_test

ENGINE = "app_pages/4_Engine.py"


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def source(fn) -> str:
    """What inspect reads for `fn`, dedented (st.code drops the final newline)."""
    return textwrap.dedent(inspect.getsource(fn)).rstrip("\n")


def shown_titles(at) -> list[str]:
    """Figure titles as the page shows them: text above each figure (ui.show_figure takes them out of the figure)."""
    return [m.value for m in at.markdown if "paged-figure-title" in m.value]


def chain_markup(at) -> str:
    """The chain diagram's HTML (viz.chain_live: st.html, not a figure)."""
    found = [h.proto.body for h in at.get("html") if "paged-chain" in h.proto.body and "<style>" not in h.proto.body]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chain_lights_up_and_shows_the_real_code(lang):
    """Before a step every module is dimmed; after the first step (a prefill) the scheduler box carries the phase
    and the scheduled sequences, and the code under the picker is exactly inspect's source of the functions."""
    at = app_test(ENGINE, lang).run()
    no_exception(at)
    markup = chain_markup(at)
    assert any(html.escape(t("chain.title_none", lang)) in title for title in shown_titles(at))
    assert markup.count('class="pc-box') == 7 and "pc-on" not in markup
    at.button(key="engine.step").click().run()
    no_exception(at)
    markup = chain_markup(at)
    assert any(html.escape(t("chain.title", lang, step=1)) in title for title in shown_titles(at))
    texts = chain_labels(markup)
    assert any(x.startswith("prefill") and "A, B, C" in x for x in texts), texts
    assert at.code[0].value == source(Scheduler.schedule)
    at.radio(key="engine.chain_module").set_value("sequence_update").run()
    assert [c.value for c in at.code] == [source(f) for f in (Sequence.on_prefill_done, Sequence.on_chunk_done,
                                                               Sequence.on_decode_done)]
    at.radio(key="engine.chain_module").set_value("free_blocks").run()
    assert at.code[-1].value == source(BlockManager.free)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_state_rule_table_for_a_chosen_sequence(lang):
    """Three steps in: B's rows are one prefill then two decodes; each decode feeds the token the previous row
    generated; the table's columns are in the page's language."""
    at = app_test(ENGINE, lang).run()
    for _ in range(3):
        at.button(key="engine.step").click().run()
    at.selectbox(key="engine.rule_seq").set_value(1).run()
    no_exception(at)
    rows = at.session_state["engine.rule_rows"]
    assert [r.phase for r in rows] == ["prefill", "decode", "decode"]
    assert rows[1].fed == (rows[0].generated[-1],) and rows[2].fed == (rows[1].generated[-1],)
    tables = [d.value for d in at.table if t("chain.col_fed", lang) in d.value.columns]
    assert len(tables) == 1
    table = tables[0]  # ui.state_table: the step is the row label
    assert table.index.name == t("chain.col_step", lang) and list(table.columns)[0] == t("chain.col_phase", lang)
    assert len(table) == 3 and table.iloc[2][t("chain.col_cached", lang)] == \
        f"{rows[2].cached_before} → {rows[2].cached_after}"
    # slots written: runs of neighbours, never one range over slots that are not contiguous (issue 27)
    written = table.iloc[0][t("chain.col_slot", lang)].replace("\u2060", "")  # word joiners around each dash
    runs = [piece.split("–") for piece in written.split(", ") if piece[0].isdigit()]
    covered = [s for r in runs for s in range(int(r[0]), int(r[-1]) + 1)]
    assert covered == list(rows[0].slots[:len(covered)]) and len(runs) <= 2
    generated = table.iloc[2][t("chain.col_generated", lang)]  # the count, then text: no raw id list like "[84]"
    assert generated.startswith(f"{len(rows[2].generated)} · ") and "[" not in generated
    fed = rows[2].fed[0]  # a decode feeds one token: shown as its visible piece and its id
    piece = "␣" if fed == ord(" ") else chr(fed) if 33 <= fed < 127 else None
    if piece is not None:
        assert table.iloc[2][t("chain.col_fed", lang)] == f"{piece} ({fed})"
