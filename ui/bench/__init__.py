"""The app's benchmarks, in one place: `python -m ui.bench [server|browser|load] …`.

    steps.py     server time of one step through AppTest (the default subcommand), and the paged/ compute alone
    browser.py   click -> idle per stepping page in a real chromium (`python -m ui.bench browser`)
    chromium.py  the app in a real browser: a `streamlit run` server and Debian's chromium (also the browser tests')
    load.py      N simulated learners over the websocket (`python -m ui.bench load`)
    ws.py        the websocket client a simulated learner is
"""

from .steps import main

__all__ = ["main"]
