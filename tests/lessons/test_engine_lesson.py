"""The engine / sharing pages' replayable state: requests + steps rebuild the exact engine state, URL text is bounded,
bad requests raise RequestError with a code and change nothing, late arrivals join at their step, and the views
(state-rule series, table changes, memory snapshots) say what the engine did."""

from __future__ import annotations

import pytest
import torch

from paged.config import ModelConfig
from lessons.engine import EngineLesson, table_changes
from lessons.engine_requests import (MAX_PROMPT_CHARS, MAX_REQUESTS, DemoConfig, RequestError, RequestSpec,
                                   decode_requests, encode_requests)
from paged.model import ByteTokenizer, TinyLlama
from paged.model.tokenizer import BOS, SEP

from helpers import prompt_logits_scale, scaled_atol


@pytest.fixture(scope="module")
def tiny():
    """A small random model: fast, and its outputs depend on every cached K/V. One torch thread, as the app runs
    (a thread pool costs more than these tiny ops)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = ModelConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256)
    yield TinyLlama(cfg).eval(), ByteTokenizer()
    torch.set_num_threads(threads)


SPECS = [RequestSpec("hello paged world", max_tokens=12), RequestSpec("1 2 3", "continue", max_tokens=8),
         RequestSpec("abc", max_tokens=6, temperature=1.0, seed=5, at_step=3)]


def outputs(demo):
    return [(r.seq_id, r.text, r.status, r.cached_token_count) for r in demo.rows()]


def test_replay_reproduces_live_session(tiny):
    """Adding and stepping live, then replaying (config, requests, steps), gives identical sequences and traces."""
    model, tok = tiny
    live = EngineLesson(DemoConfig(block_size=4, num_blocks=40), model, tok)
    for spec in SPECS:
        live.add(spec)
    assert len(live.requests) == 2 and len(live.pending) == 1, "the third request arrives after step 3"
    for _ in range(7):
        live.step()
    again = EngineLesson.replay(live.config, live.all_specs(), 7, model, tok)
    assert outputs(again) == outputs(live)
    slots = lambda demo: [s["paged"]["slot_mapping"] for s in demo.step_dicts]  # noqa: E731
    assert slots(again) == slots(live)
    scale = prompt_logits_scale(model, tok, [spec.prompt for spec in SPECS])
    assert live.twin_summary()[1] and live.twin_summary()[0] < scaled_atol(scale, 1e-5)


def test_late_arrival_joins_after_its_step(tiny):
    """A request with at_step=3 is in the waiting queue right after step 3, not before."""
    model, tok = tiny
    demo = EngineLesson.replay(DemoConfig(block_size=4, num_blocks=40), SPECS, 2, model, tok)
    assert len(demo.engine.sequences) == 2
    demo.step()
    waiting, _, _ = demo.queues()
    assert len(demo.engine.sequences) == 3 and 2 in waiting


def test_request_errors_have_codes_and_change_nothing(tiny):
    model, tok = tiny
    demo = EngineLesson(DemoConfig(block_size=4, num_blocks=8), model, tok)
    invisible = ("\u200b\u200d\u200f", "\x00\x07\t\u3000")  # zero-width space/joiner, RLM; controls, ideographic space
    for spec, code in ((RequestSpec("   "), "empty"), *((RequestSpec(p), "empty") for p in invisible),
                       (RequestSpec("x" * (MAX_PROMPT_CHARS + 1)), "too_long"),
                       (RequestSpec("y" * 60, max_tokens=64), "pool")):  # 126 tokens > 8 blocks of 4
        with pytest.raises(RequestError) as info:
            demo.add(spec)
        assert info.value.code == code
    assert demo.all_specs() == [] and not demo.engine.sequences
    assert "never fit" in str(info.value)


def test_prompts_with_invisible_characters_among_visible_ones_are_added(tiny):
    """Emoji joined by zero-width joiners, Arabic with a direction mark: visible text, so added as typed."""
    model, tok = tiny
    demo = EngineLesson(DemoConfig(block_size=4, num_blocks=64), model, tok)
    prompts = ["\U0001f469\u200d\U0001f467", "\u0645\u0631\u062d\u0628\u0627\u200f", "\u200bx"]
    for prompt in prompts:
        demo.add(RequestSpec(prompt, max_tokens=2))
    assert [s.prompt for s in demo.all_specs()] == prompts


def test_replay_keeps_requests_this_config_refuses(tiny):
    """A replayed request the pool cannot hold is reported and kept (the link keeps it); a bigger pool runs it.
    A malformed one (empty prompt) is reported and dropped."""
    model, tok = tiny
    specs = [RequestSpec("y" * 40, max_tokens=30), RequestSpec(" "), RequestSpec("ok", max_tokens=2)]
    small = EngineLesson.replay(DemoConfig(block_size=4, num_blocks=8), specs, 0, model, tok)
    assert [e.code for _, e in small.rejected] == ["pool", "empty"]
    assert small.all_specs() == [specs[0], specs[2]] and small.requests == [specs[2]]
    big = EngineLesson.replay(DemoConfig(block_size=4, num_blocks=64), small.all_specs(), 0, model, tok)
    assert not big.rejected and big.requests == [specs[0], specs[2]]


def test_at_most_max_requests(tiny):
    model, tok = tiny
    demo = EngineLesson(DemoConfig(num_blocks=200), model, tok)
    for _ in range(MAX_REQUESTS):
        demo.add(RequestSpec("a", max_tokens=2))
    with pytest.raises(RequestError) as info:
        demo.add(RequestSpec("a", max_tokens=2))
    assert info.value.code == "too_many"


def test_url_round_trip_and_bounds():
    """encode → decode is the identity; hostile text is clamped, cut, or skipped, never raised."""
    assert decode_requests(encode_requests(SPECS)) == SPECS
    got = decode_requests('[{"p":"' + "z" * 999 + '","k":"recall","m":100000,"T":-3,"n":99,"a":-1},'
                          '{"m":3},"junk",{"p":"ok","k":"nope","m":true}]')
    assert got[0].prompt == "z" * MAX_PROMPT_CHARS and got[0].max_tokens == 128 and got[0].temperature == 0.0
    assert got[0].n == 4 and got[0].at_step == 0
    assert got[1] == RequestSpec("ok")
    assert decode_requests("not json") is None and decode_requests('{"p": 1}') is None
    assert len(decode_requests(encode_requests([RequestSpec("a")] * 20))) == MAX_REQUESTS


def test_recall_prompt_ends_with_sep():
    tok = ByteTokenizer()
    assert RequestSpec("hi").token_ids(tok) == [BOS, ord("h"), ord("i"), SEP]
    assert RequestSpec("hi", "continue").token_ids(tok) == [BOS, ord("h"), ord("i")]


def test_cache_series_follows_the_state_rule_and_shows_preemption(tiny):
    """cached_token_count == prompt_len + generated − 1 after each step that ran a sequence; a tiny pool preempts,
    and the preempted sequence's cached count drops to 0 in the series."""
    model, tok = tiny
    specs = [RequestSpec("abcdefgh" * 2, "continue", max_tokens=24) for _ in range(3)]
    demo = EngineLesson.replay(DemoConfig(block_size=4, num_blocks=16), specs, 0, model, tok)
    demo.run_to_end()
    preempted = {s for step in demo.steps for s in step.paged.preempted}
    assert preempted, "16 blocks of 4 cannot hold three 17 + 24 token sequences"
    series = demo.cache_series()
    victim = series[min(preempted)]
    assert 0 in victim["cached"]
    ran = {(i + 1, s.seq_id) for i, step in enumerate(demo.steps) for s in step.paged.seqs}
    for sid, d in series.items():
        for step, cached, rule in zip(d["step"], d["cached"], d["rule"]):
            if (step, sid) in ran:
                assert cached == rule
    worst, agree = demo.twin_summary()
    paged, contiguous = demo.twins.outputs()
    assert agree == ([o.token_ids for o in paged] == [o.token_ids for o in contiguous]) and agree
    assert worst <= demo.twin_tolerance()


