"""A request that ends inside a speculative emission (issue 35.6): a stop string or an EOS reached
after accepted guesses ends the request there, with plain decoding's tokens and finish_reason, no
error, every block back; the accepted guesses past the stop are dropped."""

from __future__ import annotations

import pytest

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.model.tokenizer import EOS, SEP

pytestmark = pytest.mark.engine

NUM_BLOCKS = 64


def make_engine(model, tokenizer, speculative=None) -> LLMEngine:
    cache = CacheConfig(block_size=4, num_blocks=NUM_BLOCKS, watermark=0.0)
    return LLMEngine(model, tokenizer, cache, SchedulerConfig(speculative=speculative))


def plain_run(model, tokenizer, ids: list[int], params: SamplingParams):
    """Plain greedy decoding (no speculation): the reference output."""
    return make_engine(model, tokenizer).generate([ids], params)[0]


def oracle(future: list[int]):
    """A proposer that guesses `future` (the tokens plain decoding writes after the prompt, EOS and
    all, and what it would write past them): every guess is accepted, the stop lands mid-pass."""
    def propose(seq, k: int) -> list[int]:
        done = len(seq.generated_token_ids)
        return future[done:done + k]
    return propose


def speculative_run(model, tokenizer, ids, params, proposer=None):
    """One request with ngram:4 speculation (proposer: replaces prompt lookup); returns its output
    and every step's speculative record of it."""
    engine = make_engine(model, tokenizer, "ngram:4")
    if proposer is not None:
        engine.speculative.proposer = proposer
    rid = engine.add_request(ids, params)
    records = []
    while engine.has_unfinished():
        trace = engine.step()
        records += list(trace.speculative.values())
    assert engine.block_manager.num_free_blocks == NUM_BLOCKS
    return engine.output(rid), records


def cut_inside(record: dict) -> bool:
    """The last pass's emission ended before the pass's end, after at least one accepted guess."""
    return record["accepted"] >= 1 and len(record["emitted"]) <= record["accepted"] < len(
        record["proposed"]) + 1 and len(record["emitted"]) < len(record["proposed"]) + 1


def test_eos_inside_an_emission_ends_the_request_there(shipped):
    """Guesses that run past an EOS are all accepted; the emission stops at the EOS: finish_reason
    "eos", plain decoding's tokens, no token after the EOS."""
    model, tokenizer = shipped
    ids = tokenizer.encode("hi") + [SEP]
    params = SamplingParams(max_tokens=12)
    reference = plain_run(model, tokenizer, ids, params)
    assert reference.finish_reason == "eos" and reference.token_ids[-1] == EOS
    future = plain_run(model, tokenizer, ids, SamplingParams(max_tokens=12, ignore_eos=True))
    future = future.token_ids
    assert len(future) > len(reference.token_ids)  # the guesses run past the EOS
    out, records = speculative_run(model, tokenizer, ids, params, oracle(future))
    assert (out.token_ids, out.finish_reason) == (reference.token_ids, "eos")
    assert records[-1]["emitted"][-1] == EOS and cut_inside(records[-1]), records[-1]


@pytest.mark.parametrize("stop,inside", [("ick", True), ("k b", None)])
def test_stop_string_inside_an_emission_ends_the_request_there(shipped, stop, inside):
    """A stop string completed by an accepted guess ends the request inside the pass ("ick"; "k b"
    ends inside one pass or on a pass's own last token, per proposer): finish_reason "stop", plain
    decoding's tokens (the stop string kept, nothing after it); oracle and prompt-lookup guesses."""
    model, tokenizer = shipped
    ids = tokenizer.encode("the quick brown fox") + [SEP]
    params = SamplingParams(max_tokens=20, stop=stop)
    reference = plain_run(model, tokenizer, ids, params)
    assert reference.finish_reason == "stop" and reference.text.endswith(stop), reference.text
    future = plain_run(model, tokenizer, ids, SamplingParams(max_tokens=20, ignore_eos=True))
    future = future.token_ids
    for proposer in (oracle(future), None):
        out, records = speculative_run(model, tokenizer, ids, params, proposer)
        assert (out.token_ids, out.finish_reason) == (reference.token_ids, "stop")
        assert inside is None or cut_inside(records[-1]), records[-1]
