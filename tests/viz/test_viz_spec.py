"""viz/spec.py: one speculative step as cells (kept, rejected, the model's own token, slots, freed blocks)."""

from viz.spec import SpecWords, StepRow, acceptance_figure, step_html


def test_step_html_marks_kept_rejected_and_freed():
    """Two guesses kept, one rejected: two green cells, one vermillion, its slot struck through, the freed block
    crossed out, the model's own token dashed; with the rollback broken the rejected slot is not struck."""
    row = StepRow(0, ["a", "b", "c", "x"], [9, 10, 11, 12], [40, 41, 42, 43], 2, "d", [10], [10])
    markup = step_html([row], SpecWords())
    assert markup.count('sp-kept"') == 2 and markup.count('sp-rejected"') == 1 and markup.count('sp-own"') == 1
    assert markup.count('sp-discarded"') == 1 and "✗10" in markup and "rejected, written then discarded" in markup
    broken = step_html([StepRow(0, ["a", "x"], [9, 10], [40, 41], 0, "d", [], [], rolled_back=False)])
    assert "sp-discarded\"" not in broken and "counted as cached (the bug)" in broken


def test_acceptance_figure_has_both_series():
    """The per-step figure has a bar trace for the proposed guesses and one for the kept ones, as given."""
    fig = acceptance_figure([1, 2], [4, 4], [4, 1], "t", "proposed", "kept", "step", "tokens")
    data = fig.to_dict()["data"]
    assert [d["name"] for d in data] == ["proposed", "kept"] and list(data[1]["y"]) == [4, 1]
