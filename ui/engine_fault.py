"""Page 4 · Engine: "break a module", the bug lab's faults in the engine's paged twin (the data: lessons.engine_fault).

    config = fault_picker(ctx, knobs, config)     # sidebar: nothing broken, or one fault (?fault= in the URL)
    show_fault_verdict(ctx, lesson)              # what is broken, and where the twins first part (step, sequence)
    show_fault_rule(ctx, lesson)                 # the state rule as the broken link saw it (wrong values: ≠)

The chain diagram lights the broken module itself (ui.chain_live reads lesson.config.fault).
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from lessons.engine_fault import FAULT_CHOICES, NO_FAULT, broken_stage, first_difference, parse_choice, rule_checks
from lessons.engine_requests import DemoConfig
from viz.colors import seq_label

from .widgets import slot_runs, state_table

T = "engine_fault."


def fault_picker(ctx, knobs, config: DemoConfig) -> DemoConfig:
    """The sidebar's fault menu; returns `config` with the chosen fault (None for "nothing broken")."""
    def label(value: str) -> str:
        return ctx.t(T + "none") if value == NO_FAULT else ctx.t(f"buglab.title_{value}")

    value = knobs.select(ctx.t(T + "pick"), "fault", NO_FAULT, list(FAULT_CHOICES), format_func=label,
                         help=ctx.t(T + "pick_help"))
    fault = parse_choice(value)
    if fault is not None and config.enable_chunked_prefill:  # the engine injects faults with whole prompts only
        st.warning(ctx.t(T + "needs_whole_prefill"), icon=":material/block:")
        fault = None
    return replace(config, fault=None if fault is None else fault.value)


def _label(lesson, seq_id: int) -> str:
    """A sequence's letter as the page names it (its display id)."""
    return seq_label(lesson.display_id(seq_id)) if seq_id in lesson.view.seqs else seq_label(seq_id)


def show_fault_verdict(ctx, lesson) -> None:
    """With a fault on: what is broken and where, then the first step and sequence whose logits (and tokens) part
    from the contiguous twin's, or, while they still agree, when this bug shows. Nothing without a fault."""
    fault = lesson.config.fault
    if fault is None:
        return
    stage, link = broken_stage(fault)
    text = ctx.t(T + "banner", title=ctx.t(f"buglab.title_{fault}"), module=ctx.t(f"chain.stage_{stage}"),
                 link=ctx.t(T + f"link_{link}"))
    first = first_difference(lesson)
    if first is None:
        text += "  \n" + ctx.t(T + "not_yet", steps=len(lesson.steps), symptom=ctx.t(f"buglab.symptom_{fault}"))
    else:
        text += "  \n" + ctx.t(T + "parted", step=first.step, seq=_label(lesson, first.seq_id),
                               diff=f"{first.diff:.3g}", tol=f"{first.tol:.1e}")
        text += (ctx.t(T + "token", step=first.token_step, seq=_label(lesson, first.token_seq_id))
                 if first.token_step is not None else ctx.t(T + "same_tokens"))
    st.error(text, icon=":material/bug_report:")


def _cell(ctx, got, want) -> str:
    return str(got) if got == want else ctx.t(T + "wrong", got=got, want=want)


def show_fault_rule(ctx, lesson) -> None:
    """The chosen sequence's rows (the state rule's picker, engine.rule_seq) against the rule, when a fault is on."""
    fault = lesson.config.fault
    seq_id = st.session_state.get("engine.rule_seq")
    if fault is None or seq_id not in lesson.view.seqs:
        return
    checks = rule_checks(lesson, seq_id)
    if not checks:
        return
    st.markdown(f"**{ctx.t(T + 'rule_header')}**")
    st.caption(ctx.t(T + "rule_caption", seq=_label(lesson, seq_id)))
    rows = []
    for c in checks:
        rows.append({ctx.t(T + "col_step"): str(c.step), ctx.t(T + "col_phase"): c.phase,
                     ctx.t(T + "col_cached"): str(c.cached_after),
                     ctx.t(T + "col_read"): _cell(ctx, c.context_len, c.cached_after),
                     ctx.t(T + "col_written"): _cell(ctx, c.written_at_read, c.context_len),
                     ctx.t(T + "col_position"): _cell(ctx, slot_runs(ctx, c.positions),
                                                      slot_runs(ctx, c.want_positions)),
                     ctx.t(T + "col_slot"): _cell(ctx, slot_runs(ctx, c.slots),
                                                  slot_runs(ctx, c.want_slots))
                     if c.slots == c.want_slots or len(c.slots) == 1 else _first_wrong_slot(ctx, c)})
    st.session_state["engine.fault_checks"] = checks  # what the tests read back
    state_table(rows, key="engine.fault_rule")
    if not any(c.problems for c in checks):
        st.caption(ctx.t(T + "rule_ok", link=ctx.t(T + f"link_{broken_stage(fault)[1]}")))


def _first_wrong_slot(ctx, check) -> str:
    """A prefill's slots: the first token written elsewhere than its address says ("token i: got ≠ (rule: want)")."""
    i = next(k for k, (a, b) in enumerate(zip(check.slots, check.want_slots)) if a != b)
    return f"#{check.want_positions[i]}: " + ctx.t(T + "wrong", got=check.slots[i], want=check.want_slots[i])
