"""EngineLesson's moves other than forward (back, reset, a new config, a loaded scenario) are replays done in place;
each lands on exactly the state an independent lesson reaches by adding the same requests and stepping forward.
Failures and add outcomes are data (`news`), never raised."""

from __future__ import annotations

import pytest
import torch

from lessons.engine import EngineLesson
from lessons.engine_requests import DemoConfig, RequestError, RequestSpec
from paged.config import ModelConfig
from paged.model import ByteTokenizer, TinyLlama


@pytest.fixture(scope="module")
def tiny():
    """A one-layer random model (its outputs still depend on every cached K/V) and the byte tokenizer."""
    torch.manual_seed(1)
    config = ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1)
    return TinyLlama(config).eval(), ByteTokenizer()


CONFIG = DemoConfig(block_size=4, num_blocks=24, seed=3)
SPECS = [RequestSpec("hello paged", max_tokens=9), RequestSpec("1 2 3", "continue", max_tokens=6),
         RequestSpec("late one", max_tokens=5, temperature=1.0, seed=2, at_step=2)]


def stepped(config: DemoConfig, specs: list[RequestSpec], steps: int, model, tok) -> EngineLesson:
    """The independent reference: a new lesson, each request added, then `steps` steps forward (no replay)."""
    lesson = EngineLesson(config, model, tok)
    for spec in specs:
        lesson.add(spec)
    for _ in range(steps):
        lesson.step()
    return lesson


def state(lesson: EngineLesson) -> dict:
    """Everything a page draws, as plain values."""
    view = lesson.view
    return {"config": lesson.config, "steps": len(lesson.steps), "log": lesson.all_specs(),
            "pending": list(lesson.pending), "rows": lesson.rows(), "tables": view.tables,
            "queues": lesson.queues(), "slots": [s["paged"]["slot_mapping"] for s in lesson.step_dicts],
            "history": lesson.history, "allocations": lesson.allocations, "display": lesson.display_ids(),
            "verdict": lesson.twins.verdict(), "can_step": lesson.can_step()}


def test_back_reset_and_a_new_config_land_where_stepping_forward_does(tiny):
    model, tok = tiny
    lesson = stepped(CONFIG, SPECS, 5, model, tok)
    assert lesson.back() and state(lesson) == state(stepped(CONFIG, SPECS, 4, model, tok))
    assert lesson.forward() and state(lesson) == state(stepped(CONFIG, SPECS, 5, model, tok))
    lesson.reset()
    assert len(lesson.steps) == 5, "a reset waits for the page's next sync"
    assert lesson.sync(CONFIG, model, tok) is False
    assert state(lesson) == state(stepped(CONFIG, SPECS, 0, model, tok))
    lesson.forward()
    bigger = DemoConfig(block_size=8, num_blocks=40, seed=1)
    assert lesson.sync(bigger, model, tok) is True, "a new config replays from step 0 (the page says so)"
    assert state(lesson) == state(stepped(bigger, SPECS, 0, model, tok))
    assert lesson.sync(bigger, model, tok) is False and lesson.back() is False


def test_a_loaded_scenario_replaces_the_requests_under_the_new_config(tiny):
    model, tok = tiny
    lesson = stepped(CONFIG, SPECS, 3, model, tok)
    other = [RequestSpec("abc", "continue", max_tokens=4)]
    lesson.load(other)
    assert lesson.sync(DemoConfig(), model, tok) is False
    assert state(lesson) == state(stepped(DemoConfig(), other, 0, model, tok))


def test_start_replays_a_link_to_its_step(tiny):
    model, tok = tiny
    link = EngineLesson.start(CONFIG, SPECS, 6, model, tok)
    assert state(link) == state(stepped(CONFIG, SPECS, 6, model, tok)) and not link.take_news()


