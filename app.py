"""The app's entry point (`streamlit run app.py`): beyond PAGED_MAX_SESSIONS learners a "server full" page
(ui.capacity; a new tab's first run paced there too), else the navigation (ui.nav) with page names in the session's
language and every page at its usual URL path; it runs the chosen page from app_pages/. After a run that imported
libraries, they leave the garbage collector's view (ui.heap)."""

from ui import nav
from ui.capacity import admit_or_stop, first_run_paced, serves_sessions, session_ids
from ui.heap import collect_departed, freeze_new_imports

with first_run_paced():  # a new tab's runs, up to its first page, wait their turn (ui.capacity)
    admit_or_stop()
    nav.run()
if serves_sessions():  # a real server (not AppTest): what this run imported leaves the collector's view (ui.heap)
    freeze_new_imports()
    collect_departed(session_ids())  # learners who left: their state freed for the next class (ui.heap)
