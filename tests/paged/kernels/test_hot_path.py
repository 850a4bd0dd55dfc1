"""The engine's per-step shortcuts give what the per-sequence definitions give: the one-pass block table check
refuses exactly the tables `validate_block_table` refuses, and batched sampling picks each row's own token."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from paged.addressing import validate_block_table
from paged.config import SamplingParams
from paged.addressing import validate_block_tables
from paged.engine.runner import prepare_inputs
from paged.engine.sampler import make_generator, sample
from paged.sequence import Sequence

pytestmark = [pytest.mark.kernels, pytest.mark.engine]

NUM_BLOCKS, BLOCK_SIZE = 12, 4


def _padded(tables: list[list[int]]) -> torch.Tensor:
    width = max(1, max(len(t) for t in tables))
    return torch.tensor([t + [-1] * (width - len(t)) for t in tables], dtype=torch.int32)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.lists(st.integers(-2, NUM_BLOCKS + 1), max_size=6), st.integers(1, 26)),
                     min_size=1, max_size=5))
def test_batch_check_refuses_what_the_per_sequence_check_refuses(rows):
    """Random tables (ids from -2 to past the pool, repeats, too short) and context lengths: validate_block_tables
    raises ValueError exactly when validate_block_table raises for some row."""
    tables, lens = [t for t, _ in rows], [n for _, n in rows]
    refused = []
    for table, n in zip(tables, lens):
        try:
            validate_block_table(table, NUM_BLOCKS, BLOCK_SIZE, n)
            refused.append(False)
        except ValueError:
            refused.append(True)
    if any(refused):
        with pytest.raises(ValueError):
            validate_block_tables(_padded(tables), torch.tensor(lens), NUM_BLOCKS, BLOCK_SIZE, tables)
    else:
        validate_block_tables(_padded(tables), torch.tensor(lens), NUM_BLOCKS, BLOCK_SIZE, tables)


def test_batch_check_names_the_entry():
    """The error is the per-sequence check's own message (which entry, which rule)."""
    tables = [[0, 1], [2, 2]]
    with pytest.raises(ValueError, match="physical block 2 appears twice"):
        validate_block_tables(_padded(tables), torch.tensor([5, 8]), NUM_BLOCKS, BLOCK_SIZE, tables)


def test_batch_check_is_one_python_pass():
    """The check reads context_lens once (tolist) and runs no other tensor op when every table is valid; it refuses
    a context_len of 0 (validate_block_table's rule) and tables that do not match the batch's rows."""
    from torch.overrides import TorchFunctionMode

    class Count(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    tables = [[0, 1, 2], [5], [7, 3]]
    padded, lens = _padded(tables), torch.tensor([9, 4, 5])
    with Count() as count:
        validate_block_tables(padded, lens, NUM_BLOCKS, BLOCK_SIZE, tables)
    assert [n for n in count.names if n != "__get__"] == ["tolist"], count.names  # __get__: reading .shape
    with pytest.raises(ValueError, match="context_len must be an integer >= 1"):
        validate_block_tables(padded, torch.tensor([9, 0, 5]), NUM_BLOCKS, BLOCK_SIZE, tables)
    with pytest.raises(ValueError, match="one of each per sequence"):
        validate_block_tables(padded, lens, NUM_BLOCKS, BLOCK_SIZE, tables[:2])
    validate_block_tables(torch.tensor([], dtype=torch.int32), torch.tensor([], dtype=torch.long), NUM_BLOCKS,
                       BLOCK_SIZE, [])  # an empty batch: nothing to refuse


def test_decode_inputs_are_the_last_token_at_its_index():
    """A decode batch feeds each sequence's last token at position num_tokens - 1, in its slot."""
    seqs = []
    for i, (prompt, table) in enumerate([([5, 6, 7], [3]), ([1] * 6, [0, 9])]):
        seq = Sequence(i, prompt)
        seq.on_prefill_done(40 + i)
        seq.block_table = table
        seqs.append(seq)
    batch = prepare_inputs(seqs, BLOCK_SIZE, False, torch.device("cpu"))
    assert batch.input_ids.tolist() == [40, 41] and batch.positions.tolist() == [3, 6]
    assert batch.slot_mapping.tolist() == [3 * 4 + 3, 9 * 4 + 2] and batch.starts == [0, 1]


def test_batched_sampling_equals_row_by_row():
    """Greedy rows get their own argmax and sampling rows their own generator's draw, whatever the mix."""
    torch.manual_seed(0)
    logits = torch.randn(5, 50)
    params = [SamplingParams(), SamplingParams(temperature=0.8, seed=3), SamplingParams(),
              SamplingParams(temperature=1.0, top_k=5, seed=4), SamplingParams()]
    got = sample(logits, params, [make_generator(p) for p in params])
    for b in (0, 2, 4):
        assert got[b] == max(range(50), key=lambda v: float(logits[b, v]))
    for b in (1, 3):
        g = make_generator(params[b])
        probs = torch.softmax(logits[b] / params[b].temperature, dim=-1)
        if params[b].top_k:
            probs = torch.where(probs >= probs.topk(params[b].top_k).values[-1], probs, 0.0)
        assert got[b] == int(torch.multinomial(probs / probs.sum(), 1, generator=g))
    with pytest.raises(ValueError, match="one each per row"):
        sample(logits, params[:2], [make_generator(p) for p in params[:2]])


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.sampled_from([-2.5, -1.0, 0.0, 0.5, 3.0, float("-inf")]), min_size=1, max_size=7),
                     min_size=1, max_size=4).filter(lambda r: len({len(x) for x in r}) == 1))
