"""3 · Batch decode: several sequences, each with its own block table, decoding together in one pool."""

import streamlit as st

import ui
import ui.parsers
import ui.quiz
from lessons.quiz import batch_question
from ui.breaks import arm_wrong_slot, wrong_slot_controls
from ui.playback import Stepper, playback_bar
from ui.widgets import show_cells, viz_labels
from lessons.batch import MAX_PROMPT_LEN, BatchConfig, BatchLesson, ops_in_link
from paged.attention import tolerance
from viz.colors import seq_label
from viz.mapping import MappingLabels, mapping_html
from viz.pool import PoolWords, pool_html
from lessons.address import DTYPES, SEED_BLOCK_SIZE, SEED_NUM_BLOCKS


ctx, knobs = ui.page_header("batch", ":material/view_module:")
quiz_on = ui.quiz.enabled(knobs)  # ?quiz=1: predict, then reveal

with st.sidebar:
    block_size = knobs.select(ctx.t("common.block_size"), "block_size", SEED_BLOCK_SIZE, [1, 2, 4, 8, 16])
    num_blocks = knobs.slider(ctx.t("common.num_blocks"), "num_blocks", SEED_NUM_BLOCKS, 4, 64)
    num_heads = knobs.select(ctx.t("common.num_heads"), "num_heads", 4, [1, 2, 4, 8, 16])
    num_kv_heads = knobs.select(ctx.t("common.num_kv_heads"), "num_kv_heads", 2, [1, 2, 4, 8, 16])
    head_dim = knobs.select(ctx.t("common.head_dim"), "head_dim", 8, [4, 8, 16, 32, 64, 128])
    dtype = knobs.select(ctx.t("common.dtype"), "dtype", "float32", list(DTYPES))
    seed = knobs.number(ctx.t("common.seed"), "seed", 0, 0, 9999)
    ui.device_badge(ctx, dtype)

# the operation log: from the URL on the first visit of the session, then from the lesson in session_state
# A malformed entry (?ops=d,d,zz) is named in the link box with the ops used instead, as every link value is.
url_ops = [op for op in ui.read_param("ops", ops_in_link, "").split(",") if op]
if num_heads % num_kv_heads:
    knobs.sync_url(ctx.lang, ops=",".join(url_ops))
    ui.stop_with_error(ctx, ctx.t("gather.err_gqa", num_heads=num_heads, num_kv_heads=num_kv_heads),
                       ctx.t("gather.fix_gqa", num_heads=num_heads,
                             options=", ".join(str(k) for k in (1, 2, 4, 8, 16) if num_heads % k == 0)))

config = BatchConfig(block_size, num_blocks, num_heads, num_kv_heads, head_dim, dtype, seed)
lesson: BatchLesson | None = st.session_state.get("batch.lesson")
if lesson is None or lesson.config != config:
    ops = url_ops if lesson is None else []  # a changed setting starts over from the seed batch
    lesson, applied = BatchLesson.replay(config, ops)
    st.session_state["batch.lesson"] = lesson
    if applied < len(ops):
        st.warning(ctx.t("replay_stopped", applied=applied, total=len(ops)), icon=":material/warning:")

# --- actions (callbacks: they run before the page is drawn, on the lesson kept in session_state) ---------------------
def lesson_now() -> BatchLesson:
    return st.session_state["batch.lesson"]


def undo_last() -> bool:
    """Back: the same log without its last operation, replayed from the start (exactly the state it had then)."""
    if not lesson_now().ops:
        return False
    st.session_state["batch.lesson"] = lesson_now().without_last()
    return True


def reset() -> None:
    st.session_state["batch.lesson"] = BatchLesson(lesson_now().config)


def add_typed() -> None:
    """Add: the typed prompt length goes to the lesson when it is a whole number (the lesson refuses one out of
    range by name); other text is noted for the page to refuse by name."""
    text = st.session_state["batch.new_len"]
    length = ui.parsers.parse_whole(text)
    if length is None:
        st.session_state["batch.len_not_a_number"] = text
    else:
        lesson_now().add(length)


