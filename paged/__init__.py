"""paged: PagedAttention you can watch, poke and break, on real tensors.

The package is UI-free (it never imports streamlit): the Streamlit app, the CLI (`python -m paged`), the tests and
the benchmarks all call the same functions from here.
"""

__version__ = "0.1.0"
