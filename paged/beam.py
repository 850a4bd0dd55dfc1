"""Old path of beam search: the driver is paged/engine/beam.py now."""

# old import path, kept for a while
from .engine.beam import (  # noqa: F401
    MAX_BEAM_WIDTH, BeamParams, BeamResult, BeamSearch, BeamStepTrace)
