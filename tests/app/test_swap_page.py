"""Page 10 · Swap or recompute through AppTest: both modes side by side in both languages, Step / Back through the
URL, a break-it caught by the twin, the quiz, and the live measurement behind its button."""

from __future__ import annotations

from ui.strings import t
from viz.cells import read_cells

from .app_util import app_test, no_exception

SWAP = "app_pages/10_Swap_or_recompute.py"


def click(at, key: str, times: int = 1):
    for _ in range(times):
        at.button(key=key).click().run()
    no_exception(at)
    return at


def texts(at) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def test_both_modes_at_the_first_swap_in_both_languages():
    """At the step of the first swap-out, the swap column says what left for the swap pool and the recompute column
    what it freed, in the chosen language; Back goes one step back and the URL follows."""
    for lang in ("en", "zh"):
        at = app_test(SWAP, lang).run()
        no_exception(at)
        lesson = at.session_state["swap.lesson"]
        out = next(i + 1 for i, s in enumerate(lesson.swap.steps) if s.trace.swap_out)
        sid, pairs = next(iter(lesson.swap.steps[out - 1].trace.swap_out.items()))
        at = app_test(SWAP, lang, {"step": out - 1}).run()
        click(at, "swap.step_btn")
        assert at.query_params["step"] == str(out)
        shown = texts(at)
        assert t("swap.col_swap", lang) in [h.value for h in at.subheader]
        moved = [m.value for m in at.markdown if m.value.startswith(":material/upload:")]
        assert len(moved) == 1 and str([a for a, _ in pairs]) in moved[0] and str([b for _, b in pairs]) in moved[0]
        assert any(m.value.startswith(":material/delete:") for m in at.markdown), "recompute freed the same victim"
        assert t("swap.cell_swap_pool", lang) in "".join(str(h.proto) for h in at.get("html"))
        click(at, "swap.back")
        assert at.query_params["step"] == str(out - 1)


def test_break_it_is_caught_by_the_twin():
    """With the K/V not copied back, the page names the step where the contiguous twin parts from swap mode."""
    at = app_test(SWAP, "en", {"break": "no_copy", "step": 40}).run()
    no_exception(at)
    step = at.session_state["swap.lesson"].twin_break()
    assert step is not None and any(f"step {step}" in e.value for e in at.error)


def test_quiz_and_measurement():
    """quiz=1 shows a question; the measure button draws the cost figure and its table."""
    at = app_test(SWAP, "zh", {"quiz": 1}).run()
    no_exception(at)
    assert any(t("quiz.header", "zh") in m.value for m in at.markdown)
    click(at, "swap.measure")
    assert len(at.get("plotly_chart")) == 1 and at.session_state["swap.measured"]
    assert [r["block_size"] for r in at.session_state["swap.measured"]] == [1, 4, 16, 64]


def test_a_block_taken_in_the_step_it_was_left_is_not_ringed_as_left():
    """Issue 38.2: at the step where C is preempted and A and B take a block each, those blocks' hovers say they
    were taken this step and name C, and only C's other blocks read "left this step" (read from the trace)."""
    at = app_test(SWAP, "en").run()
    lesson = at.session_state["swap.lesson"]
    k, state = next((i + 1, s) for i, s in enumerate(lesson.swap.steps) if s.trace.preempted)
    at = app_test(SWAP, "en", {"step": k}).run()
    no_exception(at)
    t_ = state.trace
    freed = {b for sid in t_.preempted for b in t_.blocks_freed[sid]}
    taken = {b for bs in t_.blocks_allocated.values() for b in bs} & freed
    assert taken, "the default scenario hands blocks over in the preempting step"
    markup = next(h.proto.body for h in at.get("html") if 'data-pool="pool"' in h.proto.body)
    cells = read_cells(markup)[:lesson.config.num_blocks]
    for block, cell in enumerate(cells):
        left = "left this step" in cell["title"]
        assert left == (block in freed - taken), (block, cell["title"])
        if block in taken:
            assert "taken this step" in cell["title"] and "C left it" in cell["title"]
