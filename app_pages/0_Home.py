"""Home: the idea in a few lines, the address chain of the seed example, the device, links into the walkthrough and
the teacher's guide."""

import streamlit as st

import ui
from ui import nav
from paged.addressing import locate
from viz.chain import chain_figure
from lessons.address import SEED_BLOCK_SIZE, SEED_BLOCK_TABLE, SEED_TOKEN_INDEX

ctx = ui.setup_page("home", icon=":material/home:")
st.title(ctx.t("title"))
st.markdown(ctx.t("idea"))

address = locate(SEED_TOKEN_INDEX, SEED_BLOCK_TABLE, SEED_BLOCK_SIZE)
st.subheader(ctx.t("chain_heading"))
st.caption(ctx.t("chain_caption", block_size=SEED_BLOCK_SIZE, block_table=list(SEED_BLOCK_TABLE),
                 token_index=address.token_index))
ui.show_figure(chain_figure(address, SEED_BLOCK_SIZE, SEED_BLOCK_TABLE), "chain")
ui.notice(ctx, ctx.t("chain_notice", logical_block_id=address.logical_block_id,
                           physical_block_id=address.physical_block_id, block_offset=address.block_offset))

st.subheader(ctx.t("walkthrough"))
for name in ("address", "gather", "batch", "engine", "buglab", "sharing", "fast", "beam", "swap", "window", "spec"):
    nav.link(name, ctx.t("link", page=nav.title(nav.BY_NAME[name], ctx.lang), what=ctx.t(f"link_{name}")), ctx.lang)
nav.link("guide", ctx.t("guide.link"), ctx.lang)

st.divider()
ui.device_badge(ctx)
ui.write_params({"lang": ctx.lang})
