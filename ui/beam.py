"""Page 9's Streamlit helper: the shipped model, whatever the server's default checkpoint (the page has no model
picker: its recall prompts need the shipped byte model's SEP token)."""

from __future__ import annotations

import streamlit as st

from lessons.beam import memory_savings

from .model_picker import SHIPPED, load_choice
from .page import PageContext


def shipped_model(ctx: PageContext):
    """(model, tokenizer) of the shipped model, loaded once per process; an error box (and the page stops) if it
    cannot load."""
    return load_choice(ctx, SHIPPED)


@st.cache_data(show_spinner=False, max_entries=1)
def savings_rows(_model, _tokenizer) -> list[dict]:
    """lessons.beam.memory_savings on the shipped model: the same numbers for every session (the model is fixed
    and the search deterministic), so measured once per process; each caller gets its own copy."""
    return memory_savings(_model, _tokenizer)
