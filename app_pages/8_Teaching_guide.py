"""Teacher's guide: docs/teaching.md (简体中文: docs/teaching.zh.md) inside the app. With presenter mode on, every
link of the guide carries present=1, so each page it opens is already readable from the back row."""

from pathlib import Path

import streamlit as st

import ui
from ui.nav import guide_markdown, same_tab

ctx = ui.setup_page("guide", icon=":material/school:")
st.title(ctx.t("title"))
path = Path(__file__).resolve().parents[1] / "docs" / ("teaching.zh.md" if ctx.lang == "zh" else "teaching.md")
ui.write_params({"lang": ctx.lang})
if not path.exists():
    ui.stop_with_error(ctx, ctx.t("missing", path=f"docs/{path.name}"), ctx.t("fix"))
# links open in this tab (same_tab): a lesson stays one tab, not one per link
st.markdown(same_tab(guide_markdown(path.read_text(encoding="utf-8"), present=ctx.present)), unsafe_allow_html=True)
