"""The app's benchmarks, in one place: `python -m ui.bench [server|browser|history|load|attack] …`.

    steps.py     server time of one step through AppTest (the default subcommand), and the paged/ compute alone
    history.py   Back, a step and a share link at step 10 and 600 (`python -m ui.bench history`; also in the default)
    browser.py   click -> idle per stepping page in a real chromium (`python -m ui.bench browser`)
    chromium.py  the app in a real browser: a `streamlit run` server and Debian's chromium (also the browser tests')
    load.py      N simulated learners over the websocket (`python -m ui.bench load`)
    attack.py    one victim's p95, quiet and while one attacker does its worst (`python -m ui.bench attack`)
    ws.py        the websocket client a simulated learner is
"""

from .steps import main

__all__ = ["main"]
