"""The rules of the engine's speculative step (paged/engine/speculation.py) one by one, each against numbers worked
out by hand or against plain greedy decoding: how k is clipped (max_tokens, the free blocks the earlier sequences'
guesses left), the per-request counters, what the trace records, a NaN row, and the two refusals in full."""

from __future__ import annotations

import re
from functools import lru_cache

import pytest
import torch

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.engine.checkpoint import EngineStepError
from paged.engine.windowing import with_window
from paged.model import load_model

pytestmark = pytest.mark.engine

PROMPT = list(range(97, 103))  # "abcdef": 6 tokens; the shipped model goes on with "ghij…"


@lru_cache(maxsize=1)
def shipped():
    return load_model()


def engine(num_blocks=64, k=8, block_size=4, budget=2048):
    model, tok = shipped()
    return LLMEngine(model, tok, CacheConfig(block_size=block_size, num_blocks=num_blocks, watermark=0.0),
                     SchedulerConfig(budget, 8, False, ("ngram", k)))


class Recorder:
    """A proposer that notes the k each sequence is offered and answers with guesses[seq_id] (cut to k)."""

    def __init__(self, guesses: dict[int, list[int]]) -> None:
        self.guesses, self.offered = guesses, {}

    def __call__(self, seq, k):
        self.offered.setdefault(seq.seq_id, []).append(k)
        return self.guesses.get(seq.seq_id, [])[:k]


@lru_cache(maxsize=None)
def plain(max_tokens: int) -> tuple[int, ...]:
    """Plain greedy decoding of PROMPT (no speculation, roomy pool): the reference tokens."""
    model, tok = shipped()
    e = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=64, watermark=0.0))
    return tuple(e.generate([PROMPT], SamplingParams(max_tokens=max_tokens, ignore_eos=True))[0].token_ids)


def test_k_is_clipped_so_the_guesses_cannot_pass_max_tokens():
    """max_tokens 4, k 8: after the prefill's token, 3 tokens are left; a pass emits the accepted guesses plus the
    model's own token, so 4 - 1 - 1 = 2 guesses are offered (3 would pass max_tokens by one)."""
    e = engine(k=8)
    e.speculative.proposer = rec = Recorder({0: [0] * 8})
    e.add_request(PROMPT, SamplingParams(max_tokens=4, ignore_eos=True))
    e.step()  # prefill
    e.step()  # the first decode step: speculative
    assert rec.offered[0] == [2]


@pytest.mark.parametrize("first_guesses, second_k", [(5, 5), (7, 1)])
def test_k_is_clipped_by_the_free_blocks_the_earlier_guesses_left(first_guesses, second_k):
    """Two 6-token prompts in blocks of 4 (2 blocks each) in a pool of 6: 2 free blocks at the first decode step.
    The first sequence is offered (2 + 2) * 4 - 6 - 1 = 9 slots' worth, clipped to k = 8. Its guesses take blocks
    for tokens 6 … 6 + g: g = 5 -> 12 tokens, 3 blocks (1 taken, 1 left): the second is offered (2 + 1) * 4 - 7 = 5;
    g = 7 -> 14 tokens, 4 blocks (both taken): the second is offered 2 * 4 - 7 = 1."""
    e = engine(num_blocks=6, k=8)
    e.speculative.proposer = rec = Recorder({0: [1] * first_guesses, 1: []})
    for _ in range(2):
        e.add_request(PROMPT, SamplingParams(max_tokens=16, ignore_eos=True))
    e.step()
    assert e.block_manager.num_free_blocks == 2
    e.step()
    assert rec.offered == {0: [8], 1: [second_k]}