def test_failures_are_news_and_change_nothing_else(tiny, monkeypatch):
    model, tok = tiny
    lesson = stepped(CONFIG, SPECS, 2, model, tok)
    before = state(lesson)

    def boom(self):
        raise RuntimeError("scheduler stuck: test")

    with monkeypatch.context() as m:
        m.setattr(EngineLesson, "step", boom)
        assert lesson.forward() is True
        assert lesson.take_news() == {"failure": ("step_failed", "scheduler stuck: test")}
        assert state(lesson) == before and lesson.take_news() == {}
        link = EngineLesson.start(CONFIG, SPECS, 4, model, tok)  # a link whose steps cannot be replayed
        assert link.take_news() == {"failure": ("replay_failed", "scheduler stuck: test")}
        assert state(link) == state(stepped(CONFIG, SPECS, 0, model, tok))
    with pytest.raises((RuntimeError, ValueError)):  # no pool this large fits in memory: the page shows an error box
        lesson.sync(DemoConfig(block_size=32, num_blocks=10**12), model, tok)
    assert state(lesson) == before, "a config that cannot be built leaves the lesson as it was"


def test_offer_reports_the_added_id_or_the_refusal(tiny):
    model, tok = tiny
    lesson = EngineLesson(CONFIG, model, tok)
    lesson.offer(RequestSpec("hi", max_tokens=3))
    lesson.offer(RequestSpec("later", max_tokens=3, at_step=4))
    lesson.offer(RequestSpec("y" * 90, max_tokens=64))  # 156 tokens > 24 blocks of 4
    news = lesson.take_news()
    assert news["added"] is None, "the latest add arrives later: no request id yet"
    err = news["add_error"]
    assert isinstance(err, RequestError) and err.code == "pool" and err.detail["need"] == 39
    assert lesson.all_specs() == [RequestSpec("hi", max_tokens=3), RequestSpec("later", max_tokens=3, at_step=4)]


def test_exports_made_when_read_equal_the_ones_taken_at_each_step(tiny):
    """A replay makes no step exports; read after the last step (preemptions, forks and prefix hits
    on the way) they equal those taken right after each step: no later step changes a record."""
    from lessons.engine_views import step_export

    model, tok = tiny
    cfg = DemoConfig(block_size=4, num_blocks=16, enable_prefix_caching=True, seed=5)
    specs = [RequestSpec("abcdefgh" * 2, "continue", max_tokens=24),
             RequestSpec("abcdefgh" * 2, max_tokens=20),
             RequestSpec("fork me", max_tokens=12, temperature=1.0, seed=4, n=2, at_step=3)]
    live = EngineLesson(cfg, model, tok)
    for spec in specs:
        live.add(spec)
    at_each = []
    while live.step() is not None:
        at_each.append(step_export(live.steps[-1]))
    assert any(s.paged.preempted for s in live.steps) and any(s.paged.forked for s in live.steps)
    assert live._exports == [] and live.step_dicts == at_each, "read late, each export is the same"
    replayed = EngineLesson.replay(cfg, specs, len(live.steps), model, tok)
    assert replayed._exports == [], "a replay reaches its step without exporting any"

    def untimed(lesson: EngineLesson) -> list[dict]:
        """The export's steps without elapsed_ms (a timing, different in every run)."""
        return [{**s, "paged": {**s["paged"], "elapsed_ms": None}} for s in lesson.trace()["steps"]]

    assert untimed(replayed) == untimed(live) and state(replayed) == state(live)


def test_the_export_text_equals_one_json_encoding_of_the_trace(tiny):
    """trace_text(), joined from each step's text made once, is character for character json.dumps(trace(),
    indent=2, ensure_ascii=False) at step 0, along the run, after Back and after a step past a Back; a prompt that
    looks like the text's own marker changes nothing."""
    import json

    model, tok = tiny
    lesson = EngineLesson(DemoConfig(block_size=4, num_blocks=24, seed=3), model, tok)

    def check() -> None:
        assert lesson.trace_text() == json.dumps(lesson.trace(), indent=2, ensure_ascii=False, default=str)

    check()  # no step: an empty list
    lesson.add(RequestSpec('"steps": "steps-0123456789abcdef" 你好', max_tokens=6))
    lesson.add(RequestSpec("hello paged", max_tokens=9))
    for _ in range(5):
        lesson.step()
        check()
    assert len(lesson.step_texts) == 5
    assert lesson.back() and len(lesson.steps) == 4
    check()
    lesson.step()
    check()
    assert json.loads(lesson.trace_text())["steps_run"] == 5