def test_argmax_rows_takes_the_first_maximum(rows):
    """Greedy picks each row's first maximal index (ties from few distinct values, -inf included), whatever the
    tensor's dtype, layout or mode: the numpy path (float32 / float64 CPU) and torch's (other dtypes) agree with a
    Python max over the row."""
    from paged.engine.sampler import argmax_rows

    want = [max(range(len(r)), key=lambda v: (r[v], -v)) for r in rows]
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        x = torch.tensor(rows, dtype=dtype)
        assert argmax_rows(x) == want
        assert argmax_rows(x.t().contiguous().t()) == want  # strided rows
        with torch.inference_mode():
            assert argmax_rows(torch.tensor(rows, dtype=dtype)) == want
    leaf = torch.tensor(rows, requires_grad=True)
    assert argmax_rows(leaf * 1) == want


def test_prefill_attention_is_one_causal_call_per_sequence(monkeypatch):
    """The paged prefill path (paged_attention_prefill) has no causal mask of its own: each sequence's chunk goes
    through paged.attention.attention_sdpa(causal=True) (the reference's one-SDPA-call form, see
    test_attention_sdpa), per layer, with its whole context read back."""
    import paged.attention as runner
    from paged.config import SamplingParams as Params

    engine = _tiny_engine()
    calls = []
    real = runner.attention_sdpa

    def spy(q, keys, values, **kw):
        calls.append((q.shape[0], keys.shape[0], kw))
        return real(q, keys, values, **kw)

    monkeypatch.setattr(runner, "attention_sdpa", spy)
    for prompt in ("abc", "hello!"):
        engine.add_request(prompt, Params(max_tokens=2, ignore_eos=True))
    engine.step()  # one prefill of both prompts (BOS + bytes: 4 and 7 tokens), one layer
    assert calls == [(4, 4, {"scale": None, "causal": True}), (7, 7, {"scale": None, "causal": True})]


# --- what a step does not do: UI-only text, copies of finished requests ----------------------------------------------
def _tiny_engine(num_blocks: int = 64, chunked: bool = False, kv_layout: str = "paged"):
    from paged.config import CacheConfig, ModelConfig, SchedulerConfig
    from paged.engine import LLMEngine
    from paged.model import ByteTokenizer, TinyLlama

    torch.manual_seed(0)
    model = TinyLlama(ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                  num_key_value_heads=1, max_position_embeddings=128)).eval()
    return LLMEngine(model, ByteTokenizer(), CacheConfig(block_size=4, num_blocks=num_blocks, seed=0),
                     SchedulerConfig(enable_chunked_prefill=chunked), kv_layout=kv_layout, attn_impl="gather")


def test_a_step_decodes_no_text_and_the_trace_decodes_on_demand(monkeypatch):
    """The engine's step never calls tokenizer.decode (no stop strings); a trace's text_out decodes its token when
    read, and the JSON export carries it."""
    import json

    engine = _tiny_engine()
    calls = []
    real = engine.tokenizer.decode
    monkeypatch.setattr(engine.tokenizer, "decode", lambda ids: calls.append(list(ids)) or real(ids))
    for prompt in ("abc", "hello"):
        engine.add_request(prompt, SamplingParams(max_tokens=3, ignore_eos=True))
    traces = [engine.step() for _ in range(3)]
    assert calls == []
    decoded = [s for t in traces for s in t.seqs if s.token_out is not None]
    assert decoded and all(s.text_out == real([s.token_out]) for s in decoded)
    exported = json.loads(traces[-1].to_json())["seqs"]
    assert [s["text_out"] for s in exported] == [real([s.token_out]) for s in traces[-1].seqs]
    assert all("decode" not in s for s in exported)


def test_a_step_checkpoint_does_not_grow_with_finished_requests():
    """StepCheckpoint copies live state only: after 40 finished requests, a checkpoint taken for one new request
    holds no container bigger than the pool, and rollback still works (see test_engine_failures)."""
    from paged.engine.checkpoint import StepCheckpoint

    engine = _tiny_engine(num_blocks=16)
    engine.generate([f"r{i}" for i in range(40)], SamplingParams(max_tokens=2, ignore_eos=True))
    engine.add_request("new", SamplingParams(max_tokens=2, ignore_eos=True))
    checkpoint = StepCheckpoint(engine)
    sizes = {name: len(value) for name, value in vars(checkpoint).items() if isinstance(value, (list, dict, set))}
    assert sizes and max(sizes.values()) <= engine.num_blocks, sizes
    assert len(engine.block_manager.last_hits) == 0  # finished sequences' prefix hits were dropped with their blocks


