"""A bad request, or a step that raises, never wedges the engine: admission refuses what cannot run, and a failed step
is rolled back (only the request to blame, if any, ends with finish_reason "error")."""

import numpy as np
import pytest
import torch

import paged.engine.sampler as sampler_module
from paged.config import CacheConfig, SamplingParams
from paged.engine import EngineStepError, LLMEngine

from helpers import tiny_model

pytestmark = pytest.mark.engine

MODEL, TOK = tiny_model()
GREEDY = SamplingParams(max_tokens=10, ignore_eos=True)
SEEDED = SamplingParams(max_tokens=10, temperature=0.9, top_p=0.95, seed=4, ignore_eos=True)
REQUESTS = [("The block table maps", GREEDY), ("logical blocks", SEEDED), ("to physical ones", GREEDY)]


def make(num_blocks=64, block_size=4, caching=False, record=True):
    return LLMEngine(MODEL, TOK, CacheConfig(block_size=block_size, num_blocks=num_blocks, seed=1, watermark=0.0,
                                             enable_prefix_caching=caching), attn_impl="gather", record=record)


def state(engine):
    """Everything a step may change, as plain values."""
    bm, sched = engine.block_manager, engine.scheduler
    seqs = {sid: (s.cached_token_count, list(s.generated_token_ids), s.status, s.finish_reason, list(s.block_table),
                  s.preemptions, s.n) for sid, s in engine.sequences.items()}
    return dict(waiting=[s.seq_id for s in sched.waiting], running=[s.seq_id for s in sched.running], seqs=seqs,
                tables={k: list(v) for k, v in bm.tables.items()}, refs=list(bm.ref_counts),
                free=list(bm.free_block_ids), hashes=dict(bm.block_hash), index={h: list(b) for h, b in bm.cache.hash_blocks.items()},
                step=engine.step_count, ids=engine._next_id)


def clean_outputs(requests, **kw):
    engine = make(**kw)
    ids = [engine.add_request(p, sp) for p, sp in requests]
    while engine.has_unfinished():
        engine.step()
    return [engine.output(i).token_ids for i in ids]


def run_to_end(engine, max_steps=500):
    """Step to the end, counting the steps that raised EngineStepError (bounded: a wedged engine fails the test)."""
    errors = 0
    for _ in range(max_steps):
        if not engine.has_unfinished():
            return errors
        try:
            engine.step()
        except EngineStepError:
            errors += 1
        engine.block_manager.check_invariants()
    raise AssertionError(f"still unfinished after {max_steps} steps ({errors} raised)")


@pytest.mark.parametrize("prompt, msg", [
    ([256, 300, 5], r"prompt token ids\[1\] must be an integer in \[0, 258\], got 300"),
    ([5, -1], r"\[1\] must be an integer in \[0, 258\], got -1"),
    ([1.9], r"\[0\] must be an integer, got 1.9"),
    ([True, 3], "bool"),
    ([[1, 2]], "must be an integer"),
    (None, "prompt must be text or a list of token ids"),
    (b"abc", "prompt must be text"),
    ("\ud800", "could not be tokenized"),
    (7, "must be a list of integers"),
])
def test_bad_prompts_are_refused_at_admission(prompt, msg):
    """Ids outside the vocabulary, negative ids, floats, bools and non-prompts are ValueErrors naming the rule;
    nothing is queued, and a good request still runs to the end."""
    engine = make()
    with pytest.raises(ValueError, match=msg):
        engine.add_request(prompt, GREEDY)
    assert not engine.has_unfinished() and engine._next_id == 0
    rid = engine.add_request("ok", GREEDY)
    while engine.has_unfinished():
        engine.step()
    assert len(engine.output(rid).token_ids) == 10


def test_numpy_and_torch_ids_are_accepted():
    """Integer ids from numpy or torch are fine and give the same tokens as plain ints."""
    ids = TOK.encode("same prompt")
    outs = [make().generate([p], GREEDY)[0].token_ids for p in (ids, np.array(ids), torch.tensor(ids))]
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("kwargs, msg", [
    (dict(temperature=1e-40), "temperature must be 0 .greedy. or >= 0.01"), (dict(temperature=float("nan")), "finite"),
    (dict(temperature=float("inf")), "finite"), (dict(temperature="1"), "temperature"),
    (dict(max_tokens=2.0), "max_tokens must be an integer"), (dict(max_tokens=True), "bool"),
    (dict(top_k=1.5), "top_k"), (dict(top_p=True), "top_p"), (dict(top_p=float("nan")), "top_p"),
    (dict(seed=1.0), "seed"), (dict(seed=-1), "seed"), (dict(seed=2**64), "seed"), (dict(n=True), "n must"),
    (dict(n=2.0), "n must"), (dict(stop=5), "stop"), (dict(stop=[""]), "stop"), (dict(stop=["a", 1]), "stop"),
    (dict(ignore_eos=1), "ignore_eos"),
])
def test_sampling_params_types_and_numerics(kwargs, msg):
    """Every field is type-checked (no bools or floats for ints, finite floats) and a temperature too small to
    divide by safely is refused, as SamplingParams' docstring says."""
    with pytest.raises(ValueError, match=msg):
        SamplingParams(**kwargs)


