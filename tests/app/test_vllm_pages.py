"""Pages 4 and 6 through AppTest: the "real vLLM" column says "identical" step after step (English and 简体中文),
and without vLLM one line says how to install it."""

from __future__ import annotations

from ui.strings import t

from .app_util import app_test, no_exception

from vllm_util import need_vllm

ENGINE, SHARING = "app_pages/4_Engine.py", "app_pages/6_Sharing.py"


def run_steps(at, page: str, n: int):
    for _ in range(n):
        at.button(key=f"{page}.step").click().run()
    no_exception(at)
    return at


def identical_text(at, lang: str) -> list[str]:
    head = t("vllm.identical", lang, steps=0).split("0")[0]  # the sentence up to its number
    return [s.value for s in at.success if s.value.startswith(head)]


def test_sharing_page_shows_vllm_identical_in_both_languages():
    """Page 6, shared prefix: after 3 steps vLLM's own KVCacheManager agrees (hits included), said in English and
    in 简体中文, and the side-by-side table lists our table next to vLLM's."""
    need_vllm()
    for lang in ("en", "zh"):
        at = run_steps(app_test(SHARING, lang).run(), "sharing", 3)
        side = at.session_state["sharing.vllm_side"]
        assert side.verdict is None and len(side.steps) == 3
        assert identical_text(at, lang) == [t("vllm.identical", lang, steps=3)]
        assert any(s.hits_ours for step in side.steps for s in step.seqs), "the prefix scenario hits the cache"
        assert any(h.value == t("vllm.header", lang) for h in at.subheader)


def test_engine_page_tiny_pool_is_identical_with_preemptions():
    """Page 4, the tiny-pool scenario run to the end (it preempts): identical to vLLM at every step."""
    need_vllm()
    at = app_test(ENGINE).run()
    at.selectbox(key="engine.scenario").set_value("tiny_pool").run()
    at.button(key="engine.run").click().run()
    no_exception(at)
    lesson, side = at.session_state["engine.lesson"], at.session_state["engine.vllm_side"]
    assert any(s.paged.preempted for s in lesson.steps)
    assert side.verdict is None and len(side.steps) == len(lesson.steps)
    assert identical_text(at, "en") == [t("vllm.identical", "en", steps=len(lesson.steps))]


def test_without_vllm_one_line_says_how_to_install(monkeypatch):
    """With vLLM not importable (simulated), page 6 still says which vLLM version it mirrors and why, then the
    install line, and drives nothing."""
    import ui.vllm_side

    monkeypatch.setattr(ui.vllm_side, "vllm_available", lambda: False)
    at = run_steps(app_test(SHARING).run(), "sharing", 1)
    from paged.chapters.vllm_twin import INSTALL_HINT

    from lessons.vllm_side import VLLM_VERSION

    captions = [c.value for c in at.caption]
    assert t("vllm.missing", "en", hint=INSTALL_HINT) in captions
    assert t("vllm.caption", "en", version=VLLM_VERSION) in captions
    assert "sharing.vllm_side" not in at.session_state
