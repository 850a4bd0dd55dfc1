"""The engine step's rules: a request stops at any of the tokenizer's end-of-sequence ids (unless ignore_eos),
a failed step's error says where it failed, what it kept and what to do, and a step without recording keeps no
tables; checked against a plain no-cache greedy loop."""

import pytest
import torch

from paged.config import CacheConfig, SamplingParams
from paged.engine import EngineStepError, LLMEngine
from paged.model import ByteTokenizer

from helpers import tiny_model

pytestmark = pytest.mark.engine

PROMPT = [72, 101, 108, 108, 111, 32, 119]


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)


@torch.no_grad()
def greedy(model, ids: list[int], n: int) -> list[int]:
    """n greedy tokens by full forward passes over the whole context (no cache at all)."""
    out = []
    for _ in range(n):
        out.append(int(model(torch.tensor([ids + out]))[0, -1].argmax()))
    return out


class EosIds(ByteTokenizer):
    """The byte tokenizer with other end-of-sequence ids."""

    def __init__(self, eos_token_id: int, eos_token_ids: tuple[int, ...]) -> None:
        super().__init__()
        self.eos_token_id, self.eos_token_ids = eos_token_id, eos_token_ids


class OneEos:
    """A tokenizer with a single eos_token_id and no eos_token_ids."""

    def __init__(self, eos_token_id: int) -> None:
        self.inner, self.eos_token_id = ByteTokenizer(), eos_token_id

    def encode(self, text):
        return self.inner.encode(text)

    def decode(self, ids):
        return self.inner.decode(ids)


def generate(model, tokenizer, ignore_eos: bool = False):
    eng = LLMEngine(model, tokenizer, CacheConfig(block_size=4, num_blocks=32, watermark=0.0), attn_impl="gather")
    return eng.generate([PROMPT], SamplingParams(max_tokens=4, ignore_eos=ignore_eos))[0]


def test_a_request_stops_at_an_end_of_sequence_id(tiny):
    """With eos_token_ids (any of them) or a lone eos_token_id naming the second greedy token, generation stops
    right after it with finish_reason "eos"; ignore_eos runs to max_tokens."""
    model, _ = tiny
    ref = greedy(model, PROMPT, 4)
    assert ref[0] != ref[1] and 258 not in ref[:2], "the test needs two different first tokens"
    out = generate(model, EosIds(258, (258, ref[1])))
    assert (out.token_ids, out.finish_reason) == (ref[:2], "eos")
    out = generate(model, OneEos(ref[1]))
    assert (out.token_ids, out.finish_reason) == (ref[:2], "eos")
    out = generate(model, EosIds(258, (258, ref[1])), ignore_eos=True)
    assert (out.token_ids, out.finish_reason) == (ref, "length")


def test_a_failure_while_scheduling_says_so(tiny, monkeypatch):
    """A step whose scheduling raises: the error names the step, "while scheduling", the cause, the rollback and
    what to do; no sequence was scheduled and no request ended."""
    model, tok = tiny
    eng = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=32), attn_impl="gather")
    eng.add_request(PROMPT, SamplingParams(max_tokens=2))

    def boom():
        raise RuntimeError("boom")

    monkeypatch.setattr(eng.scheduler, "schedule", boom)
    with pytest.raises(EngineStepError) as info:
        eng.step()
    assert str(info.value) == ("engine step 0 failed while scheduling: RuntimeError: boom. The engine was rolled "
                               "back to before the step; step again to retry, or abort the request to blame")
    assert (info.value.step, info.value.seq_ids, info.value.ended_request) == (0, [], None)


def test_a_failure_after_a_preemption_says_who_stays_preempted(tiny, monkeypatch):
    """A decode step that preempted a sequence and then failed: the error names the step, its phase and
    sequences, and the preempted one, which stays preempted; the engine then finishes every request."""
    model, tok = tiny
    eng = LLMEngine(model, tok, CacheConfig(block_size=2, num_blocks=4, watermark=0.0), attn_impl="gather")
    params = SamplingParams(max_tokens=5, ignore_eos=True)
    a, b = eng.add_request(PROMPT[:2], params), eng.add_request(PROMPT[2:4], params)
    for _ in range(3):
        eng.step()
    real = eng.runner.run

    def boom(seqs, batch):
        raise RuntimeError("boom")

    monkeypatch.setattr(eng.runner, "run", boom)
    with pytest.raises(EngineStepError) as info:
        eng.step()  # token 4 of each needs a third block, none is free: b is preempted, then the model fails
    assert str(info.value) == (f"engine step 3 failed during the decode of seq(s) [{a}]: RuntimeError: boom. The "
                               f"engine was rolled back to before the step (seq(s) [{b}], preempted by it, stay "
                               "preempted); step again to retry, or abort the request to blame")
    assert (info.value.step, info.value.seq_ids, info.value.ended_request) == (3, [a], None)
    monkeypatch.setattr(eng.runner, "run", real)
    while eng.has_unfinished():
        eng.step()
    assert [len(eng.output(r).token_ids) for r in (a, b)] == [5, 5]