@st.fragment
def batch_view() -> None:
    """Everything a decode, Back, Finish, Add or Reset changes (st.fragment): these rerun only this part, not
    the page setup and the sidebar above it. It reads the lesson afresh from session_state."""
    lesson = lesson_now()
    arm_wrong_slot(lesson)  # break it: when switched on, the next decode writes one token to the wrong slot

    running = [s.seq_id for s in lesson.playground.running()]
    if st.session_state.get("batch.target") not in running:  # finished, or gone with a settings change
        st.session_state["batch.target"] = running[0] if running else None

    def finish_shown() -> None:
        """Finish the sequence the selector shows (the value the learner saw when clicking)."""
        if st.session_state.get("batch.target") is not None:
            lesson_now().apply(f"f{st.session_state['batch.target']}")

    slot = ui.key_figure_slot(ctx)  # presenter mode: the bar and the pool, then the rest
    bar = playback_bar(ctx, knobs, Stepper(
        "batch", step_key="batch.decode", position=len(lesson.ops), can_forward=bool(running),
        can_back=bool(lesson.ops), forward=lambda: lesson_now().apply("d").ok, back=undo_last),
        where=slot)
    row = st.container(horizontal=True, vertical_alignment="bottom", gap="small")
    row.selectbox(ctx.t("which"), running, format_func=seq_label, key="batch.target", disabled=not running, width=130,
                  placeholder=ctx.t("none_running"))
    row.button(ctx.t("finish"), key="batch.finish", disabled=not running, icon=":material/stop:", on_click=finish_shown)
    # a text box: a whole number out of range reaches BatchLesson.add, which refuses it by name, and other text is
    # refused here (Streamlit's number input would refuse an out-of-range value, 2**53 or more even without bounds,
    # with a red border only, and Add would then use the old value silently)
    row.text_input(ctx.t("new_len"), value="5", key="batch.new_len", width=150, max_chars=ui.parsers.MAX_WHOLE_CHARS,
                   help=ctx.t("new_len_help", hi=MAX_PROMPT_LEN))
    row.button(ctx.t("add"), key="batch.add", icon=":material/add:", on_click=add_typed)
    row.button(ctx.t("common.reset"), key="batch.reset", icon=":material/restart_alt:", on_click=reset)
    wrong_slot_controls(ctx, knobs, lesson)
    if quiz_on:  # predict, then reveal: who takes a new block at the next decode?
        ui.quiz.show(ctx, "batch", (config, tuple(lesson.ops)), lambda seed: batch_question(lesson, seed),
                     "quiz.none_batch")
    knobs.sync_url(ctx.lang, ops=",".join(lesson.ops))

    # --- what the last operation did ----------------------------------------------------------------------------------
    event = lesson.last_event
    label = seq_label  # 0, 1, 2 -> A, B, C
    not_a_number = st.session_state.pop("batch.len_not_a_number", None)  # set by add_typed
    if not_a_number is not None:
        said = ctx.t("refused_add_not_a_number", text=ui.parsers.quoted(not_a_number), lo=1, hi=MAX_PROMPT_LEN)
        bar.tell(said, st.warning, icon=":material/back_hand:")
    elif event.kind == "start":
        said = ctx.t("start_seed" if lesson.used_seed_tables else "start_free_list")
        bar.tell(said, st.info, icon=":material/flag:")
        if not event.ok:
            st.warning(ctx.t("start_short", detail=event.detail), icon=":material/warning:")
    elif not event.ok:
        said = ctx.t(f"refused_{event.kind}_{event.reason}", detail=event.detail, **event.counts,
                     seq=label(event.seq_id) if event.seq_id is not None else "")
        bar.tell(said, st.warning, icon=":material/back_hand:")
    elif event.kind == "decode":
        writes = ", ".join(f"{label(s)} → slot {slot}" for s, slot in event.written.items())
        said = ctx.t("decoded", step=len(lesson.ops), writes=writes)
        bar.tell(said, st.success, icon=":material/edit_note:")
        for s, blocks in event.new_blocks.items():
            st.info(ctx.t("new_block", seq=label(s), blocks=", ".join(map(str, blocks)),
                          block_size=block_size), icon=":material/add_box:")
    elif event.kind == "finish":
        said = ctx.t("finished", seq=label(event.seq_id), blocks=event.freed)
        bar.tell(said, st.success, icon=":material/flag:")
    elif event.kind == "add":
        said = ctx.t("added", seq=label(event.seq_id), blocks=event.new_blocks[event.seq_id])
        bar.tell(said, st.success, icon=":material/add:")
    bar.say(said)

    # --- the pool and the mappings ------------------------------------------------------------------------------------
    tables, lens = lesson.tables(), lesson.cached_token_counts()
    pg = lesson.playground
    written = list(event.written.values()) if event.kind == "decode" and event.ok else []
    # the pool as HTML cells (viz.pool.pool_html): a step redraws it in a few ms, a plotly grid in ~100
    pool = pool_html(num_blocks, block_size, tables, lens, highlight=written, max_width=680,
                     words=viz_labels(ctx, PoolWords, "common.pool"), holds=pg.holds)  # what the pool holds
    fig_col, note_col = (slot or st).columns([3, 1])
    show_cells(pool, ctx.t("pool_title", free=pg.manager.num_free_blocks, num_blocks=num_blocks), "batch.pool",
               where=fig_col)
    with note_col:
        ui.notice(ctx, ctx.t("pool_notice"))
        st.markdown(f"**{ctx.t('free_list')}** `{list(pg.manager.free_block_ids)}`")
    new_blocks = event.new_blocks if event.kind == "decode" else {}
    mapping = mapping_html(tables, lens, block_size, num_blocks, new_blocks=new_blocks,
                           labels=viz_labels(ctx, MappingLabels, "map"))  # an image, not a plotly chart
    fig_col, note_col = st.columns([3, 1])
    show_cells(mapping, ctx.t("mapping_title"), "batch.mapping", where=fig_col)
    ui.notice(ctx, ctx.t("mapping_notice"), where=note_col)

    # --- paged vs contiguous, per sequence ----------------------------------------------------------------------------
    st.subheader(ctx.t("common.check"))
    rows = [{ctx.t("seq"): label(c.seq_id), "block_table": str(tables[c.seq_id]), "context_len": c.context_len,
             ctx.t("common.max_abs_err"): f"{c.max_abs_err:.2e}", ctx.t("common.rel_err"): f"{c.rel_err:.2e}",
             ctx.t("verdict"): ctx.t("common.ok") if c.ok else ctx.t("common.not_ok")} for c in lesson.checks]
    table_col, note_col = st.columns([3, 1])
    if rows:
        ui.state_table(rows, key="batch.checks", where=table_col)  # HTML (st.table): cheaper per step than a grid
    else:
        table_col.info(ctx.t("nothing_running"))
    ui.notice(ctx, ctx.t("check_notice", tolerance=f"{tolerance(DTYPES[dtype]):.0e}", dtype=dtype), where=note_col)

    ui.export_button(ctx, lesson.trace, "batch_trace.json", key="batch.export")


batch_view()
