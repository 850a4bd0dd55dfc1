"""The mini vLLM engine: paged == contiguous token for token, the state rule, budgets, preemption, errors."""

import os
import random

import pytest
import torch

from paged.attention import DECODE_IMPLS
from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.model.data import random_text

import paged.kernels  # noqa: F401  (registers the fast impls, so the sweep covers them)

from helpers import scaled_atol, tiny_model

pytestmark = pytest.mark.engine

PROMPTS = ["Hello, paged world!", "1 2 3 4 5 6", "abcdefghij", "a", "The block table maps logical blocks."]


@pytest.fixture(scope="module")
def tiny():
    """A random, untrained tiny model: fast, and any cache mistake changes its output."""
    return tiny_model()


def lockstep(model, tokenizer, prompts, block_size, num_blocks, max_tokens, impl="gather", sched=None):
    """Run a paged and a contiguous engine side by side; check each step's schedule and logits agree.

    Returns (outputs, max |paged - contiguous logits| scaled by max(1, max |contiguous logits|), preemptions,
    the paged engine): the scaled difference is compared with a relative bound, the same on every CPU."""
    engines = {layout: LLMEngine(model, tokenizer, CacheConfig(block_size=block_size, num_blocks=num_blocks, seed=3),
                                 sched or SchedulerConfig(), kv_layout=layout, attn_impl=impl)
               for layout in ("paged", "contiguous")}
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    ids = {k: [e.add_request(p, params) for p in prompts] for k, e in engines.items()}
    paged, contiguous = engines["paged"], engines["contiguous"]
    max_diff, scale, preemptions = 0.0, 0.0, 0
    while paged.has_unfinished():
        tp, tc = paged.step(), contiguous.step()
        assert (tp.phase, tp.scheduled, tp.preempted) == (tc.phase, tc.scheduled, tc.preempted)
        for sid in tp.scheduled:
            diff = (paged.last_logits[sid] - contiguous.last_logits[sid]).abs().max().item()
            max_diff = max(max_diff, diff)
            scale = max(scale, contiguous.last_logits[sid].abs().max().item())
        preemptions += len(tp.preempted)
    assert not contiguous.has_unfinished()
    outs = {k: [engines[k].output(i).token_ids for i in ids[k]] for k in engines}
    return outs, max_diff / scaled_atol(scale, rel=1.0), preemptions, paged


@pytest.mark.parametrize("block_size", [1, 4, 16, 32])
def test_paged_equals_contiguous_on_shipped_model(shipped, block_size):
    """Greedy tokens of the paged engine equal the contiguous twin's; logits agree to rel 1e-5 at every step."""
    model, tok = shipped
    outs, scaled_diff, _, engine = lockstep(model, tok, PROMPTS, block_size, num_blocks=4096 // block_size,
                                         max_tokens=24)
    assert outs["paged"] == outs["contiguous"]
    assert scaled_diff < 1e-5
    assert engine.block_manager.num_free_blocks == engine.num_blocks, "blocks leaked after every request finished"


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_paged_equals_contiguous_under_preemption(shipped, block_size):
    """A tiny pool forces recompute preemptions; tokens still match the contiguous twin exactly."""
    model, tok = shipped
    total = sum(len(tok.encode(p)) for p in PROMPTS) + 24 * len(PROMPTS)
    num_blocks = max(-(-(len(tok.encode(PROMPTS[-1])) + 24) // block_size) + 1, total // block_size // 2)
    outs, scaled_diff, preemptions, engine = lockstep(model, tok, PROMPTS, block_size, num_blocks, max_tokens=24)
    assert preemptions > 0, "the pool was meant to be small enough to force preemption"
    assert outs["paged"] == outs["contiguous"] and scaled_diff < 1e-5
    assert engine.block_manager.num_free_blocks == engine.num_blocks


@pytest.mark.parametrize("impl", ["gather", "fused", "native"])
def test_every_decode_impl_matches_in_the_engine(tiny, impl):
    """Each CPU impl gives the same tokens as the contiguous twin inside the engine."""
    assert impl in DECODE_IMPLS
    model, tok = tiny
    outs, scaled_diff, _, _ = lockstep(model, tok, PROMPTS[:3], 4, 64, max_tokens=12, impl=impl)
    assert outs["paged"] == outs["contiguous"] and scaled_diff < 1e-5


def test_default_impl_on_cpu(monkeypatch):
    """On CPU the engine picks the C kernel when it can be built, and falls back to gather when it cannot."""
    from paged import kernels
    from paged.kernels import default_attn_impl

    if os.environ.get("CI"):  # CI installs a C compiler: the kernel must build there
        assert kernels.native_available()
    assert default_attn_impl(torch.device("cpu")) == ("native" if kernels.native_available() else "gather")
    monkeypatch.setattr(kernels, "native_available", lambda: False)
    assert default_attn_impl(torch.device("cpu")) == "gather"


def test_unknown_impl_is_refused_at_construction(tiny):
    """A misspelt attn_impl raises ValueError naming the choices when the engine is built, not at its first step."""
    model, tok = tiny
    with pytest.raises(ValueError, match="unknown attn_impl 'gathr'.*'native'"):
        LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=8), attn_impl="gathr")


