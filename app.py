"""Home: the idea in a few lines, the address chain of the seed example, the device, links into the walkthrough."""

from pathlib import Path

import streamlit as st

import ui
from paged.addressing import locate
from viz.chain import chain_figure
from lessons.address import SEED_BLOCK_SIZE, SEED_BLOCK_TABLE, SEED_TOKEN_INDEX

ctx = ui.setup_page("home", icon="🧩")
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
HERE = Path(__file__).parent
WALKTHROUGH = [  # (page file, i18n key of its link, icon); a missing file is skipped
    ("pages/1_Address_translation.py", "link_address", "🧭"),
    ("pages/2_Gather_and_attend.py", "link_gather", "🧲"),
    ("pages/3_Batch_decode.py", "link_batch", "📦"),
    ("pages/4_Engine.py", "link_engine", "⚙️"),
    ("pages/5_Bug_lab.py", "link_buglab", "🐞"),
    ("pages/6_Sharing.py", "link_sharing", "🔗"),
    ("pages/7_Correct_to_fast.py", "link_fast", "🚀"),
]
for path, key, icon in WALKTHROUGH:
    if (HERE / path).exists():
        st.page_link(path, label=ctx.t(key), icon=icon, query_params={"lang": ctx.lang})

st.divider()
ui.device_badge(ctx)
ui.write_params({"lang": ctx.lang})
