"""The teacher's guide (docs/teaching.md, docs/teaching.zh.md): every link in it opens its page, on the page its path
names, without an exception, an error box, or the box saying some link values could not be used; the two languages
link the same states; the guide page shows the guide with every link opening in the same tab and, in presenter mode,
keeps presenter mode in every link; the guide walks the break-it switches and the quiz of pages 1, 3 and 4 with links
that open exactly those states, and sets Play's speed for its long scenario."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

import re

from lessons.engine import EngineLesson
from lessons.engine_requests import DemoConfig, decode_requests
from ui.nav import PAGES, guide_links, guide_markdown, same_tab
from ui.playback import SPEEDS
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


BUG_ICON = ":material/bug_report:"  # the one error box a guide link may show: the report of a bug switched on


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_guide_link_loads_cleanly(lang):
    """Open each link the way a browser would (the page of its path, its query parameters): no exception, no error
    box but a deliberate bug's report, and no "some values in this link could not be used" box."""
    notes_title = t("common.url_title", lang)
    for script, params in links(lang):
        at = app_test(script, lang, {k: v for k, v in params.items() if k != "lang"}).run()
        where = f"{script}?{params}"
        assert not at.exception, (where, [e.value for e in at.exception])
        assert not [e for e in at.error if e.icon != BUG_ICON], (where, [e.value for e in at.error])
        assert not [w for w in at.warning if notes_title in w.value], (where, [w.value for w in at.warning])


def find(lang: str, script: str, **want) -> list[dict[str, str]]:
    """The query params of the guide's links to `script` that hold every `want` (name=value) pair."""
    return [q for page, q in links(lang) if page == script and all(q.get(k) == str(v) for k, v in want.items())]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_guide_walks_the_breaks_the_quizzes_and_plays_fast_where_it_is_long(lang):
    """Page 2: the mask removed in a prefill, context_len - 1 and + 1 in a decode; page 3: C's wrong slot at step 0
    (ops=w2); page 4: a module broken; quiz=1 on pages 1, 3 and 4; the preemption link sets a speed above 1 step/s."""
    gather, batch = "app_pages/2_Gather_and_attend.py", "app_pages/3_Batch_decode.py"
    assert find(lang, gather, no_mask=1, mode="prefill")
    assert find(lang, gather, ctx_off=-1) and find(lang, gather, ctx_off=1)
    assert find(lang, batch, ops="w2")
    assert find(lang, "app_pages/4_Engine.py", fault="late_increment")
    for page in ("app_pages/1_Address_translation.py", batch, "app_pages/4_Engine.py"):
        assert find(lang, page, quiz=1), page
    preempt = find(lang, "app_pages/4_Engine.py", num_blocks=20)
    assert len(preempt) == 1 and preempt[0]["speed"] in SPEEDS and float(preempt[0]["speed"]) > 1


@pytest.mark.slow
def test_the_guides_play_time_is_the_scenarios():
    """The guide's "runs N steps" for the preemption link is the number of steps the shipped model takes there."""
    from paged.model import load_model

    (q,) = find("en", "app_pages/4_Engine.py", num_blocks=20)
    lesson = EngineLesson.replay(DemoConfig(num_blocks=20), decode_requests(q["reqs"]), 0, *load_model())
    steps = lesson.run_to_end()
    assert re.search(rf"runs {steps} steps", DOCS["en"].read_text(encoding="utf-8"))
    assert re.search(rf"共 {steps} 步", DOCS["zh"].read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_break_and_quiz_links_open_what_they_say(lang):
    """Each break link opens its break (the mask's changed rows, the count handed to attention, C's stray write into
    A's token 0, the fault in the engine's paged twin) and each quiz link a question."""
    gather, batch = "app_pages/2_Gather_and_attend.py", "app_pages/3_Batch_decode.py"

    def opened(script, q):
        at = app_test(script, lang, {k: v for k, v in q.items() if k != "lang"}).run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    (mask,) = find(lang, gather, no_mask=1)
    br = opened(gather, mask).session_state["gather.mask_break"]
    assert br.changed_rows == int(mask["q_len"]) - 1 and not br.changed[-1]
    for delta in (-1, 1):
        (q,) = find(lang, gather, ctx_off=delta)
        assert opened(gather, q).session_state["gather.len_break"].delta == delta
    (wrong,) = find(lang, batch, ops="w2")
    at = opened(batch, wrong)
    m = at.session_state["batch.lesson"].last_event.misplaced
    assert (m.seq_id, m.written, m.victim, m.victim_token) == (2, 28, 0, 0)
    assert at.selectbox(key="batch.wrong_seq").value == m.seq_id  # issue 38: "Which sequence" says C, not A
    (fault,) = find(lang, "app_pages/4_Engine.py", fault="late_increment")
    at = opened("app_pages/4_Engine.py", fault)
    assert at.session_state["engine.lesson"].config.fault == "late_increment"
    assert [e for e in at.error if e.icon == BUG_ICON]
    for page, name in (("app_pages/1_Address_translation.py", "address"), (batch, "batch"),
                       ("app_pages/4_Engine.py", "engine")):
        for q in find(lang, page, quiz=1):
            held = opened(page, q).session_state[f"quiz.{name}"]
            assert held["question"] is not None, (page, q)


def test_guide_page_shows_the_guide_and_keeps_presenter_mode_in_links():
    at = app_test("app_pages/8_Teaching_guide.py", "zh", {"present": 1}).run()
    assert not at.exception and at.title[0].value == t("guide.title", "zh")
    shown = "\n".join(m.value for m in at.markdown)
    assert "/Engine?lang=zh&steps=1&model=shipped&present=1" in guide_links(shown)
    assert guide_links(shown) and all(link.endswith("present=1") for link in guide_links(shown))
    assert at.query_params["present"] == "1"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_guide_link_opens_in_the_same_tab(lang):
    """The guide page shows every app link of its file as an anchor with target="_self" (Streamlit opens a markdown
    link in a new tab), in a block that allows that HTML, and no markdown app link is left."""
    at = app_test("app_pages/8_Teaching_guide.py", lang).run()
    body = [m for m in at.markdown if "target=" in m.value]
    assert len(body) == 1 and body[0].proto.allow_html
    shown = body[0].value
    expected = guide_links(DOCS[lang].read_text(encoding="utf-8"))
    anchors = re.findall(r'<a href="([^"]*)" target="_self">', shown)
    assert len(anchors) == len(expected) >= 20 and guide_links(shown) == expected
    assert not re.search(r"\]\(/", shown) and "_blank" not in shown


def test_same_tab_keeps_text_and_outside_links():
    """same_tab turns only app links into anchors (the href HTML-escaped, read back unescaped), keeps each text, and
    leaves links to other sites as markdown."""
    text = "[a *b*](/Engine?lang=en&steps=3) and [c](https://example.org/x)"
    out = same_tab(text)
    assert out == '<a href="/Engine?lang=en&amp;steps=3" target="_self">a *b*</a> and [c](https://example.org/x)'
    assert guide_links(out) == ["/Engine?lang=en&steps=3"]


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