def test_paged_engine_equals_full_recompute(tiny):
    """Independent reference with no cache at all: re-run the full sequence each step, take the argmax."""
    model, tok = tiny
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=64, seed=1), attn_impl="gather")
    outs = engine.generate(PROMPTS[:2], SamplingParams(max_tokens=10, ignore_eos=True))
    for prompt, out in zip(PROMPTS[:2], outs):
        ids = tok.encode(prompt)
        for _ in range(10):
            with torch.no_grad():
                ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
        assert out.token_ids == ids[-10:]


def test_state_rule_and_decode_positions(tiny):
    """After prefill cached == prompt_len with one generated token; each decode adds one to each; decode feeds
    the last generated token at position num_tokens - 1 and writes it at locate(cached_token_count)."""
    from paged.addressing import locate
    model, tok = tiny
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=64, seed=2), attn_impl="gather")
    rid = engine.add_request("hello there", SamplingParams(max_tokens=6, ignore_eos=True))
    seq = engine.requests[rid]
    prompt_len = len(tok.encode("hello there"))
    trace = engine.step()
    assert trace.phase == "prefill"
    assert seq.cached_token_count == prompt_len and len(seq.generated_token_ids) == 1
    assert trace.seqs[0].positions == list(range(prompt_len))
    for k in range(1, 6):
        table_before = list(seq.block_table)
        last = seq.generated_token_ids[-1]
        trace = engine.step()
        s = trace.seqs[0]
        assert trace.phase == "decode" and s.tokens_in == [last]
        assert s.positions == [prompt_len + k - 1] == [seq.num_tokens - 2]
        table = table_before + trace.blocks_allocated.get(rid, [])
        assert s.slots == [locate(prompt_len + k - 1, table, 4).slot]
        assert s.cached_token_count == prompt_len + k and s.generated_len == 1 + k
    assert seq.is_finished and seq.finish_reason == "length"


def test_scheduler_budgets_and_fcfs(tiny):
    """max_num_seqs and max_num_batched_tokens cap a prefill batch; prompts start in arrival order."""
    model, tok = tiny
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=200),
                       SchedulerConfig(max_num_batched_tokens=40, max_num_seqs=2), attn_impl="gather")
    ids = [engine.add_request("x" * 15, SamplingParams(max_tokens=3, ignore_eos=True)) for _ in range(4)]
    first = engine.step()
    assert first.phase == "prefill" and first.scheduled == ids[:2] and "max_num_seqs" in first.reason
    assert first.why == [("prefill", dict(count=2, tokens=32)), ("stop_max_seqs", dict(max_num_seqs=2))]
    engine2 = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=200),
                        SchedulerConfig(max_num_batched_tokens=40, max_num_seqs=8), attn_impl="gather")
    ids2 = [engine2.add_request("x" * 15, SamplingParams(max_tokens=3, ignore_eos=True)) for _ in range(4)]
    t = engine2.step()
    assert t.scheduled == ids2[:2] and "max_num_batched_tokens" in t.reason  # 16 + 16 <= 40 < 48
    seen = list(t.scheduled)
    while engine2.has_unfinished():
        seen += [s for s in engine2.step().scheduled if s not in seen]
    assert seen == ids2


def test_preemption_takes_newest_and_requeues_it_first(tiny):
    """When decode cannot get a block, the newest running sequence is preempted and goes to the front."""
    model, tok = tiny
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=6, watermark=0.0), attn_impl="gather")
    a = engine.add_request("abcdefg", SamplingParams(max_tokens=9, ignore_eos=True))  # 8 tokens -> 2 blocks
    b = engine.add_request("hijklmn", SamplingParams(max_tokens=9, ignore_eos=True))
    c = engine.add_request("op", SamplingParams(max_tokens=9, ignore_eos=True))
    preempted = []
    while engine.has_unfinished():
        t = engine.step()
        if t.preempted:
            preempted.append(t.preempted)
            assert t.preempted[0] == max(t.block_tables_before), "victim must be the newest running sequence"
            assert t.waiting[0] == t.preempted[-1]
            assert engine.requests[t.preempted[0]].cached_token_count == 0
        engine.block_manager.check_invariants()
    assert preempted and all(engine.output(i).finished for i in (a, b, c))
    assert engine.block_manager.num_free_blocks == 6


def test_num_blocks_from_memory_budget(tiny):
    """With num_blocks unset, the pool size follows the KV memory budget."""
    model, tok = tiny
    cfg = model.config
    per_block = 2 * cfg.num_hidden_layers * 8 * cfg.num_key_value_heads * cfg.head_dim * 4
    engine = LLMEngine(model, tok, CacheConfig(block_size=8, memory_budget_bytes=per_block * 37 + 5))
    assert engine.num_blocks == 37


