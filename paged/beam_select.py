"""Old path of the beam selection math: paged/chapters/beam_select.py now."""

# old import path, kept for a while
from .chapters.beam_select import NEG, Choice, Finished, Hypothesis, select  # noqa: F401
