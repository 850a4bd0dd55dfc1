"""Page 4 · Engine: the chain, live, and the state rule table (render helpers; the data comes from lessons.chain and
lessons.state_rule, the diagram, HTML, from viz.chain_live).

    show_chain(ctx, lesson)        # the seven modules with this step's values, and the code of a chosen one
    show_state_rule(ctx, lesson)   # one sequence's rows: fed, slot, cached before → after, generated, context_len
                                 # (ui.state_table: step is the row label)
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Callable

import streamlit as st

from lessons.chain import STAGES, Stage, chain_stages, stage_sources
from lessons.engine_fault import broken_stage
from lessons.state_rule import state_rows, tail
from lessons.tokens import token_label
from viz.chain_live import chain_live_html
from viz.colors import seq_label
from viz.engine import RECENT_STEPS

from .engine_actions import explain_step, why_sep
from .widgets import show_cells, slot_runs, state_table

KEEP = 6  # list entries shown on an arrow before "…"
WHY_COLUMNS = 60  # the scheduler's why on the chain: a new line before a piece would pass this many columns


def short(values, keep: int = KEEP) -> str:
    """[44, 39, 7, …] : the first `keep` entries of a long list."""
    values = list(values)
    return str(values) if len(values) <= keep else "[" + ", ".join(map(str, values[:keep])) + ", …]"


def columns(text: str) -> int:
    """Display width in a monospace font: a CJK (wide) character takes two columns."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def wrap_pieces(pieces: list[str], width: int = WHY_COLUMNS, sep: str = "; ") -> str:
    """The pieces joined with `sep` ("; ", in 简体中文 "；"), a line break ("<br>") before any piece that would pass
    `width` columns."""
    lines: list[str] = []
    for piece in pieces:
        if lines and columns(lines[-1] + sep + piece) <= width:
            lines[-1] += sep + piece
        else:
            lines.append(piece)
    return (sep.rstrip() + "<br>").join(lines)


def per_seq(mapping: dict, fmt=str, keep: int = 4) -> str:
    """"A [3, 7] · B [1]" for {seq_id: value}, at most `keep` sequences."""
    items = [f"{seq_label(k)} {fmt(v)}" for k, v in sorted(mapping.items())]
    return " · ".join(items[:keep]) + (" · …" if len(items) > keep else "") if items else "—"


def arrow_label(ctx, stage: Stage, token_text: Callable[[int], str] | None = None) -> str:
    """The values on the arrow leaving `stage`, in the page's language. token_text: a sampled token id -> the piece
    shown (the page passes lessons.tokens.token_label of its tokenizer: ␣ for a space, ⟨0xNN⟩ for a byte); without it,
    the decoded text's repr."""
    t, out = ctx.t, stage.out
    if not out:
        return t("chain.out_none")
    key = stage.key
    if key == "scheduler":
        if out["phase"] == "idle" and not out["preempted"]:
            return t("chain.out_idle")
        phase = t("chain.phase_mixed") if out["phase"] == "mixed" else out["phase"]
        pieces = [explain_step(ctx, [piece]) for piece in out["why"]]
        return t("chain.out_scheduler", phase=phase, seqs=", ".join(map(seq_label, out["scheduled"])) or "—",
                 why=wrap_pieces(pieces, sep=why_sep(ctx)))
    if key == "block_manager":
        parts = []
        if out["allocated"]:
            parts.append(t("chain.out_allocated", blocks=per_seq(out["allocated"], short)))
        if out["freed"]:
            parts.append(t("chain.out_preempt_freed", blocks=per_seq(out["freed"], short)))
        if out["copies"]:
            parts.append(t("chain.out_copies", copies=", ".join(f"{a}→{b}" for a, b in out["copies"])))
        return "<br>".join(parts) or t("chain.out_no_blocks")
    if key == "model_runner":
        if not out["tokens"]:
            return t("chain.out_none")
        return t("chain.out_runner", slots=short(out["slot_mapping"]), tables=per_seq(out["block_tables"], short),
                 lens=per_seq(out["context_lens"]))
    if key == "paged_attention":
        if not out["rows"]:
            return t("chain.out_none")
        text = t("chain.out_attention", written=out["written"], read=per_seq(out["read"]), rows=out["rows"])
        if out.get("call"):  # the function that ran and the kernel behind it (the runner's record)
            text = t("chain.out_kernel", call=out["call"], kernel=t(f"chain.kernel_{out['kernel']}")) + "<br>" + text
        return text
    if key == "sampler":
        if not out["tokens"]:
            return t("chain.out_none")
        mid = out.get("mid_prefill", [])
        shown = {sid: "—" if sid in mid else repr(text) if token_text is None else token_text(token)
                 for sid, (token, text) in out["tokens"].items()}
        text = t("chain.out_sampler", tokens=per_seq(shown))
        if mid:
            text += "<br>" + t("chain.out_mid_prefill", seqs=", ".join(map(seq_label, mid)))
        return text
    if key == "sequence_update":
        if not out["counts"]:
            return t("chain.out_none")
        text = t("chain.out_update", counts=per_seq(out["counts"], lambda v: f"{v[0]}/{v[1]}"))
        if out["forked"]:
            text += "<br>" + t("chain.out_forked", forked=per_seq(out["forked"], lambda v: ", ".join(map(seq_label, v))))
        return text
    if out["freed"]:
        return t("chain.out_freed", freed=per_seq(out["freed"], short), free=out["free"], num_blocks=out["num_blocks"])
    return t("chain.out_nothing_freed", free=out["free"], num_blocks=out["num_blocks"])