@pytest.mark.parametrize("make, msg", [
    (lambda e: e.add_request(""), "empty"),
    (lambda e: e.add_request([]), "empty"),
    (lambda e: e.add_request("x" * 300), "max_position_embeddings"),
    (lambda e: e.add_request("x" * 100, SamplingParams(max_tokens=200)), "max_position_embeddings"),
    (lambda e: e.add_request("x" * 70, SamplingParams(max_tokens=10)), "never fit"),
    (lambda e: e.abort(12345), "unknown request id"),
    (lambda e: e.output(7), "unknown request id"),
])
def test_bad_requests_raise_clear_errors(tiny, make, msg):
    """Empty prompts, impossible lengths and unknown ids raise ValueError naming the rule; nothing is queued."""
    model, tok = tiny
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=16), attn_impl="gather")
    with pytest.raises(ValueError, match=msg):
        make(engine)
    assert not engine.has_unfinished() and engine.block_manager.num_free_blocks == 16


@pytest.mark.parametrize("kwargs, msg", [
    (dict(max_tokens=0), "max_tokens"), (dict(temperature=-0.1), "temperature"), (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"), (dict(top_k=-1), "top_k"), (dict(n=0), "n must"),
])
def test_bad_sampling_params(kwargs, msg):
    """SamplingParams rejects out-of-range values by name."""
    with pytest.raises(ValueError, match=msg):
        SamplingParams(**kwargs)


def test_abort_frees_blocks_and_is_idempotent(tiny):
    """abort frees a running request's blocks; aborting a finished one returns False."""
    model, tok = tiny
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=32), attn_impl="gather")
    a = engine.add_request("hello", SamplingParams(max_tokens=20, ignore_eos=True))
    b = engine.add_request("world", SamplingParams(max_tokens=20, ignore_eos=True))
    engine.step(), engine.step()
    assert engine.abort(a) is True and engine.output(a).finish_reason == "abort"
    assert engine.abort(a) is False
    while engine.has_unfinished():
        engine.step()
    assert engine.output(b).finished and engine.block_manager.num_free_blocks == 32


def test_seeded_sampling_is_reproducible_per_request(tiny):
    """A seeded request samples the same tokens alone or batched with others; different seeds differ."""
    model, tok = tiny
    p = SamplingParams(max_tokens=12, temperature=1.0, top_k=50, top_p=0.9, seed=11, ignore_eos=True)
    alone = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=64), attn_impl="gather").generate(["seed"], p)
    batched = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=64), attn_impl="gather").generate(
        ["other", "seed", "more"], p)
    assert alone[0].token_ids == batched[1].token_ids
    other = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=64), attn_impl="gather").generate(
        ["seed"], SamplingParams(max_tokens=12, temperature=1.0, seed=12, ignore_eos=True))
    assert other[0].token_ids != alone[0].token_ids


def test_stop_string_and_trace_json(tiny):
    """A stop string ends the request; StepTrace.to_dict() is JSON with the fields the UI replays."""
    import json
    model, tok = tiny
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=64), attn_impl="gather")
    engine.add_request("abc", SamplingParams(max_tokens=30, ignore_eos=True))
    trace = engine.step()
    d = json.loads(trace.to_json())
    for key in ("phase", "reason", "scheduled", "slot_mapping", "block_tables_before", "block_tables_after",
                "blocks_allocated", "blocks_freed", "preempted", "num_free_blocks", "seqs"):
        assert key in d
    assert d["seqs"][0]["cached_token_count"] == 4
    first_text = engine.output(0).text
    stop_engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=64), attn_impl="gather")
    out = stop_engine.generate(["abc"], SamplingParams(max_tokens=30, ignore_eos=True, stop=(first_text,)))[0]
    assert out.finish_reason == "stop" and len(out.token_ids) == 1


@pytest.mark.slow
def test_shipped_model_recall_through_paged_engine(shipped):
    """The shipped model reproduces fresh random 40-120 byte texts with >= 95% byte accuracy via the paged engine."""
    model, tok = shipped
    rng = random.Random(2026_11_29)  # not the training seed
    texts = [random_text(rng, 40, 120) for _ in range(24)]
    engine = LLMEngine(model, tok, CacheConfig(block_size=16, num_blocks=512, seed=5))
    prompts = [tok.encode(t) + [258] for t in texts]  # BOS text SEP
    outs = [engine.add_request(p, SamplingParams(max_tokens=len(t), ignore_eos=True)) for p, t in zip(prompts, texts)]
    while engine.has_unfinished():
        engine.step()
    correct = total = 0
    for rid, text in zip(outs, texts):
        got = engine.output(rid).token_ids
        correct += sum(a == b for a, b in zip(got, text.encode()))
        total += len(text)
    assert correct / total >= 0.95
