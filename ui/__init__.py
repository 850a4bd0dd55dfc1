"""Streamlit helpers shared by every page (the only UI package; paged/ never imports streamlit).

    ctx = setup_page("address")            # first call: page config, language switch; ctx.t("key") translates
    ctx, knobs = page_header("address", ":material/route:")  # or all of a lesson page's opening at once
    knobs = Knobs("address")               # bounded widgets <-> URL query params (int_in, one_of, … parsers)
    device_badge(ctx, dtype="float32")     # cuda/cpu · dtype · torch version
    notice(ctx, text) · show_error(ctx, what, fix) · stop_with_error(ctx, what, fix)
    export_button(ctx, trace_dict, "trace.json")
    show_figure(fig, "page.key", where=col)   # plotly without mode bar; fixed-width grids keep their width
    show_cells(html, title, "page.key", where=col)  # HTML cells from viz (queues, slot_mapping, the live chain)
    session_cached("page.runs", key, compute, max_items=8)   # compute() once per session, newest kept
    viz_labels(ctx, MappingLabels, "map")  # a viz builder's words from the page's strings (map_logical, …)
    state_table(rows, key="engine.text")   # per-sequence state as an HTML table (no word broken; scrolls inside)
    knobs.sync_url(ctx.lang, step=3)       # last: write the configuration back to the URL

ui.engine_actions: glue around the engine lesson of pages 4 and 6 (sidebar, session_state, controls, messages).
"""

from .page import (PageContext, current_lang, device_badge, device_info, key_figure_slot,
                   language_switch, page_header, page_intro, setup_page)
from .params import Knobs, read_param, write_params
from .parsers import ParsedInts, duplicates, float_in, int_in, one_of, parse_int_list, text_max
from .widgets import (breakable, card, export_button, notice, session_cached, show_cells, show_error, show_figure,
                      state_table, stop_with_error, viz_labels)

__all__ = [
    "PageContext", "current_lang", "device_badge", "device_info", "key_figure_slot",
    "language_switch", "page_header", "page_intro", "setup_page",
    "Knobs", "ParsedInts", "duplicates", "float_in", "int_in", "one_of", "parse_int_list", "read_param",
    "text_max", "write_params", "breakable", "card", "export_button", "notice", "session_cached", "show_cells",
    "show_error", "show_figure", "state_table", "stop_with_error", "viz_labels",
]
