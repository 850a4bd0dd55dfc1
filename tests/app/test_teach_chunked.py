"""Page 4 · Engine through AppTest, in both languages: the chunked-prefill scenario and toggle (a long prompt enters
in chunks beside decodes; the chain and the state rule show it), its URL round trip, old links without the new
knobs, and the prefix-hit quiz question checked against what the step then does."""

from __future__ import annotations


import pytest

from lessons.engine import EngineLesson
from lessons.engine_requests import SAME_PROMPT, DemoConfig, RequestSpec, encode_requests
from paged.model import load_model
from ui.strings import t
from viz.colors import seq_label
from viz.chain_live import chain_labels

from .app_util import app_test

ENGINE = "app_pages/4_Engine.py"
LONG = 2  # the chunked scenario's long prompt: sequence C


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def demo(at):
    return at.session_state["engine.lesson"]


def chain_texts(at) -> list[str]:
    """The chain diagram's arrow labels (viz.chain_live: HTML, not a figure)."""
    markup = next(h.proto.body for h in at.get("html") if "paged-chain" in h.proto.body
                  and "<style>" not in h.proto.body)
    return chain_labels(markup)


def chunked_page(lang: str, steps: int):
    """The page with the chunked scenario loaded and `steps` steps taken."""
    at = app_test(ENGINE, lang).run()
    at.selectbox(key="engine.scenario").set_value("chunked").run()
    for _ in range(steps):
        at.button(key="engine.step").click().run()
    no_exception(at)
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chunked_scenario_shows_a_mixed_step(lang):
    """Step 2 of the chunked scenario: the toggle is on and in the URL; the step is mixed, told with the chunk's
    own why; the chain says "prefill chunk + decode" and shows "—" with the note for the mid-prefill prompt; after
    its last chunk the state table has one "prefill chunk k/4" row per chunk, cached growing by each chunk's
    length and nothing generated until the last."""
    at = chunked_page(lang, 2)
    assert at.toggle(key="engine.enable_chunked_prefill").value is True
    assert at.query_params["enable_chunked_prefill"] == "1" and at.query_params["max_num_batched_tokens"] == "32"
    trace = demo(at).last.paged
    assert trace.phase == "mixed"
    chunk = dict(trace.why)["prefill_chunk"]
    assert chunk["seq"] == LONG and (chunk["start"], chunk["end"]) == (0, 29)
    assert any(t("engine.why_prefill_chunk", lang, **{**chunk, "seq": seq_label(LONG)}) in i.value for i in at.info)
    texts = chain_texts(at)
    assert any(x.startswith(t("chain.phase_mixed", lang)) for x in texts), texts
    assert any("C —" in x and t("chain.out_mid_prefill", lang, seqs="C") in x for x in texts), texts
    for _ in range(3):
        at.button(key="engine.step").click().run()
    at.selectbox(key="engine.rule_seq").set_value(LONG).run()
    no_exception(at)
    rows = at.session_state["engine.rule_rows"]
    chunks = [r for r in rows if r.phase == "prefill"]
    assert [len(r.fed) for r in chunks] == [30, 30, 30, 21]  # 32 a step, less the two decodes beside it
    assert [r.cached_after for r in chunks] == [30, 60, 90, 111]
    assert [r.generated for r in chunks[:3]] == [()] * 3 and len(chunks[3].generated) == 1
    table = next(d.value for d in at.table if t("chain.col_fed", lang) in d.value.columns)
    assert list(table[t("chain.col_phase", lang)][:4]) == [t("chain.phase_chunk", lang, chunk=k, chunks=4)
                                                           for k in range(1, 5)]


def test_the_toggle_round_trips_through_the_url():
    """A link taken at step 3 of the chunked scenario lands on the same step with chunked prefill on; the toggle
    switched off and on again replays from step 0 under each setting."""
    at = chunked_page("en", 3)
    params = {k: v for k, v in at.query_params.items() if k != "lang"}
    shared = app_test(ENGINE, params=params).run()
    no_exception(shared)
    assert shared.toggle(key="engine.enable_chunked_prefill").value is True
    a, b = demo(at), demo(shared)
    assert b.config == a.config and b.config.enable_chunked_prefill and len(b.steps) == 3
    assert b.last.paged.phase == "mixed" and b.last.paged.slot_mapping == a.last.paged.slot_mapping
    shared.toggle(key="engine.enable_chunked_prefill").set_value(False).run()
    no_exception(shared)
    assert shared.query_params["enable_chunked_prefill"] == "0"
    assert not demo(shared).config.enable_chunked_prefill


def test_an_old_link_without_the_new_knobs_loads_as_before():
    """A link made before the toggles existed (no enable_chunked_prefill / enable_prefix_caching) replays with both
    off: the same step as the engine replayed directly with the old configuration, and no URL warning."""
    specs = [RequestSpec("The quick brown fox jumps over the lazy dog."),
             RequestSpec("1 2 3 4 5 6 7", "continue", max_tokens=24)]
    old = dict(block_size=8, num_blocks=32, watermark=0.0, max_num_batched_tokens=512, max_num_seqs=8,
               reqs=encode_requests(specs), steps=4)
    at = app_test(ENGINE, params=old).run()
    no_exception(at)
    assert not at.warning
    assert at.toggle(key="engine.enable_chunked_prefill").value is False
    assert at.toggle(key="engine.enable_prefix_caching").value is False
    model, tok = load_model()
    direct = EngineLesson.replay(DemoConfig(), specs, 4, model, tok)
    assert demo(at).config == DemoConfig()
    assert demo(at).last.paged.slot_mapping == direct.last.paged.slot_mapping
    assert [(r.text, r.cached_token_count) for r in demo(at).rows()] == \
        [(r.text, r.cached_token_count) for r in direct.rows()]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_prefix_quiz_answer_is_what_the_step_shares(lang):
    """Prefix caching on, the same prompt arriving after step 1: at that state the quiz asks how many of its blocks
    hit; the step then feeds it from token hits·block_size on (the hit blocks are not computed again), and the
    reveal gives the why in the page's language."""
    specs = [RequestSpec(SAME_PROMPT), RequestSpec(SAME_PROMPT, at_step=1)]
    at = app_test(ENGINE, lang, dict(quiz=1, block_size=4, num_blocks=64, enable_prefix_caching=1,
                                     reqs=encode_requests(specs), steps=1)).run()
    no_exception(at)
    assert at.toggle(key="engine.enable_prefix_caching").value is True
    held = at.session_state["quiz.engine"]
    q = held["question"]
    assert q.kind == "prefix_hits"
    at.radio(key=f"quiz.engine.choice.{held['n']}").set_value(q.answer).run()
    at.button(key="quiz.engine.reveal").click().run()
    no_exception(at)
    assert any(t("quiz.why_prefix_rule", lang, most=q.why[-1][1]["most"]) in s.value for s in at.success)
    at.button(key="engine.step").click().run()
    no_exception(at)
    fed = next(s for s in demo(at).last.paged.seqs if s.seq_id == q.prompt[1]["seq"])
    assert fed.positions[0] == q.answer * 4 and q.answer == 12  # 52 tokens: 12 full blocks before the last one
