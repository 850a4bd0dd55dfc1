"""Predict, then reveal (lessons.quiz): for many seeds, the answer a question claims is what the step then really
does: the slot the teaching loop reads a token from, the blocks a decode step takes, the cached_token_count the
engine reaches. Questions never change the live state."""

from __future__ import annotations

import random

import pytest
import torch

from lessons.batch import BatchConfig, BatchLesson
from lessons.engine import EngineLesson
from lessons.engine_requests import DemoConfig, RequestSpec
from lessons.quiz import (Question, address_question, batch_question, engine_question, next_step_question,
                          prefix_question)
from paged.attention import gather_kv_loop
from paged.config import ModelConfig
from paged.model import ByteTokenizer, TinyLlama
from ui.page import PageContext
from ui.quiz import choice_text, piece_text
from ui.strings import translator


def words(q: Question) -> None:
    """The question, its choices and its why render in both languages (every key and field exists)."""
    for lang in ("en", "zh"):
        ctx = PageContext("quiz", lang, translator("quiz", lang))
        for piece in (q.prompt, *q.why):
            assert piece_text(ctx, piece)
        assert all(choice_text(ctx, q, c) for c in q.choices)


def slot_pool(num_blocks: int, block_size: int) -> torch.Tensor:
    """A key cache whose every slot holds its own slot number: [num_blocks, block_size, 1, 1]."""
    return torch.arange(num_blocks * block_size, dtype=torch.float64).view(num_blocks, block_size, 1, 1)