def test_steps_are_numbered_and_record_false_keeps_no_tables(tiny):
    """Traces are numbered 0, 1, 2, ...; an engine with record=False keeps no block tables, states or queues."""
    model, tok = tiny
    for record in (True, False):
        eng = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=32), attn_impl="gather", record=record)
        eng.add_request(PROMPT, SamplingParams(max_tokens=4, ignore_eos=True))
        traces = [eng.step() for _ in range(3)]  # still running after the third
        assert [t.step for t in traces] == [0, 1, 2]
        kept = [(t.block_tables_before, t.block_tables_after, t.seqs, t.running) for t in traces[1:]]
        assert all(all(k) for k in kept) if record else not any(any(k) for k in kept)


def test_a_row_of_nan_logits_ends_its_own_request(tiny, monkeypatch):
    """When the second sequence's logits are NaN, the step fails naming that, its request (not the first one) is
    ended with finish_reason "error", and the other request finishes; finite logits whose sum overflows are fine."""
    model, tok = tiny
    eng = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=32), attn_impl="gather")
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    a, b = eng.add_request(PROMPT, params), eng.add_request(PROMPT[:3], params)
    real = eng.runner.run

    def nan_second_row(seqs, batch):
        out = real(seqs, batch).clone()
        out[1] = float("nan")
        return out

    monkeypatch.setattr(eng.runner, "run", nan_second_row)
    with pytest.raises(EngineStepError, match=rf"the model's logits hold NaN or inf\. .*request {b} \(seq {b}\) was "
                                              "ended with finish_reason 'error'") as info:
        eng.step()
    assert info.value.ended_request == b and eng.output(b).finish_reason == "error"

    def huge_but_finite(seqs, batch):
        out = real(seqs, batch).clone()
        out[:, :2] = 3e38  # each logit finite, their sum inf
        return out

    monkeypatch.setattr(eng.runner, "run", huge_but_finite)
    t = eng.step()
    assert t.scheduled == [a] and len(eng.output(a).token_ids) == 1


def test_elapsed_ms_is_the_steps_own_time(tiny, monkeypatch):
    """elapsed_ms covers the step's work: at least a 20 ms pause inside the model run, at most the time measured
    around the whole step call."""
    import time

    model, tok = tiny
    eng = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=32), attn_impl="gather")
    eng.add_request(PROMPT, SamplingParams(max_tokens=2))
    real = eng.runner.run

    def slow(seqs, batch):
        time.sleep(0.02)
        return real(seqs, batch)

    monkeypatch.setattr(eng.runner, "run", slow)
    start = time.perf_counter()
    t = eng.step()
    wall_ms = (time.perf_counter() - start) * 1000
    assert 20 <= t.elapsed_ms <= wall_ms


@pytest.mark.parametrize("layout", ["paged", "contiguous"])
def test_traces_name_their_layout_and_fork_nothing_for_one_sample(tiny, layout):
    """Every trace names the engine's kv_layout; with n = 1 no step forks; a chunked prompt without ignore_eos
    runs to its end (a chunk mid-prefill has no token to stop on)."""
    model, tok = tiny
    from paged.config import SchedulerConfig

    eng = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=32), SchedulerConfig(
        max_num_batched_tokens=8, enable_chunked_prefill=True), kv_layout=layout, attn_impl="gather")
    rid = eng.add_request(PROMPT * 4, SamplingParams(max_tokens=2))
    traces = []
    while eng.has_unfinished():
        traces.append(eng.step())
    assert all(t.kv_layout == layout and t.forked == {} for t in traces)
    assert any(s.token_out is None for t in traces for s in t.seqs) and eng.output(rid).finished
