"""Keyboard use (WCAG 2.1.1): nothing in a figure is clickable, so nothing there needs a keyboard path of its own.
Every choice a figure could offer by a click (a sequence, a token, a block) is a widget beside it (select box,
number input, button), which Streamlit makes reachable by Tab. A figure made clickable later (plotly selection,
a click handler on an HTML cell) fails here until it gets such a keyboard alternative and this test is updated."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for folder in ("app_pages", "ui", "viz") for p in (ROOT / folder).rglob("*.py")
                 if "strings" not in p.parts)


def test_no_figure_takes_clicks():
    """No plotly chart asks for selection events, and no HTML cell carries a click handler or a pointer cursor."""
    found = []
    for path in SOURCES + [ROOT / "app.py"]:
        text = path.read_text(encoding="utf-8")
        for call in re.finditer(r"plotly_chart\((?:[^()]|\([^()]*\))*\)", text):
            if "on_select" in call.group(0):
                found.append(f"{path.relative_to(ROOT)}: plotly selection {call.group(0)[:60]}")
        for hit in re.finditer(r"onclick|cursor:\s*pointer|clickmode", text, re.I):
            found.append(f"{path.relative_to(ROOT)}: {hit.group(0)}")
    assert not found, "\n".join(found)


def test_the_checker_sees_a_clickable_figure():
    """The patterns above catch the two ways a figure becomes clickable."""
    src = 'st.plotly_chart(fig, key="k", on_select="rerun")\n<span onclick="go()" style="cursor: pointer">'
    assert re.search(r"plotly_chart\((?:[^()]|\([^()]*\))*\)", src).group(0).count("on_select") == 1
    assert len(re.findall(r"onclick|cursor:\s*pointer|clickmode", src, re.I)) == 2