def test_params_must_be_sampling_params():
    """A dict (or anything else) where SamplingParams is meant is a ValueError, not an AttributeError later."""
    with pytest.raises(ValueError, match="params must be a SamplingParams"):
        make().add_request("x", {"max_tokens": 3})


@pytest.mark.parametrize("record", [True, False])
def test_model_raising_once_is_rolled_back(monkeypatch, record):
    """The model raises once, after its K/V writes: the engine is exactly as before the step, the error names the
    step and sequences, and every request then produces the tokens of a clean run (step traces kept or not)."""
    expected = clean_outputs(REQUESTS)
    engine = make(record=record)
    ids = [engine.add_request(p, sp) for p, sp in REQUESTS]
    engine.step(), engine.step()
    before = state(engine)
    real = engine.runner.model
    calls = []

    def flaky(*args, **kwargs):
        out = real(*args, **kwargs)  # K/V already written into the pool
        if not calls:
            calls.append(1)
            raise RuntimeError("simulated device error")
        return out

    monkeypatch.setattr(engine.runner, "model", flaky)
    with pytest.raises(EngineStepError, match=r"step 2 failed during the decode of seq\(s\) \[0, 1, 2\]: "
                                              "RuntimeError: simulated device error") as info:
        engine.step()
    assert info.value.ended_request is None and isinstance(info.value.__cause__, RuntimeError)
    assert state(engine) == before
    engine.block_manager.check_invariants()
    assert run_to_end(engine) == 0
    assert [engine.output(i).token_ids for i in ids] == expected


def test_sampler_failure_ends_only_the_request_to_blame(monkeypatch):
    """Sampling raises for one request at every step: that request ends with finish_reason "error" and its blocks
    are freed; the others finish with exactly the tokens they produce without it."""
    bad = SamplingParams(max_tokens=10, temperature=0.5, seed=666, ignore_eos=True)
    requests = REQUESTS[:2] + [("poisoned", bad)] + REQUESTS[2:]
    real = sampler_module.sample

    def picky(logits, params, generators):
        if params[0].seed == 666:
            raise FloatingPointError("probabilities are NaN")
        return real(logits, params, generators)

    monkeypatch.setattr(sampler_module, "sample", picky)
    engine = make()
    ids = [engine.add_request(p, sp) for p, sp in requests]
    with pytest.raises(EngineStepError, match=r"step 0 failed during the prefill of seq\(s\) \[0, 1, 2, 3\]: "
                       r"sampling raised FloatingPointError.*request 2 \(seq 2\) was ended with finish_reason 'error'"):
        engine.step()
    out = engine.output(ids[2])
    assert out.finished and out.finish_reason == "error" and out.token_ids == []
    assert 2 not in engine.block_manager.tables
    assert run_to_end(engine) == 0
    assert [engine.output(i).token_ids for i in ids[:2] + ids[3:]] == clean_outputs(REQUESTS)
    assert engine.block_manager.num_free_blocks == engine.num_blocks


def test_nan_logits_end_only_that_request(monkeypatch):
    """A row of NaN logits (here forced for seq 1 at its third token) ends that request with "error"; greedy
    argmax would otherwise have turned NaN into a silent token."""
    engine = make()
    ids = [engine.add_request(p, sp) for p, sp in REQUESTS]
    real = engine.runner.run

    def poison(seqs, batch):
        logits = real(seqs, batch).clone()  # an inference tensor cannot be edited outside inference mode
        for i, seq in enumerate(seqs):
            if seq.seq_id == 1 and len(seq.generated_token_ids) == 2:
                logits[i, 7] = float("nan")
        return logits

    monkeypatch.setattr(engine.runner, "run", poison)
    assert run_to_end(engine) == 1
    assert engine.output(ids[1]).finish_reason == "error" and len(engine.output(ids[1]).token_ids) == 2
    expected = clean_outputs([REQUESTS[0], REQUESTS[2]])
    assert [engine.output(ids[0]).token_ids, engine.output(ids[2]).token_ids] == expected


@pytest.mark.parametrize("caching", [False, True])
def test_failure_in_a_preempting_step_keeps_tokens_exact(monkeypatch, caching):
    """A tiny pool forces preemption; the model raises (after writing K/V) in every step that preempted something.
    Victims stay preempted, since their blocks were handed on and overwritten; nothing leaks; every token equals a
    clean run's."""
    prompts = [("abcdefghijkl", GREEDY), ("mnopqrstuvwx", SEEDED), ("ABCDEFGHIJKL", GREEDY)]  # 4 blocks each
    kw = dict(num_blocks=12, block_size=4, caching=caching)  # full after prefill: victims' blocks get reused
    expected = clean_outputs(prompts, **kw)
    engine = make(**kw)
    ids = [engine.add_request(p, sp) for p, sp in prompts]
    real_model, real_schedule, failed, last = engine.runner.model, engine.scheduler.schedule, [], []

    def schedule():
        last[:] = [real_schedule()]
        return last[0]

    def fail_when_preempting(*args, **kwargs):
        out = real_model(*args, **kwargs)
        if last[0].preempted and engine.step_count not in failed:
            failed.append(engine.step_count)
            raise RuntimeError("boom")
        return out

    monkeypatch.setattr(engine.scheduler, "schedule", schedule)
    monkeypatch.setattr(engine.runner, "model", fail_when_preempting)
    assert run_to_end(engine) == len(failed) > 0
    assert [engine.output(i).token_ids for i in ids] == expected
    assert engine.block_manager.num_free_blocks == engine.num_blocks