def test_counters_and_trace_of_a_hand_worked_run():
    """max_tokens 8, k 3, a proposer right for 2, 0 and 2 guesses (then wrong). Prefill emits t0. Pass 1: offered
    min(3, 8 - 1 - 1) = 3, guesses t1 t2 x: accepted 2, emits t1 t2 t3. Pass 2: offered min(3, 8 - 4 - 1) = 3,
    guesses x x x: accepted 0, emits t4. Pass 3: offered min(3, 8 - 5 - 1) = 2, guesses t5 t6: accepted 2, emits
    t5 t6 t7 and stops at max_tokens ("length"). Counters: proposed 3 + 3 + 2 = 8, accepted 4, passes 3. The
    tokens are plain greedy's; each step's last logits row is the one that chose the last emitted token."""
    ref = plain(8)
    right = iter([2, 0, 2])

    def oracle(seq, k):
        done, r = len(seq.generated_token_ids), next(right)
        return list(ref[done:done + r]) + [(t + 1) % 256 for t in ref[done + r:done + k]]

    e = engine(k=3)
    e.speculative.proposer = oracle
    real, tables = e.speculative._forward, []

    def forward(seqs, batch):  # the table the verification pass writes through (guesses' blocks taken)
        tables.append(list(seqs[0].block_table))
        return real(seqs, batch)

    e.speculative._forward = forward
    rid = e.add_request(PROMPT, SamplingParams(max_tokens=8, ignore_eos=True))
    e.step()
    seen = []
    while e.has_unfinished():
        seq = e.requests[rid]
        start = seq.cached_token_count
        trace = e.step()
        spec = trace.speculative[seq.seq_id]
        seen.append((len(spec["proposed"]), spec["accepted"], len(spec["emitted"])))
        assert spec["emitted"] == list(ref[len(seq.generated_token_ids) - len(spec["emitted"]):
                                           len(seq.generated_token_ids)])
        # fed: the last known token + the guesses, at cache indexes start …; slot = block * 4 + index % 4
        table = tables[-1]
        fed = 1 + len(spec["proposed"])
        assert spec["slots"] == [table[i // 4] * 4 + i % 4 for i in range(start, start + fed)]
        assert spec["discarded_slots"] == spec["slots"][len(spec["emitted"]):]
        state = next(s for s in trace.seqs if s.seq_id == seq.seq_id)
        assert state.token_out == spec["emitted"][-1] == int(e.last_logits[seq.seq_id].argmax())
        assert state.text_out == shipped()[1].decode([spec["emitted"][-1]]) != ""
    assert seen == [(3, 2, 3), (3, 0, 1), (2, 2, 3)]
    assert e.speculative.stats == {rid: {"num_proposed": 8, "num_accepted": 4, "num_passes": 3}}
    out = e.output(rid)
    assert tuple(out.token_ids) == ref and out.finish_reason == "length"


def test_without_the_rollback_every_fed_token_counts_as_cached():
    """The break-it: cached_token_count grows by every fed token (1 + 3 guesses here), nothing is discarded."""
    e = engine(k=3)
    e.speculative.rollback = False
    e.speculative.proposer = lambda seq, k: [0] * k
    rid = e.add_request(PROMPT, SamplingParams(max_tokens=8, ignore_eos=True))
    e.step()
    seq = e.requests[rid]
    before = seq.cached_token_count
    spec = e.step().speculative[seq.seq_id]
    assert seq.cached_token_count == before + 4 and spec["discarded_slots"] == []


def test_a_sampling_request_beside_a_speculating_one_samples_its_own_tokens():
    """In a speculative step a temperature-2 request (no guesses) samples its token from its row as plain decoding
    does (same seed, same tokens), while a greedy one beside it is verified."""
    params = [SamplingParams(max_tokens=6, ignore_eos=True),
              SamplingParams(max_tokens=6, temperature=2.0, seed=11, ignore_eos=True)]
    prompts = [PROMPT, [120, 1, 250, 7]]
    got = []
    for spec in (False, True):
        e = engine(k=2)
        if spec:
            e.speculative.proposer = lambda seq, k: [5] * k
        else:
            e.speculative = None
        ids = [e.add_request(p, s) for p, s in zip(prompts, params)]
        while e.has_unfinished():
            e.step()
        got.append([e.output(i).token_ids for i in ids])
    want = got.pop(0)
    assert got[0] == want and e.speculative.stats[0]["num_passes"] > 0


def test_nan_logits_end_their_own_request_with_the_rule_named():
    """NaN in the second sequence's rows of a verification pass: the step fails saying so, that request ends with
    finish_reason "error", the first one goes on."""
    e = engine(k=2)
    e.speculative.proposer = lambda seq, k: [5] * k
    a, b = (e.add_request(PROMPT, SamplingParams(max_tokens=8, ignore_eos=True)) for _ in range(2))
    e.step()
    real = e.speculative._forward

    def poisoned(seqs, batch):
        logits = real(seqs, batch).clone()
        logits[batch.starts[1]] = float("nan")
        return logits

    e.speculative._forward = poisoned
    with pytest.raises(EngineStepError, match=rf": the model's logits hold NaN or inf\. .*request {b} \(seq {b}\) "
                                              r"was ended with finish_reason 'error'"):
        e.step()
    assert e.output(b).finish_reason == "error" and not e.output(a).finished


def test_the_refusals_say_what_and_what_to_do():
    """A fault or a sliding window with speculation is refused at construction, the whole message as written."""
    model, tok = shipped()
    spec = SchedulerConfig(speculative=("ngram", 2))
    with pytest.raises(ValueError, match="^" + re.escape(
            "faults are injected without speculative decoding; set speculative=None") + "$"):
        LLMEngine(model, tok, scheduler_config=spec, fault="late_increment")
    with pytest.raises(ValueError, match="^" + re.escape(
            "speculative decoding with a sliding window is not supported (the verification pass reads the whole "
            "history); set speculative=None or use a model without a window") + "$"):
        LLMEngine(with_window(model, 6), tok, CacheConfig(block_size=4, num_blocks=32), spec)
    assert LLMEngine(with_window(model, 6), tok, CacheConfig(block_size=4, num_blocks=32)).speculative is None


def test_a_table_naming_a_block_past_the_pool_is_refused_before_the_pass():
    """The verification pass's tables go through the same check as a plain step's (no fault: the identity hook):
    a table whose first entry names block 999 of a 64-block pool fails the step naming that entry, before any
    K/V is written or read through it."""
    e = engine(k=2)
    e.speculative.proposer = lambda seq, k: [5] * k
    rid = e.add_request(PROMPT, SamplingParams(max_tokens=8, ignore_eos=True))
    e.step()
    e.requests[rid].block_table[0] = 999  # the block manager's own list: only the verification pass reads entry 0
    refusal = "ValueError: block_table[0] = 999 is outside the pool [0, 64)"
    with pytest.raises(EngineStepError, match=re.escape(refusal)):
        e.step()
