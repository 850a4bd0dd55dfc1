"""The engine's speed options change no token: record=False against the contiguous twin, and what the engine keeps
per finished request. (The paged prefill's fast attention against the reference: test_attention_sdpa.)"""

import pytest

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine

from helpers import tiny_model

pytestmark = pytest.mark.engine

PROMPTS = ["Hello, paged world!", "1 2 3", "abcdefghijklmnopqrstuvwxyz", "a"]


def _engine(model, tokenizer, kv_layout="paged", record=True, chunked=False, num_blocks=64):
    return LLMEngine(model, tokenizer, CacheConfig(block_size=4, num_blocks=num_blocks, seed=1),
                     SchedulerConfig(max_num_seqs=3, enable_chunked_prefill=chunked, max_num_batched_tokens=2048),
                     kv_layout=kv_layout, record=record)  # the default impl, as the bench


@pytest.mark.parametrize("chunked", [False, True])
def test_record_off_gives_the_contiguous_twins_tokens(chunked):
    """record=False (the benchmark's engine): every request's tokens (both samples of an n=2 one) equal the
    contiguous twin's (recording on), with max_num_seqs 3 < 4 requests so one waits and is admitted mid-run; the
    traces hold no per-sequence state and last_logits stays empty."""
    model, tokenizer = tiny_model()
    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (9, 4, 12)]
    params.append(SamplingParams(max_tokens=6, ignore_eos=True, n=2, temperature=1.0, seed=7))  # forks a child
    lean = _engine(model, tokenizer, record=False, chunked=chunked)
    twin = _engine(model, tokenizer, kv_layout="contiguous", chunked=chunked)
    ids = {e: [e.add_request(p, sp) for p, sp in zip(PROMPTS, params)] for e in (lean, twin)}
    traces = []
    while lean.has_unfinished():
        traces.append(lean.step())
    while twin.has_unfinished():
        twin.step()
    want = [twin.output(i).samples for i in ids[twin]]
    assert [lean.output(i).samples for i in ids[lean]] == want
    assert [[len(t) for t in samples] for samples in want] == [[9], [4], [12], [6, 6]]
    assert all(not t.seqs and not t.block_tables_after for t in traces)
    assert len([sid for t in traces for sid in t.finished]) == 5  # four requests, one with two samples
    assert lean.last_logits == {}


def test_last_logits_drops_finished_requests():
    """A finished request's logits row stays readable after the step that finished it (parity checks read it
    then), and is gone after the next step: serving many requests does not keep one row per request."""
    model, tokenizer = tiny_model()
    engine = _engine(model, tokenizer)
    first = engine.add_request("abc", SamplingParams(max_tokens=2, ignore_eos=True))
    while engine.has_unfinished():
        trace = engine.step()
    assert first in trace.finished and first in engine.last_logits
    for i in range(5):
        engine.generate([f"request {i}"], SamplingParams(max_tokens=2, ignore_eos=True))
    later = engine.add_request("xyz", SamplingParams(max_tokens=3, ignore_eos=True))
    engine.step()
    assert list(engine.last_logits) == [later]


@pytest.mark.parametrize("record", ["False", 0, None])
def test_record_must_be_a_bool(record):
    """record="False" (a string from a command line) or 0 is a ValueError naming it, not an engine that records."""
    model, tokenizer = tiny_model()
    with pytest.raises(ValueError, match="record must be True or False"):
        _engine(model, tokenizer, record=record)