def test_victims_of_a_failed_step_stay_preempted(monkeypatch):
    """The step that preempts seq 2 hands its blocks to seqs 0 and 1, writes their K/V there, then sampling fails for
    request 0, which ends. Seq 2 must recompute (its blocks were overwritten), not resume: requests 1 and 2 then
    produce exactly the tokens they produce without request 0."""
    prompts = [("abcdefghijkl", SamplingParams(max_tokens=10, temperature=1.0, seed=666, ignore_eos=True)),
               ("mnopqrstuvwx", SEEDED), ("ABCDEFGHIJKL", GREEDY)]
    engine = make(num_blocks=12, block_size=4)  # full after prefill: the victim's blocks are the only free ones
    ids = [engine.add_request(p, sp) for p, sp in prompts]
    real_schedule, real_sample, last = engine.scheduler.schedule, sampler_module.sample, []

    def schedule():
        last[:] = [real_schedule()]
        return last[0]

    def sample(logits, params, generators):
        if last[0].preempted and params[0].seed == 666:
            raise FloatingPointError("boom")
        return real_sample(logits, params, generators)

    monkeypatch.setattr(engine.scheduler, "schedule", schedule)
    monkeypatch.setattr(sampler_module, "sample", sample)
    assert run_to_end(engine) == 1
    assert engine.output(ids[0]).finish_reason == "error"
    assert engine.output(ids[2]).num_preemptions >= 1
    assert [engine.output(i).token_ids for i in ids[1:]] == clean_outputs(prompts[1:], num_blocks=12)


def test_failed_step_leaves_no_stale_prefix_cache_entry(monkeypatch):
    """Request A finishes and its full blocks stay cached; B's prefill takes them, writes its own K/V, then the
    model raises. After the rollback those blocks must not be indexed under A's prefix any more: a later copy of A's
    prompt recomputes them and gets A's exact tokens."""
    engine = make(num_blocks=5, block_size=4, caching=True)
    a = engine.add_request("abcdefghijkl", SamplingParams(max_tokens=3, ignore_eos=True))
    run_to_end(engine)
    real = engine.runner.model

    def fail(*args, **kwargs):
        real(*args, **kwargs)
        raise RuntimeError("boom")

    b = engine.add_request("ABCDEFGHIJKL", SamplingParams(max_tokens=3, ignore_eos=True))
    monkeypatch.setattr(engine.runner, "model", fail)
    with pytest.raises(EngineStepError):
        engine.step()
    monkeypatch.setattr(engine.runner, "model", real)
    engine.abort(b)
    c = engine.add_request("abcdefghijkl", SamplingParams(max_tokens=3, ignore_eos=True))
    run_to_end(engine)
    assert engine.output(c).token_ids == engine.output(a).token_ids


def test_abort_with_bad_ids_is_a_value_error():
    """abort / output with a float, bool or list id, or a float sample index, is a ValueError."""
    engine = make()
    rid = engine.add_request("x", SamplingParams(max_tokens=3, n=2, temperature=1.0, seed=0))
    for bad in (0.0, True, [0]):
        with pytest.raises(ValueError, match="unknown request id"):
            engine.abort(bad)
    with pytest.raises(ValueError, match="samples"):
        engine.abort(rid, 0.0)


def test_a_step_that_fails_after_forking_is_undone(monkeypatch):
    """A prefill step forks a request's parallel samples, then raises: the rollback forgets the children (ids,
    groups, tables, ref counts) and a retry forks them again, with the same tokens as a clean run."""
    params = SamplingParams(max_tokens=4, n=3, temperature=0.9, seed=7, ignore_eos=True)
    requests = [("forked prompt", params), ("plain", GREEDY)]
    clean = make()
    clean_ids = [clean.add_request(p, sp) for p, sp in requests]
    while clean.has_unfinished():
        clean.step()
    engine = make()
    ids = [engine.add_request(p, sp) for p, sp in requests]
    before = state(engine)
    real = engine.stop_reason

    def fail_on_a_child(seq):
        if seq.sample_index > 0:
            raise RuntimeError("boom after the fork")
        return real(seq)

    monkeypatch.setattr(engine, "stop_reason", fail_on_a_child)
    with pytest.raises(EngineStepError, match="boom after the fork"):
        engine.step()
    assert state(engine) == before and engine.groups[ids[0]] == [engine.requests[ids[0]]]
    engine.block_manager.check_invariants()
    monkeypatch.setattr(engine, "stop_reason", real)
    assert run_to_end(engine) == 0
    for rid, clean_rid in zip(ids, clean_ids):
        assert engine.output(rid).samples == clean.output(clean_rid).samples