def test_sharing_views(tiny):
    """Prefix caching: the second equal prompt hits every full block but the last; n=2 forks share blocks and the
    history records held < table blocks."""
    model, tok = tiny
    cfg = DemoConfig(block_size=4, num_blocks=64, enable_prefix_caching=True)
    text = "x" * 14  # BOS + 14 + SEP = 16 tokens = 4 full blocks
    demo = EngineLesson.replay(cfg, [RequestSpec(text, max_tokens=4), RequestSpec(text, max_tokens=4, at_step=1)],
                             2, model, tok)
    assert [a.hits for a in demo.allocations] == [[False] * 4, [True, True, True, False]]
    assert demo.history[-1].held_blocks < demo.history[-1].table_blocks
    fork = EngineLesson.replay(cfg, [RequestSpec("abcde", max_tokens=6, temperature=1.0, seed=1, n=2)], 2, model, tok)
    assert fork.steps[0].paged.forked == {0: [1]} and fork.steps[1].paged.copies


def test_sharing_views_record_admissions_in_mixed_steps(tiny):
    """With chunked prefill a prompt is admitted in a mixed step (next to a decode) and grows chunk by chunk: each
    admitted sequence is recorded once, at the step it was admitted, with its prefix hits."""
    model, tok = tiny
    cfg = DemoConfig(block_size=4, num_blocks=64, enable_prefix_caching=True, enable_chunked_prefill=True,
                     max_num_batched_tokens=8)
    text = "x" * 14  # BOS + 14 + SEP = 16 tokens = 4 full blocks
    demo = EngineLesson.replay(cfg, [RequestSpec(text, max_tokens=12), RequestSpec(text, max_tokens=4, at_step=4)],
                             12, model, tok)
    admitted = [(a.seq_id, a.step) for a in demo.allocations]
    assert [sid for sid, _ in admitted] == [0, 1]
    second = demo.steps[admitted[1][1] - 1].paged
    assert second.phase == "mixed" and 1 not in second.block_tables_before
    assert demo.allocations[1].hits[:3] == [True, True, True]


