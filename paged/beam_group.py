"""Old path of BeamGroup: paged/engine/beam.py now."""

# old import path, kept for a while
from .engine.beam import BeamGroup  # noqa: F401
