"""Home: the idea in a few lines, the article it is built on, "start here" (the core path:
pages 1-4), the address chain of the seed example, the other pages in the listed order, what
each page takes from the article, the device."""

import streamlit as st

import ui
from ui import nav
from ui.strings.home import ARTICLE_TITLE, SECTIONS, STRINGS
from paged.addressing import locate
from viz.chain import chain_figure
from lessons.address import SEED_BLOCK_SIZE, SEED_BLOCK_TABLE, SEED_TOKEN_INDEX

ctx = ui.setup_page("home", icon=":material/home:")
st.title(ctx.t("title"))
st.markdown(ctx.t("idea"))
st.markdown(ctx.t("article", title=ARTICLE_TITLE))


def page_link(name: str) -> None:
    """One link of the walkthrough: "<the page's name in the navigation>: <what you do there>".

    Raises: KeyError for a name that is not a page of ui.nav.PAGES."""
    page_title = nav.title(nav.BY_NAME[name], ctx.lang)
    nav.link(name, ctx.t("link", page=page_title, what=ctx.t(f"link_{name}")), ctx.lang)


st.subheader(ctx.t("start_here"))
st.caption(ctx.t("start_caption"))
for name in nav.CORE_PATH:
    page_link(name)

address = locate(SEED_TOKEN_INDEX, SEED_BLOCK_TABLE, SEED_BLOCK_SIZE)
st.subheader(ctx.t("chain_heading"))
st.caption(ctx.t("chain_caption", block_size=SEED_BLOCK_SIZE, block_table=list(SEED_BLOCK_TABLE),
                 token_index=address.token_index))
ui.show_figure(chain_figure(address, SEED_BLOCK_SIZE, SEED_BLOCK_TABLE), "chain")
ui.notice(ctx, ctx.t("chain_notice", logical_block_id=address.logical_block_id,
                           physical_block_id=address.physical_block_id, block_offset=address.block_offset))

st.subheader(ctx.t("then_heading"))
for page in nav.PAGES:
    if page.url_path and page.name not in nav.CORE_PATH:
        page_link(page.name)

st.subheader(ctx.t("takes_heading"))
rows = [f"| {ctx.t('takes_page')} | {ctx.t('takes_what')} | {ctx.t('takes_section')} |",
        "|---|---|---|"]
for page in nav.PAGES:
    if page.url_path:  # a page beyond the article says so; its section cell is a dash
        what = ctx.t(f"takes_{page.name}" if f"takes_{page.name}" in STRINGS else "takes_beyond")
        headings = "；".join(SECTIONS.get(page.name, ("—",)))
        rows.append(f"| {nav.title(page, ctx.lang)} | {what} | {headings} |")
rows.append(f"| | {ctx.t('takes_every')} | {SECTIONS['every'][0]} |")
st.markdown("\n".join(rows))

st.divider()
ui.device_badge(ctx)
ui.write_params({"lang": ctx.lang})
