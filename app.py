"""The app's entry point (`streamlit run app.py`): beyond PAGED_MAX_SESSIONS learners a "server full" page
(ui.capacity; a new tab's first run paced there too), else the navigation (ui.nav) with page names in the session's language and every page at its usual
URL path; it runs the chosen page from app_pages/."""

from ui import nav
from ui.capacity import admit_or_stop, first_run_paced

admit_or_stop()
with first_run_paced():  # a new tab's first run waits its turn (ui.capacity)
    nav.run()
