"""Old path of the CLI's beam branch: paged/__main__.py now."""

# old import path, kept for a while
from .__main__ import beam_main, beam_record  # noqa: F401