def test_a_mixed_step_is_one_prefill_call_with_its_decodes_as_one_token_chunks(monkeypatch):
    """Chunked prefill: in a step where running sequences decode beside a new prompt, each layer makes one
    paged_attention_prefill call, the decodes in it as one-token chunks (query_lens [1, 1, 16]); the logits equal
    the contiguous twin's."""
    import paged.engine.runner as runner
    from paged.config import SamplingParams as Params

    engines = [_tiny_engine(chunked=True), _tiny_engine(chunked=True, kv_layout="contiguous")]
    for engine in engines:
        for prompt in ("abc", "hello"):
            engine.add_request(prompt, Params(max_tokens=4, ignore_eos=True))
        engine.step()  # both prompts
    calls = []
    real_prefill = runner.paged_attention_prefill
    monkeypatch.setattr(runner, "paged_attention_prefill",
                        lambda q, kc, vc, tables, lens, qlens, **kw: calls.append(list(qlens))
                        or real_prefill(q, kc, vc, tables, lens, qlens, **kw))
    traces = []
    for engine in engines:
        engine.add_request("a longer prompt", Params(max_tokens=2, ignore_eos=True))
        traces.append(engine.step())
    assert traces[0].phase == "mixed" and [len(s.tokens_in) for s in traces[0].seqs] == [1, 1, 16]
    assert calls == [[1, 1, 16]]  # the paged engine's one layer
    for sid in (0, 1, 2):
        want = engines[1].last_logits[sid]
        assert torch.allclose(engines[0].last_logits[sid], want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))


def test_an_all_greedy_step_samples_from_the_logits_without_copying_them(monkeypatch):
    """When every row is greedy, the batched argmax reads the model's logits in place (no [B, vocab] gather);
    a mixed batch still hands each kind its own rows."""
    import paged.engine.sampler as sampler_module
    from paged.config import SamplingParams as Params

    engine = _tiny_engine()
    seen, produced = [], []
    real_sample, real_run = sampler_module.sample, engine.runner.run
    monkeypatch.setattr(sampler_module, "sample", lambda rows, *a: seen.append(rows) or real_sample(rows, *a))
    monkeypatch.setattr(engine.runner, "run", lambda seqs, batch: produced.append(real_run(seqs, batch))
                        or produced[-1])
    for prompt in ("abc", "hello"):
        engine.add_request(prompt, Params(max_tokens=3, ignore_eos=True))
    engine.step()
    assert seen[-1].data_ptr() == produced[-1].data_ptr() and seen[-1].shape == produced[-1].shape
    engine.add_request("xyz", Params(max_tokens=3, temperature=0.8, seed=1, ignore_eos=True))
    engine.step()  # the sampling prompt's prefill alone
    engine.step()  # decode: two greedy rows, one sampling row
    assert seen[-2].shape[0] == 2 and seen[-1].shape[0] == 1


def test_the_engine_writes_without_searching_for_pads(monkeypatch):
    """Without a fault the hook tells write_kv there are no -1 slots (pads=False, no per-layer search); a faulty
    hook keeps the search. write_kv(pads=False) writes what pads=True writes, and a -1 it is told is absent
    still raises when validated."""
    import paged.engine.runner as runner
    import paged.faults.hooks as hooks
    from paged.kv_cache import write_kv

    seen = []
    real = runner.write_kv  # what the runner hands the hook with a reference impl ("gather")
    monkeypatch.setattr(runner, "write_kv", lambda *a, **kw: seen.append(kw.get("pads", True)) or real(*a, **kw))
    engine = _tiny_engine()
    engine.add_request("abc", SamplingParams(max_tokens=3, ignore_eos=True))
    engine.step()
    engine.step()  # prefill, then a decode
    assert seen and not any(seen)
    assert all(hooks.fault_hook(f, 4, 64).pads for f in hooks.HOOKS if f is not None)

    cache = [torch.zeros(3, 4, 1, 2) for _ in range(4)]
    kv = torch.arange(6.0).reshape(3, 1, 2)
    slots = torch.tensor([5, 0, 11])
    write_kv(cache[0], cache[1], kv, -kv, slots, pads=False)
    write_kv(cache[2], cache[3], kv, -kv, slots)
    want = torch.zeros(12, 1, 2)
    want[slots] = kv
    assert torch.equal(cache[0].reshape(12, 1, 2), want) and torch.equal(cache[2], cache[0])
    assert torch.equal(cache[1], -cache[0]) and torch.equal(cache[3], cache[1])
    with pytest.raises(ValueError, match="pads=False, but slot_mapping holds -1"):
        write_kv(cache[0], cache[1], kv, kv, torch.tensor([5, -1, 11]), pads=False)
