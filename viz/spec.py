"""Page 12's diagrams: one speculative step per sequence as HTML cells (viz.cells' classes, so presenter mode
enlarges them), and the acceptance over the steps as a plotly figure.

A step's row for a sequence: the token fed first (its last known token), then each guess, green when the model
agreed (kept), vermillion when it did not (its K/V written, then discarded), and the model's own token after them
(dashed: known, not yet cached). Under it, the slots written (struck through when discarded) and the blocks the
guesses took, a freed one crossed out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .cells import _cell, _row
from .colors import OKABE_ITO, seq_color, seq_label
from .figure import make_figure, title_layout

KEPT, REJECTED, OWN = OKABE_ITO["bluish_green"], OKABE_ITO["vermillion"], "#FFFFFF"


@dataclass(frozen=True)
class SpecWords:
    """The diagram's words (English by default; the page passes its language's, ui/strings/spec.py "cell_*").
    Tooltip format fields: {seq} {token} {position} {slot}."""

    fed: str = "{seq} fed its last known token {token} at position {position} → slot {slot}"
    kept: str = "guess {token} at position {position} → slot {slot}: the model agreed, kept"
    rejected: str = "guess {token} at position {position} → slot {slot}: rejected, written then discarded"
    kept_bug: str = "guess {token} at position {position} → slot {slot}: rejected, yet counted as cached (the bug)"
    own: str = "the model's own token {token}: known, not yet cached (fed next step)"
    slots: str = "slots"
    blocks: str = "blocks"
    taken: str = "block {block}: taken for this step's guesses"
    freed: str = "block {block}: held only rejected guesses, freed by the rollback"


@dataclass(frozen=True)
class StepRow:
    """One sequence in one step, for the diagram (lessons.spec.SeqSpec with its token texts)."""

    seq_id: int
    texts: Sequence[str]  # fed tokens' texts: last known token, then the guesses
    positions: Sequence[int]
    slots: Sequence[int]
    accepted: int
    own_text: str | None  # the model's own token (None when the step stopped on a kept guess)
    blocks_taken: Sequence[int]
    blocks_freed: Sequence[int]
    rolled_back: bool = True


def _shown(text: str) -> str:
    return "␣" if text == " " else text


def step_html(rows: Sequence[StepRow], words: SpecWords = SpecWords()) -> str:
    """Three lines per sequence: fed tokens (+ the model's own), their slots, the blocks taken / freed."""
    out = []
    for r in rows:
        label, color = seq_label(r.seq_id), seq_color(r.seq_id)
        cells = []
        for i, (text, pos, slot) in enumerate(zip(r.texts, r.positions, r.slots)):
            fields = dict(seq=label, token=repr(text), position=pos, slot=slot)
            if i == 0:
                cells.append(_cell(_shown(text), color, words.fed.format(**fields)))
            elif i <= r.accepted:
                cells.append(_cell(_shown(text), KEPT, words.kept.format(**fields), " sp-kept"))
            else:
                tip = words.rejected if r.rolled_back else words.kept_bug
                cells.append(_cell(_shown(text), REJECTED, tip.format(**fields), " sp-rejected"))
        if r.own_text is not None:
            cells.append(_cell(_shown(r.own_text), OWN, words.own.format(token=repr(r.own_text)), " pg-pre sp-own"))
        out.append(_row(label, cells))
        slot_cells = [_cell(str(s), "#FFFFFF" if 0 < i <= r.accepted or i == 0 else "#DDDDDD", str(s),
                            " sp-discarded" if i > r.accepted and r.rolled_back else "")
                      for i, s in enumerate(r.slots)]
        out.append(_row(words.slots, slot_cells))
        freed = set(r.blocks_freed)
        block_cells = [_cell(("✗" if b in freed else "") + str(b), "#DDDDDD" if b in freed else "#FFFFFF",
                             (words.freed if b in freed else words.taken).format(block=b),
                             " sp-freed" if b in freed else "") for b in r.blocks_taken]
        if block_cells:
            out.append(_row(words.blocks, block_cells))
    style = ('<style>.paged-cells .sp-discarded, .paged-cells .sp-freed { text-decoration: line-through; }'
             '.paged-cells .sp-own { border-style: dashed; }</style>')
    return style + '<div class="paged-cells">' + "".join(out) + "</div>"


def acceptance_figure(steps: Sequence[int], proposed: Sequence[int], accepted: Sequence[int], title: str,
                      proposed_name: str, accepted_name: str, x_title: str, y_title: str):
    """Guesses proposed and accepted per step (bars side by side, colour-blind safe)."""
    data = [dict(type="bar", x=list(steps), y=list(proposed), name=proposed_name,
                 marker=dict(color=OKABE_ITO["sky_blue"])),
            dict(type="bar", x=list(steps), y=list(accepted), name=accepted_name, marker=dict(color=KEPT))]
    layout = title_layout(title, 300, bottom=75)
    layout.update(barmode="group", legend=dict(orientation="h", y=-0.3, yanchor="top", x=0),
                  xaxis=dict(title=dict(text=x_title), gridcolor="#E5E5E5"),
                  yaxis=dict(title=dict(text=y_title), gridcolor="#E5E5E5", rangemode="tozero"))
    return make_figure(data, layout)
