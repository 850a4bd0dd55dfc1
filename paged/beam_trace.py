"""Old path of BeamStepTrace and BeamResult: paged/engine/beam.py now."""

# old import path, kept for a while
from .engine.beam import BeamResult, BeamStepTrace  # noqa: F401
