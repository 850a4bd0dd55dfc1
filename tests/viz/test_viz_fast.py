"""Page 7 figures (the kernel ladder, its sweeps, the memory-waste story) built with plotly's validation on, plus the
small helpers that turn a ladder run into their data (config bounds, per-impl series)."""

from __future__ import annotations

import pytest

from benchmarks.kernels import CaseResult, ImplResult, KernelCase
from lessons.fast import LOOP_MAX_TOKENS, LadderConfig, series
from viz.colors import HIGHLIGHT_COLOR, OKABE_ITO
from viz.fast import (IMPL_STYLE, fit_figure, fragmentation_figure, ladder_figure, sweep_figure,
                            trace_figure, waste_figure)
from viz_util import trace

pytestmark = pytest.mark.usefixtures("validate_figures")  # conftest: plotly validation on


def test_ladder_bars_in_order_with_verdict_time_and_ratio():
    """One bar per rung, top to bottom as given, log time axis; each bar's text holds ✔/✗, ms and × SDPA; a wrong
    rung is outlined in black."""
    rows = [dict(impl="loop", label="loop", ms=40.0, ok=True, x_sdpa=80.0),
            dict(impl="fused", label="fused", ms=1.5, ok=False, x_sdpa=3.0),
            dict(impl="sdpa", label="contiguous SDPA", ms=0.5, ok=True, x_sdpa=1.0)]
    fig = ladder_figure(rows, "t", "ms per call")
    bars = fig.data[0]
    assert list(bars.y) == ["loop", "fused", "contiguous SDPA"] and list(bars.x) == [40.0, 1.5, 0.5]
    assert bars.text[0] == "✔ 40.00 ms · 80.0× SDPA" and bars.text[1].startswith("✗")
    assert list(bars.marker.color) == [IMPL_STYLE[i][0] for i in ("loop", "fused", "sdpa")]
    assert bars.marker.line.color[1] == HIGHLIGHT_COLOR
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.title.text == "ms per call"
    assert fig.layout.yaxis.autorange == "reversed"


def test_sweep_lines_per_rung_with_bandwidth_reference():
    """A line per rung named by its label, styled per rung; log2 ticks at the sweep's values; the dashed
    reference line spans them."""
    data = {"gather": ([128, 512, 2048], [0.4, 1.5, 6.0]), "sdpa": ([128, 512, 2048], [0.1, 0.4, 2.0])}
    fig = sweep_figure(data, {"sdpa": "contiguous SDPA"}, "t", "context_len", "KV GB/s", ref=30.0, ref_label="bw")
    g, s, ref = trace(fig, "gather"), trace(fig, "contiguous SDPA"), trace(fig, "bw")
    assert list(g.x) == [128, 512, 2048] and list(s.y) == [0.1, 0.4, 2.0]
    assert g.line.dash == IMPL_STYLE["gather"][1] and s.marker.symbol == IMPL_STYLE["sdpa"][2]
    assert list(ref.x) == [128, 2048] and list(ref.y) == [30.0, 30.0] and ref.line.dash == "dash"
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [128, 512, 2048]
    assert fig.layout.xaxis.title.text == "context_len" and fig.layout.yaxis.title.text == "KV GB/s"
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.range[1] > 1.47  # log10(30) fits


def test_trace_histogram_marks_mean_and_max_model_len():
    fig = trace_figure([100, 200, 300], 2048, "t", "tokens", "requests", mean_label="mean")
    assert fig.data[0].type == "histogram" and list(fig.data[0].x) == [100, 200, 300]
    assert [s.x0 for s in fig.layout.shapes] == [200, 2048]
    assert [a.text for a in fig.layout.annotations] == ["mean 200", "max_model_len 2048"]
    assert fig.layout.xaxis.title.text == "tokens" and fig.layout.yaxis.title.text == "requests"


def test_waste_and_fit_bars():
    """Waste: two bar series per scheme (final length, decode average) on a 0–105 % axis; fit: one bar per scheme
    coloured by kind, value printed."""
    names = ["max_model_len", "oracle", "paged 16"]
    fig = waste_figure(names, [80.0, 0.0, 2.0], [85.0, 30.0, 2.5], "t", "waste %", "final", "decode")
    assert [t.name for t in fig.data] == ["final", "decode"] and fig.layout.barmode == "group"
    assert list(trace(fig, "decode").y) == [85.0, 30.0, 2.5] and list(trace(fig, "final").text) == ["80", "0.0",
                                                                                                     "2.0"]
    assert fig.layout.yaxis.title.text == "waste %"
    fig = fit_figure(names, ["max_len", "oracle", "paged"], [32, 190, 185], "t", "requests")
    assert list(fig.data[0].y) == [32, 190, 185] and list(fig.data[0].text) == ["32", "190", "185"]
    assert fig.data[0].marker.color[0] == OKABE_ITO["vermillion"] and fig.data[0].marker.color[2] != \
        fig.data[0].marker.color[0]


@pytest.mark.parametrize("value, label", [(0.0, "0.0"), (0.14, "0.1"), (9.94, "9.9"), (9.96, "10"), (12.9, "13"),
                                          (78.7, "79"), (77.3, "77"), (99.7, "100"), (100.0, "100")])
def test_waste_labels_stay_three_characters_wide(value, label):
    """Page 7's grouped bars are ~20 px wide at 1024 px: "78.7" next to "77.3" touched; three characters fit."""
    fig = waste_figure(["a"], [value], [value], "t")
    assert list(fig.data[0].text) == [label] and list(fig.data[1].text) == [label]
    assert "%{y:.1f}" in fig.data[0].hovertemplate  # the exact value is a hover away


def test_fragmentation_measured_next_to_half_a_block():
    fig = fragmentation_figure([1, 16, 256], [0.0, 7.6, 120.0], "t", "block_size", "spare", "measured", "expected")
    assert list(trace(fig, "expected").y) == [0.0, 7.5, 127.5] and list(trace(fig, "measured").y) == [0.0, 7.6,
                                                                                                       120.0]
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.title.text == "block_size"


# --- the data behind the figures ----------------------------------------------------------------------------------
def test_ladder_config_bounds_and_loop_rule():
    """The page's bounds are enforced with a ValueError naming the value; the loop runs only up to
    LOOP_MAX_TOKENS tokens of batch × context_len."""
    cfg = LadderConfig(batch=4, context_len=LOOP_MAX_TOKENS // 4)
    assert cfg.loop_allowed() and not cfg.loop_allowed(LOOP_MAX_TOKENS // 4 + 1)
    assert not LadderConfig(batch=4, context_len=64, loop=False).loop_allowed()
    for bad in (dict(batch=17), dict(context_len=4096), dict(head_dim=48), dict(num_heads=8, num_kv_heads=16),
                dict(block_size=128)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            LadderConfig(**bad)


def test_series_keeps_ladder_order_and_skips_missing_points():
    def case(n, impls):
        return CaseResult(KernelCase(1, n), 0, [ImplResult(i, True, 0.0, ms=float(n) * k)
                                                for k, i in enumerate(impls, 1)])

    cases = [case(128, ["sdpa", "loop", "gather"]), case(256, ["sdpa", "gather"])]
    out = series(cases, "context_len", "ms")
    assert list(out) == ["loop", "gather", "sdpa"]
    assert out["loop"] == ([128], [256.0]) and out["gather"] == ([128, 256], [384.0, 512.0])