def test_table_changes():
    assert table_changes({0: [3, 1], 1: [4]}, {0: [3, 1, 7], 2: [5]}) == [
        (0, [3, 1], [3, 1, 7], [7]), (1, [4], [], []), (2, [], [5], [5])]


def test_export_is_json_ready(tiny):
    import json
    model, tok = tiny
    demo = EngineLesson.replay(DemoConfig(), SPECS[:1], 2, model, tok)
    data = json.loads(json.dumps(demo.trace()))
    assert data["steps_run"] == 2 and len(data["steps"]) == 2 and data["steps"][0]["paged"]["phase"] == "prefill"


@pytest.mark.parametrize("scenario,num_blocks", [("prefix", 20), ("prefix", 30), ("same", 30), ("same", 50)])
def test_sharing_under_memory_pressure_is_no_false_alarm(tiny, scenario, num_blocks):
    """With prefix caching only the paged engine saves steps, so under memory pressure the twins schedule
    differently; the verdict compares token by token and stays true, and every output equals the twin's."""
    from dataclasses import replace

    from lessons.engine_requests import SHARING_SCENARIOS

    model, tok = tiny
    chosen = SHARING_SCENARIOS[scenario]
    demo = EngineLesson.replay(replace(chosen.config, num_blocks=num_blocks), list(chosen.requests), 600, model, tok)
    worst, agree = demo.twin_summary()
    paged, contiguous = demo.twins.outputs()
    assert [o.token_ids for o in paged] == [o.token_ids for o in contiguous] and paged
    assert agree and worst <= demo.twin_tolerance()
    assert demo.schedules_differ()  # the situation that used to raise the false alarm


def test_run_stops_at_its_cap_says_so_and_goes_on_when_pressed_again(tiny):
    """run(max_steps=5) on requests needing more: 5 steps, between() called after each step but the last (4
    times), news["run_capped"] = 5; a second run(5) takes the lesson to 10 steps, equal to a plain replay of 10;
    a run that reaches the end within its cap leaves no cap note."""
    model, tok = tiny
    specs = [RequestSpec("abcdefgh", "continue", max_tokens=16)]
    demo = EngineLesson.replay(DemoConfig(), specs, 0, model, tok)
    calls = []
    demo.run(5, lambda: calls.append(len(demo.steps)))
    assert len(demo.steps) == 5 and calls == [1, 2, 3, 4] and demo.take_news() == {"run_capped": 5}
    demo.run(5)
    fresh = EngineLesson.replay(DemoConfig(), specs, 10, model, tok)
    assert len(demo.steps) == 10 and demo.twins.outputs() == fresh.twins.outputs()
    assert demo.take_news() == {"run_capped": 5}
    demo.run(100)
    assert not demo.can_step() and "run_capped" not in demo.take_news()