@functools.lru_cache(maxsize=None)
def sources(key: str) -> tuple[tuple[str, str], ...]:
    """lessons.chain.stage_sources(key), read once per process (inspect.getsource costs ~7 ms a rerun)."""
    return tuple(stage_sources(key))


def show_chain(ctx, lesson) -> None:
    """The chain diagram of the lesson's last step, a module picker beside it and that module's code below."""
    trace = lesson.last.paged if lesson.last else None
    stages = chain_stages(trace, lesson.view.block_size)
    st.subheader(ctx.t("chain.header"))
    st.caption(ctx.t("chain.caption"))
    fig_col, pick_col = st.columns([3, 1])
    picked = pick_col.radio(ctx.t("chain.pick"), STAGES, key="engine.chain_module",
                            format_func=lambda k: ctx.t(f"chain.stage_{k}"))
    title = (ctx.t("chain.title", step=len(lesson.steps)) if trace else
             ctx.t("chain.title_none" if lesson.can_step() else "chain.title_nothing"))
    broken = broken_stage(lesson.config.fault)  # page 4's fault picker: the module whose link is broken
    note = ctx.t("engine_fault.broken_mark", link=ctx.t(f"engine_fault.link_{broken[1]}")) if broken else ""
    show_cells(chain_live_html([ctx.t(f"chain.stage_{s.key}") for s in stages], [s.active for s in stages],
                               [arrow_label(ctx, s, lambda tid: token_label(lesson.tokenizer, tid)) for s in stages],
                               selected=STAGES.index(picked), broken=STAGES.index(broken[0]) if broken else None,
                               broken_note=note),
               title, "engine.chain_live", where=fig_col)
    # the module's source, folded: open, it is several screens long (the scheduler's four functions)
    with st.expander(ctx.t("chain.code_expander", module=ctx.t(f"chain.stage_{picked}"))):
        for name, source in sources(picked):
            st.caption(ctx.t("chain.code_from", name=name))
            st.code(source, language="python")


def _phase(ctx, row) -> str:
    """"prefill", "decode", "fork", or "prefill chunk k/n" (n "…" while the prompt's last chunk has not run)."""
    if row.phase == "fork":
        return ctx.t("chain.phase_fork")
    if row.chunked:
        return ctx.t("chain.phase_chunk", chunk=row.chunk, chunks=row.num_chunks or "…")
    return row.phase


def _fed(ctx, row, tokenizer) -> str:
    if row.phase == "fork":
        return ctx.t("chain.fed_fork")
    if len(row.fed) == 1:
        return f"{token_label(tokenizer, row.fed[0])} ({row.fed[0]})"
    return ctx.t("chain.fed_many", count=len(row.fed))


def show_state_rule(ctx, lesson, tokenizer) -> None:
    """One chosen sequence's rows of the state rule (a narrow table: no horizontal scrolling)."""
    st.subheader(ctx.t("chain.rule_header"))
    seq_ids = sorted(lesson.view.seqs)
    if not seq_ids:
        st.info(ctx.t("chain.rule_no_seqs"))
        return
    # the picker, and how to read a row folded beside it: the table is the lesson, the long reading is reference
    pick_col, note_col = st.columns([1, 3], vertical_alignment="bottom")
    seq_id = pick_col.selectbox(ctx.t("chain.rule_pick"), seq_ids, format_func=seq_label, key="engine.rule_seq")
    note_col.expander(ctx.t("chain.rule_fold")).caption(ctx.t("chain.rule_caption"))
    rows = state_rows([s.paged for s in lesson.steps], seq_id)
    if not rows:
        st.info(ctx.t("chain.rule_none"))
        return
    st.session_state["engine.rule_rows"] = rows  # what the tests read back
    if len(rows) > RECENT_STEPS:  # only the newest rows are drawn: the table costs the same at step 600
        st.caption(ctx.t("chain.rule_recent", shown=RECENT_STEPS, rows=len(rows)))
        rows = rows[-RECENT_STEPS:]
    table = []
    for r in rows:
        cut, last = tail(r.generated, 3)
        table.append({ctx.t("chain.col_step"): str(r.step),  # text: st.table shows a text index, not an int one
                      ctx.t("chain.col_phase"): _phase(ctx, r),
                      ctx.t("chain.col_fed"): _fed(ctx, r, tokenizer), ctx.t("chain.col_slot"): slot_runs(ctx, r.slots),
                      ctx.t("chain.col_cached"): f"{r.cached_before} → {r.cached_after}",
                      # the count (what the state rule is about), then the newest tokens as text, not raw ids
                      ctx.t("chain.col_generated"): f"{len(r.generated)} · " + ("…" if cut else "")
                      + " ".join(token_label(tokenizer, i, 6) for i in last) if r.generated else "0",
                      ctx.t("chain.col_context"): r.context_len})
    state_table(table, key="engine.rule_table")  # an HTML table: no word broken, scrolls inside when narrow
