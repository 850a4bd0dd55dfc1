"""The app's entry point (`streamlit run app.py`): the navigation (ui.nav) with page names in the session's
language and every page at its usual URL path; it runs the chosen page from app_pages/."""

from ui import nav

nav.run()
