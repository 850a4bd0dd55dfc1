"""1 · Address translation: a block table the learner edits, one token followed through the chain."""

import random

import pandas as pd
import streamlit as st

import ui
import ui.quiz
from lessons.quiz import address_question
from paged.addressing import address_table, locate
from viz.chain import chain_figure
from viz.colors import seq_color, tint
from viz.pool import PoolWords, pool_figure
from lessons.address import (MAX_TABLE, MAX_TOKEN, SEED_BLOCK_SIZE, SEED_BLOCK_TABLE, SEED_NUM_BLOCKS,
                             SEED_TOKEN_INDEX, MissingEntry, follow)

ctx, knobs = ui.page_header("address", ":material/route:")
quiz_on = ui.quiz.enabled(knobs)  # ?quiz=1: predict, then reveal

with st.sidebar:
    block_size = knobs.slider(ctx.t("common.block_size"), "block_size", SEED_BLOCK_SIZE, 1, 16)
    num_blocks = knobs.slider(ctx.t("common.num_blocks"), "num_blocks", SEED_NUM_BLOCKS, 1, 64)


def randomise(num_blocks: int, count: int) -> None:
    """Button callback: a fresh table of `count` distinct physical blocks (runs before the widgets exist)."""
    picked = random.Random().sample(range(num_blocks), min(max(count, 1), num_blocks))
    st.session_state[knobs.key("table")] = ", ".join(str(b) for b in picked)


left, right = st.columns([3, 1], vertical_alignment="bottom")
table_text = knobs.text(ctx.t("table_label"), "table", ", ".join(map(str, SEED_BLOCK_TABLE)), where=left,
                        help=ctx.t("table_help"))
parsed = ui.parse_int_list(table_text, 0, num_blocks - 1, MAX_TABLE)
right.button(ctx.t("randomise"), key="address.randomise", on_click=randomise,
             args=(num_blocks, len(parsed.values) or len(SEED_BLOCK_TABLE)), icon=":material/casino:")
if not parsed.ok:
    knobs.sync_url(ctx.lang)
    d = {"lo": 0, "hi": num_blocks - 1, "max_len": MAX_TABLE, **parsed.detail}
    ui.stop_with_error(ctx, ctx.t(f"common.err_{parsed.error}", **d), ctx.t(f"common.fix_{parsed.error}", **d))
block_table = parsed.values
capacity = len(block_table) * block_size  # tokens the table can address

# The token stays where the learner (or a link) put it, even past what the table addresses: the chain then shows
# which logical block has no entry, instead of silently moving the token.
wanted = st.session_state.get(knobs.key("token"))
if wanted is None:  # the first run of this visit: the link's token, read once (the slider starts from it)
    wanted = st.session_state[knobs.key("token")] = ui.read_param("token", ui.int_in(0, MAX_TOKEN), SEED_TOKEN_INDEX)
top = max(capacity - 1, wanted)
if top > 0:
    token_index = knobs.slider(ctx.t("token_label"), "token", SEED_TOKEN_INDEX, 0, top)
else:
    token_index = 0
    st.caption(ctx.t("token_only_one"))
knobs.sync_url(ctx.lang)

listed_twice = ui.duplicates(block_table)
for twice in listed_twice:
    logical = [i for i, b in enumerate(block_table) if b == twice]
    st.warning(ctx.t("duplicate", block=twice, logical=", ".join(map(str, logical)),
                     first=f"{logical[0] * block_size}–{(logical[0] + 1) * block_size - 1}",
                     second=f"{logical[1] * block_size}–{(logical[1] + 1) * block_size - 1}"), icon=":material/warning:")

address = follow(token_index, block_table, block_size)
missing = isinstance(address, MissingEntry)
if missing:
    ui.show_error(ctx, ctx.t("err_missing_entry", token_index=token_index, logical=address.logical_block_id,
                             last=address.entries - 1),
                  ctx.t("fix_missing_entry", needed=address.logical_block_id + 1, logical=address.logical_block_id,
                        capacity=address.capacity))

asking = None  # the open quiz question: while it is, nothing on the page gives its answer away
if quiz_on:  # predict, then reveal: where does a random token of this table live?
    ui.quiz.show(ctx, "address", (tuple(block_table), block_size),
                 lambda seed: address_question(block_table, block_size, seed), watch=False)
    asking = ui.quiz.open_question("address")
secret = asking.prompt[1]["token"] if asking is not None else None
hide_chain = secret is not None and secret == token_index  # the chain below follows the very token asked about

# every link of the chain, with its value (up to the missing entry)
names = ["token_index", "logical_block_id", "physical_block_id", "block_offset", "slot"]
if hide_chain:
    st.info(ctx.t("quiz_hidden_chain", token=secret), icon=":material/visibility_off:")
else:
    for col, name in zip(st.columns(len(names)), names):
        value = getattr(address, name)
        col.metric(name, "—" if value is None else value, help=ctx.t(f"help_{name}"))
    ui.show_figure(chain_figure(address, block_size, block_table), "address.chain")

pool = pool_figure(num_blocks, block_size, {0: block_table}, {0: capacity},
                   highlight=[] if missing or hide_chain else [address.slot],
                   title=ctx.t("pool_title", num_blocks=num_blocks, block_size=block_size),
                   words=ui.viz_labels(ctx, PoolWords, "common.pool"), hide_tokens=asking is not None)
fig_col, note_col = st.columns([3, 1])
ui.show_figure(pool, "address.pool", where=fig_col)
if asking is not None:
    ui.notice(ctx, ctx.t("quiz_hidden_pool"), where=note_col)
elif missing:
    ui.notice(ctx, ctx.t("pool_notice_missing", token_index=token_index, last_token=capacity - 1), where=note_col)
else:  # a block listed twice: reading the table in order no longer gives tokens 0, 1, 2, … (the warning above)
    ui.notice(ctx, ctx.t("pool_notice_duplicate" if listed_twice else "pool_notice", token_index=token_index,
                         slot=address.slot, physical_block_id=address.physical_block_id,
                         block=", ".join(map(str, listed_twice))), where=note_col)

st.subheader(ctx.t("table_heading"))
rows = [{"token_index": a.token_index, "logical_block_id": a.logical_block_id,
         "physical_block_id": a.physical_block_id, "block_offset": a.block_offset, "slot": a.slot}
        for a in address_table(block_table, capacity, block_size)]
table_col, table_note = st.columns([3, 1])
selected_row = tint(seq_color(0), 0.45)
if asking is not None:
    table_col.info(ctx.t("quiz_hidden_table"), icon=":material/visibility_off:")
else:
    styled = pd.DataFrame(rows).style.apply(
        lambda row: [f"background-color: {selected_row}" if row.name == token_index else ""] * len(row), axis=1)
    table_col.dataframe(styled, hide_index=True, height=min(400, 38 + 35 * len(rows)), key="address.table",
                        on_select="ignore")
ui.notice(ctx, ctx.t("table_notice", last_offset=block_size - 1), where=table_note)

ui.export_button(ctx, {"block_size": block_size, "num_blocks": num_blocks, "block_table": block_table,
                       "token_index": token_index, "chain": None if missing else rows[token_index],
                       "address_table": rows},
                 "address_trace.json", key="address.export")
