"""Page 9's figures: the beam tree (which beam grew from which, pruned, finished) and the memory saving measured
against the paper's range. Pure: data in, figure out. The pool itself is viz.sharing.refcount_pool_figure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import plotly.graph_objects as go

from .colors import OKABE_ITO, seq_color, seq_label
from .figure import make_figure, title_layout


@dataclass(frozen=True)
class TreeWords:
    """The tree's hover sentences and legend names (a page passes them translated)."""

    beam: str = "beam {seq} · token {token} · running score {score}"
    pruned: str = "beam {seq} · token {token} · pruned: no continuation chose it, its blocks were freed"
    ended: str = "beam {seq} · token {token} · still running when the search ended"
    finished: str = "finished hypothesis from beam {seq} · token {token} · score {score}"
    root: str = "the prompt: every beam starts from its blocks"
    legend_beam: str = "running beam"
    legend_pruned: str = "pruned"
    legend_finished: str = "finished (EOS or max_tokens)"
    legend_ended: str = "still running at the end"
    x_title: str = "tokens generated"


MARKERS = {"root": "square", "beam": "circle", "ended": "circle-open", "pruned": "x", "finished": "star"}


def tree_figure(nodes: Sequence[Mapping], edges: Sequence[tuple], title: str = "",
                words: TreeWords = TreeWords()) -> go.Figure:
    """nodes: {key, depth, rank, seq_id, token, score, kind} (lessons.beam.BeamLesson.tree); edges: (parent key,
    child key). x = depth (tokens generated), y = rank at that depth (best on top; finished hypotheses below the
    live beams). Each node is its beam's colour with its token printed beside it. Traces: "edges", then one per kind
    present, named by its legend word (the root: words.root, not in the legend)."""
    at = {n["key"]: n for n in nodes}
    y = lambda n: -n["rank"] if n["kind"] != "finished" else n["rank"] - 0.5  # noqa: E731  hypotheses under the beams
    ex, ey = [], []
    for parent, child in edges:
        if parent in at and child in at:
            ex += [at[parent]["depth"], at[child]["depth"], None]
            ey += [y(at[parent]), y(at[child]), None]
    data = [dict(type="scatter", name="edges", x=ex, y=ey, mode="lines", hoverinfo="skip", showlegend=False,
                 line=dict(color="#999999", width=1.5))]
    legend = {"beam": words.legend_beam, "ended": words.legend_ended, "pruned": words.legend_pruned,
              "finished": words.legend_finished}
    for kind in ("root", "beam", "ended", "pruned", "finished"):
        group = [n for n in nodes if n["kind"] == kind]
        if not group:
            continue
        hover = [words.root if kind == "root" else getattr(words, kind).format(
            seq=seq_label(n["seq_id"]), token=n["token"], score=f"{n['score']:.3f}") for n in group]
        colors = ["#444444" if kind == "root" else seq_color(n["seq_id"]) for n in group]
        data.append(dict(type="scatter", name=legend.get(kind, words.root), x=[n["depth"] for n in group],
                         y=[y(n) for n in group],
                         mode="markers+text", text=[n["token"] for n in group], textposition="top center",
                         hovertext=hover, hoverinfo="text", showlegend=kind in legend,
                         marker=dict(symbol=MARKERS[kind], size=13 if kind != "finished" else 16, color=colors,
                                     line=dict(color=OKABE_ITO["black"], width=1))))
    depth = max([n["depth"] for n in nodes] + [1])
    layout = title_layout(title, 360, bottom=60)
    layout.update(xaxis=dict(title=dict(text=words.x_title), dtick=1, range=[-0.5, depth + 0.7], gridcolor="#EEEEEE"),
                  yaxis=dict(visible=False), legend=dict(orientation="h", y=-0.18, yanchor="top", x=0),
                  hovermode="closest")
    return make_figure(data, layout)


def savings_figure(rows: Sequence[Mapping], paper: tuple[float, float], title: str = "", paper_name: str = "",
                   x_title: str = "beam_width", y_title: str = "") -> go.Figure:
    """rows: {prompt, beam_width, saving} (lessons.beam.memory_savings); one line of markers per prompt over the
    beam widths, and the paper's range (§4.4) as a shaded band named paper_name; y_title names the saving in %
    (the page passes both translated). Traces: one per prompt, then the band."""
    prompts = list(dict.fromkeys(r["prompt"] for r in rows))
    widths = sorted({r["beam_width"] for r in rows})
    data = []
    for i, prompt in enumerate(prompts):
        mine = [r for r in rows if r["prompt"] == prompt]
        data.append(dict(type="scatter", name=repr(prompt), x=[r["beam_width"] for r in mine],
                         y=[round(r["saving"], 1) for r in mine], mode="lines+markers",
                         line=dict(color=seq_color(i), width=2), marker=dict(size=9)))
    lo, hi = paper
    xs = [min(widths + [2]) - 0.3, max(widths + [6]) + 0.3]
    data.append(dict(type="scatter", name=paper_name, x=xs + xs[::-1], y=[lo, lo, hi, hi], fill="toself",
                     fillcolor="rgba(0,114,178,0.12)", line=dict(color="rgba(0,114,178,0.5)", width=1),
                     hoverinfo="name", mode="lines"))
    layout = title_layout(title, 320, bottom=75)
    layout.update(xaxis=dict(title=dict(text=x_title), tickvals=widths, gridcolor="#E5E5E5"),
                  yaxis=dict(title=dict(text=y_title), range=[0, 100], gridcolor="#E5E5E5"),
                  legend=dict(orientation="h", y=-0.3, yanchor="top", x=0))
    return make_figure(data, layout)


def freed_overlay(fig, freed: Mapping[int, Sequence[int]], cols: int, hover: str = ""):
    """Mark the blocks freed this step (seq id -> its blocks released) on a viz.sharing.refcount_pool_figure drawn
    with `cols` columns: a vermillion cross on each, its hover `hover` filled with {block} and {seq}. Returns the
    figure with one more trace, "freed"."""
    xs, ys, hovers = [], [], []
    for seq_id, blocks in freed.items():
        for b in blocks:
            xs.append(b % cols)
            ys.append(b // cols)
            hovers.append(hover.format(block=b, seq=seq_label(seq_id)))
    fig.add_trace(dict(type="scatter", name="freed", x=xs, y=ys, mode="markers", hovertext=hovers, hoverinfo="text",
                       showlegend=False, marker=dict(symbol="x-thin", size=14, color=OKABE_ITO["vermillion"],
                                                     line=dict(width=3, color=OKABE_ITO["vermillion"]))))
    return fig
