"""Helpers for the app tests: where the pages are, and an AppTest runner in a chosen language
(`from .app_util import app_test`)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # pages import `ui` and `paged` from the repo root, as `streamlit run app.py` does
    sys.path.insert(0, str(ROOT))

from streamlit.source_util import page_sort_key  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = ROOT / "app.py"           # the entry point: the navigation, which runs the chosen page
PAGES_DIR = ROOT / "app_pages"  # every page script, each runnable on its own too
TIMEOUT = 30  # seconds: the first run imports torch and plotly


def page_files() -> list[Path]:
    """The entry point (it runs the home page), then every page script of app_pages/ by number."""
    return [APP] + sorted(PAGES_DIR.glob("*.py"), key=page_sort_key)


def app_test(path: Path | str, lang: str = "en", params: dict | None = None) -> AppTest:
    """An AppTest of one page (not yet run) with `?lang=` and other query parameters set."""
    at = AppTest.from_file(str(ROOT / path), default_timeout=TIMEOUT)
    at.query_params["lang"] = lang
    for name, value in (params or {}).items():
        at.query_params[name] = str(value)
    return at


def no_exception(at: AppTest) -> None:
    """The run raised nothing (the page shows no traceback); the failure lists what it raised."""
    assert not at.exception, [e.value for e in at.exception]


def url_warning(at: AppTest) -> str:
    """The text of every warning box (the URL-notes box among them)."""
    return " ".join(w.value for w in at.warning)


def fragment_click(at: AppTest, key: str, monkeypatch) -> AppTest:
    """Click button `key`, drawn inside the page's only st.fragment, and rerun that fragment alone, as a browser
    does (AppTest itself reruns the whole script): the rerun request names the fragment's id."""
    import streamlit.testing.v1.local_script_runner as runner

    fragments = list(at._fragment_storage._fragments)
    assert len(fragments) == 1, fragments
    plain = runner.RerunData
    with monkeypatch.context() as m:
        m.setattr(runner, "RerunData", lambda **kw: plain(fragment_id=fragments[0], **kw))
        return at.button(key=key).click().run()
