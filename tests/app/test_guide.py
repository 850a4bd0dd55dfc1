"""The teacher's guide (docs/teaching.md, docs/teaching.zh.md): every link in it opens its page, on the page its path
names, without an exception, an error box, or the box saying some link values could not be used; the two languages
link the same states; the guide page shows the guide and, in presenter mode, keeps presenter mode in every link."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from ui.nav import PAGES, guide_links, guide_markdown
from ui.strings import t

from .app_util import ROOT, app_test

DOCS = {"en": ROOT / "docs" / "teaching.md", "zh": ROOT / "docs" / "teaching.zh.md"}
SCRIPT_OF = {p.url_path: p.script for p in PAGES}


def links(lang: str) -> list[tuple[str, dict[str, str]]]:
    """(page script, query params) of every link of the guide in `lang`, query values decoded."""
    out = []
    for link in guide_links(DOCS[lang].read_text(encoding="utf-8")):
        parts = urlsplit(link)
        out.append((SCRIPT_OF[parts.path.strip("/")], dict(parse_qsl(parts.query, keep_blank_values=True))))
    return out


def test_both_guides_link_the_same_states_in_their_language():
    """Same pages, same states, in order; each link sets its guide's language; every path is a page of the app."""
    en, zh = links("en"), links("zh")
    assert len(en) >= 12 and len(en) == len(zh)
    for (page_en, q_en), (page_zh, q_zh) in zip(en, zh):
        assert page_en == page_zh and q_en["lang"] == "en" and q_zh["lang"] == "zh"
        assert {k: v for k, v in q_en.items() if k != "lang"} == {k: v for k, v in q_zh.items() if k != "lang"}
    assert {page for page, _ in en} >= {p.script for p in PAGES if p.name not in ("guide",)}


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_guide_link_loads_cleanly(lang):
    """Open each link the way a browser would (the page of its path, its query parameters): no exception, no error
    box, and no "some values in this link could not be used" box."""
    notes_title = t("common.url_title", lang)
    for script, params in links(lang):
        at = app_test(script, lang, {k: v for k, v in params.items() if k != "lang"}).run()
        where = f"{script}?{params}"
        assert not at.exception, (where, [e.value for e in at.exception])
        assert not at.error, (where, [e.value for e in at.error])
        assert not [w for w in at.warning if notes_title in w.value], (where, [w.value for w in at.warning])


def test_guide_page_shows_the_guide_and_keeps_presenter_mode_in_links():
    at = app_test("app_pages/8_Teaching_guide.py", "zh", {"present": 1}).run()
    assert not at.exception and at.title[0].value == t("guide.title", "zh")
    shown = "\n".join(m.value for m in at.markdown)
    assert "/Engine?lang=zh&steps=1&model=shipped&present=1" in shown
    assert guide_links(shown) and all(link.endswith("present=1") for link in guide_links(shown))
    assert at.query_params["present"] == "1"


def test_guide_markdown_adds_present_only_when_asked():
    """present=1 only when asked; without it every link is left as written, outside links always."""
    text = ("# Title\n[a](/Engine?lang=en&steps=3&model=shipped) and [b](/?lang=en) and [c](https://example.org/x) "
            "[e](/Sharing) [f](/Address_translation?lang=en)")
    assert guide_markdown(text, present=False) == text.split("\n", 1)[1]
    assert guide_links(guide_markdown(text, present=True)) == [
        "/Engine?lang=en&steps=3&model=shipped&present=1", "/?lang=en&present=1", "/Sharing?present=1",
        "/Address_translation?lang=en&present=1"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_guide_links_to_the_model_pages_name_their_model(lang):
    """Every guide link to a page with a model picker (a page script that calls ui.model_picker) names its model,
    so a server whose default is another checkpoint (PAGED_MODEL_DIR) still opens what the lesson was written for."""
    root = ROOT
    model_pages = {p.url_path for p in PAGES if "model_picker" in (root / p.script).read_text(encoding="utf-8")}
    assert model_pages == {"Engine", "Bug_lab", "Sharing"}
    doc = root / "docs" / ("teaching.zh.md" if lang == "zh" else "teaching.md")
    to_model_pages = [link for link in guide_links(doc.read_text(encoding="utf-8"))
                      if link.partition("?")[0].strip("/") in model_pages]
    assert len(to_model_pages) >= 6
    assert [link for link in to_model_pages if "model=shipped" not in link.partition("?")[2].split("&")] == []


@pytest.mark.slow
def test_with_a_default_checkpoint_the_guides_bug_lab_link_still_shows_the_shipped_models_recall(checkpoint,
                                                                                                 monkeypatch):
    """PAGED_MODEL_DIR makes a checkpoint the default model; the guide's bug-lab link (as the guide page shows it)
    still opens the shipped model's recall task it was written for, with nothing named in the link box."""
    monkeypatch.setenv("PAGED_MODEL_DIR", str(checkpoint))
    monkeypatch.delenv("PAGED_MODEL_DIRS", raising=False)
    guide = app_test("app_pages/8_Teaching_guide.py", "en").run()
    shown = guide_links("\n".join(m.value for m in guide.markdown))
    bug_lab = [urlsplit(link) for link in shown if urlsplit(link).path == "/Bug_lab"]
    assert bug_lab and all(("model", "shipped") in parse_qsl(u.query) for u in bug_lab)
    at = app_test("app_pages/5_Bug_lab.py", "en", {k: v for k, v in parse_qsl(bug_lab[0].query) if k != "lang"}).run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert at.selectbox(key="buglab.model").value == "shipped"
    assert at.radio(key="buglab.task").value == "recall"
    assert t("common.url_title", "en") not in " ".join(w.value for w in at.warning)
