"""Page 9's Streamlit helper: the shipped model, whatever the server's default checkpoint (the page has no model
picker: its recall prompts need the shipped byte model's SEP token)."""

from __future__ import annotations

from .model_picker import SHIPPED, load_choice
from .page import PageContext


def shipped_model(ctx: PageContext):
    """(model, tokenizer) of the shipped model, loaded once per process; an error box (and the page stops) if it
    cannot load."""
    return load_choice(ctx, SHIPPED)