@pytest.mark.parametrize("seed", range(40))
def test_address_answer_is_where_the_loop_reads(seed):
    """The teaching loop, run over a pool that stores slot numbers, reads the asked token from exactly the slot
    (and so the physical block and offset) the question claims."""
    rng = random.Random(seed)
    block_size = rng.choice([1, 2, 4, 8])
    table = rng.sample(range(20), rng.randint(1, 6))
    q = address_question(table, block_size, seed)
    token, name = q.prompt[1]["token"], q.prompt[0].removeprefix("ask_")
    keys, _ = gather_kv_loop(slot_pool(20, block_size), slot_pool(20, block_size), table, token + 1)
    slot = int(keys[token].item())
    truth = {"slot": slot, "physical_block_id": slot // block_size, "block_offset": slot % block_size}
    assert q.answer == truth[name]
    assert len(q.choices) == (min(4, block_size) if name == "block_offset" else 4)
    assert all(isinstance(c, int) and c >= 0 for c in q.choices)
    assert q.why[0][1]["slot"] == slot
    words(q)


def test_address_question_refuses_an_empty_table():
    with pytest.raises(ValueError, match="empty"):
        address_question([], 4, 0)


def test_a_question_must_contain_its_answer():
    with pytest.raises(AssertionError):
        Question("address", ("ask_slot", {}), (1, 2), 3)


@pytest.mark.parametrize("seed", range(15))
def test_batch_answer_is_who_the_decode_gives_a_block(seed):
    """Along random operations: before each decode the question names exactly the sequences the decode then gives
    a new block (none included); the question itself changes nothing."""
    rng = random.Random(seed)
    demo = BatchLesson(BatchConfig(num_blocks=rng.choice([12, 16, 24]), block_size=rng.choice([2, 4]), seed=seed))
    asked = 0
    for i in range(20):
        running = [s.seq_id for s in demo.playground.running()]
        roll = rng.random()
        if not running or (roll < 0.15 and len(running) < 4):
            demo.apply(f"a{rng.randint(1, 7)}")
            continue
        if roll > 0.9 and len(running) > 1:
            demo.apply(f"f{rng.choice(running)}")
            continue
        before = (list(demo.ops), demo.tables(), demo.cached_token_counts())
        q = batch_question(demo, seed * 100 + i)
        assert (list(demo.ops), demo.tables(), demo.cached_token_counts()) == before
        event = demo.apply("d")
        if q is None:  # the pool cannot give every full sequence a block: the decode is refused
            assert not event.ok and event.reason == "pool_full"
            demo.apply(f"f{rng.choice(running)}")
            continue
        asked += 1
        assert event.ok and tuple(sorted(event.new_blocks)) == q.answer
        assert q.answer in q.choices and len(q.choices) >= 2
        words(q)
    assert asked >= 8


SPECS = [RequestSpec("hello paged world", max_tokens=10), RequestSpec("1 2 3", "continue", max_tokens=12,
                                                                     temperature=1.0, seed=4),
         RequestSpec("abc", max_tokens=6, at_step=3), RequestSpec("a longer prompt", max_tokens=8, n=2, seed=2,
                                                                  temperature=0.8)]


@pytest.mark.parametrize("config", [DemoConfig(block_size=4, num_blocks=40),
                                    DemoConfig(block_size=4, num_blocks=10, max_num_seqs=3)],
                         ids=["roomy", "tiny_pool"])
def test_engine_answer_is_the_cached_count_after_the_step(tiny, config):
    """Every step to the end: the question's answer equals the asked sequence's cached_token_count after the live
    step (sampled and preempted sequences included), and the live demo's state did not move while asking."""
    model, tok = tiny
    demo = EngineLesson.replay(config, SPECS, 0, model, tok, attn_impl="gather")
    kinds, seed = set(), 0
    while demo.can_step():
        seed += 1
        before = {sid: (s.cached_token_count, s.generated_token_ids) for sid, s in demo.view.seqs.items()}
        q = engine_question(demo, seed)
        assert {sid: (s.cached_token_count, s.generated_token_ids) for sid, s in demo.view.seqs.items()} == before
        demo.step()
        if q is None:
            continue
        sid = q.prompt[1]["seq"]
        assert demo.view.seqs[sid].cached_token_count == q.answer, (seed, q)
        assert q.answer in q.choices and len(q.choices) == 4
        kinds.add(q.why[0][0])
        words(q)
    worst, agree = demo.twin_summary()
    assert agree  # asking never disturbed the twins: the paged engine still matches its contiguous reference
    assert {"why_prefill", "why_decode"} <= kinds
    if config.num_blocks == 10:
        assert any(r.preemptions for r in demo.rows()) and "why_preempted" in kinds


def test_no_engine_question_once_everything_finished(tiny):
    model, tok = tiny
    demo = EngineLesson.replay(DemoConfig(block_size=4, num_blocks=40), SPECS[:1], 0, model, tok, attn_impl="gather")
    demo.run_to_end()
    assert engine_question(demo, 1) is None


SHARED = "Blocks are shared: every request reads this same long prompt. "
PREFIX_SPECS = [RequestSpec(SHARED + "Q1", max_tokens=4), RequestSpec(SHARED + "Q22", max_tokens=4, at_step=2),
                RequestSpec("unrelated text, nothing shared", max_tokens=4, at_step=3),
                RequestSpec(SHARED + "Q1", max_tokens=4, at_step=5)]


def test_a_running_sequence_left_out_by_the_budget_is_told_so(tiny):
    """Chunked prefill with a budget of 2 tokens and three parallel samples decoding: the youngest running one
    gets no token in a step; the question's answer is its unchanged count (the live step agrees) and the why names
    the budget."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=64, max_num_batched_tokens=2, enable_chunked_prefill=True)
    specs = [RequestSpec("ab", "continue", max_tokens=6, n=3, temperature=1.0, seed=1)]
    demo = EngineLesson.replay(config, specs, 0, model, tok, attn_impl="gather")
    seen = 0
    while demo.can_step():
        asked = [q for q in (engine_question(demo, seed) for seed in range(1, 12))
                 if q is not None and q.why[0][0] == "why_waits_budget"]
        demo.step()
        for q in asked:
            sid = q.prompt[1]["seq"]
            assert sid not in demo.last.paged.scheduled and q.why[0][1]["budget"] == 2
            assert demo.view.seqs[sid].cached_token_count == q.answer == q.prompt[1]["before"]
            words(q)
            seen += 1
    assert seen


@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
def test_prefix_answer_is_where_the_step_starts_feeding(tiny, chunked):
    """Every step to the end: a prefix question's answer (hit blocks) equals the first fed token's index in the
    live step divided by block_size (hit blocks are not fed: their K/V are already written); hits and misses both
    occur; asking moves nothing. Off without prefix caching."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=64, max_num_batched_tokens=32 if chunked else 512,
                        enable_prefix_caching=True, enable_chunked_prefill=chunked)
    demo = EngineLesson.replay(config, PREFIX_SPECS, 0, model, tok, attn_impl="gather")
    answers, seed = [], 0
    while demo.can_step():
        seed += 1
        before = {sid: (s.cached_token_count, s.block_table) for sid, s in demo.view.seqs.items()}
        q = prefix_question(demo, seed)
        assert {sid: (s.cached_token_count, s.block_table) for sid, s in demo.view.seqs.items()} == before
        both = next_step_question(demo, seed)
        trace = demo.step().paged
        if q is None:
            assert both is None or both.kind == "cached_after"
            continue
        assert both == q
        sid = q.prompt[1]["seq"]
        fed = next(s for s in trace.seqs if s.seq_id == sid)
        assert fed.positions[0] == q.answer * config.block_size, (seed, q)
        assert q.answer <= q.why[-1][1]["most"] == (q.prompt[1]["tokens"] - 1) // config.block_size
        assert q.why[0][0] == ("why_prefix_hit" if q.answer else "why_prefix_miss")
        answers.append(q.answer)
        words(q)
    assert 0 in answers and max(answers) >= 10, answers  # the shared 64-character prefix: 16 blocks of 4
    plain = EngineLesson.replay(DemoConfig(block_size=4, num_blocks=64), PREFIX_SPECS, 0, model, tok,
                              attn_impl="gather")
    assert prefix_question(plain, 1) is None
    plain.run_to_end()  # asking never changed what the engine computes: the same text as without any cache reuse
    assert [r.text for r in demo.rows()] == [r.text for r in plain.rows()]


def test_engine_answer_on_chunked_prefill(tiny):
    """With chunked prefill a long prompt's cached_token_count grows chunk by chunk: every answer is the live
    value after the step, and a mid-prefill chunk is told as such."""
    model, tok = tiny
    config = DemoConfig(block_size=4, num_blocks=64, max_num_batched_tokens=16, enable_chunked_prefill=True)
    demo = EngineLesson.replay(config, PREFIX_SPECS, 0, model, tok, attn_impl="gather")
    kinds, seed = set(), 0
    while demo.can_step():
        seed += 1
        q = engine_question(demo, seed)
        demo.step()
        if q is not None:
            assert demo.view.seqs[q.prompt[1]["seq"]].cached_token_count == q.answer, (seed, q)
            kinds.add(q.why[0][0])
            words(q)
    assert {"why_prefill_chunk", "why_decode"} <= kinds


def test_a_sequences_status_is_asked_in_the_pages_language():
    """"A is running …" names the status in the page's words: 运行中 in 简体中文, not the code's "running"."""
    piece = ("ask_cached_after", dict(seq=0, before=12, status="running"))
    zh = piece_text(PageContext("engine", "zh", translator("engine", "zh")), piece)
    assert zh.startswith("A 当前运行中，cached_token_count 为 12"), zh
    assert "running" not in zh
    en = piece_text(PageContext("engine", "en", translator("engine", "en")), piece)
    assert en.startswith("A is running with cached_token_count 12"), en
