"""Types and sizes at the boundary: floats or bools where an int is meant, absurd sizes and non-finite numbers are
ValueErrors naming the value and the rule; for any input, the public entry points either give a correct result or
raise ValueError, never another exception."""

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paged.block_manager import BlockManager
from paged.config import MAX_BLOCK_SIZE, MAX_NUM_BLOCKS, CacheConfig, ModelConfig, SamplingParams, SchedulerConfig
from paged.engine import LLMEngine
from paged.model import ByteTokenizer, TinyLlama
from paged.sequence import Sequence, SequenceStatus

pytestmark = pytest.mark.article

torch.manual_seed(0)
MODEL = TinyLlama(ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              num_key_value_heads=1, max_position_embeddings=48)).eval()
TOK = ByteTokenizer()


@pytest.mark.parametrize("make, msg", [
    (lambda: CacheConfig(block_size=4.0), "block_size must be an integer, got 4.0"),
    (lambda: CacheConfig(block_size=True), "block_size must be an integer, got the bool"),
    (lambda: CacheConfig(block_size=MAX_BLOCK_SIZE + 1), r"block_size must be an integer in \[1, 65536\]"),
    (lambda: CacheConfig(num_blocks=1.9), "num_blocks must be an integer, got 1.9"),
    (lambda: CacheConfig(num_blocks=10**9), r"num_blocks must be an integer in \[1, 1048576\], got 1000000000"),
    (lambda: CacheConfig(watermark=float("nan")), "watermark must be a finite number"),
    (lambda: CacheConfig(watermark=True), "watermark must be a number"),
    (lambda: CacheConfig(memory_budget_bytes=1e6), "memory_budget_bytes must be an integer"),
    (lambda: CacheConfig(seed=1.5), "seed must be an integer"),
    (lambda: CacheConfig(enable_prefix_caching=1), "enable_prefix_caching must be True or False"),
    (lambda: SchedulerConfig(max_num_seqs=True), "max_num_seqs must be an integer, got the bool"),
    (lambda: SchedulerConfig(max_num_batched_tokens=2048.0), "max_num_batched_tokens must be an integer"),
    (lambda: ModelConfig(rope_theta=0), r"rope_theta must be in \(0.0, inf\], got 0.0"),
    (lambda: ModelConfig(rope_theta=-1.0), "rope_theta must be in"),
    (lambda: ModelConfig(rope_theta=float("inf")), "rope_theta must be a finite number"),
    (lambda: ModelConfig(rms_norm_eps=float("nan")), "rms_norm_eps must be a finite number"),
    (lambda: ModelConfig(rms_norm_eps=0.0), "rms_norm_eps must be in"),
    (lambda: ModelConfig(hidden_size=True), "hidden_size must be an integer, got the bool"),
    (lambda: ModelConfig(tie_word_embeddings="no"), "tie_word_embeddings must be True or False"),
    (lambda: Sequence(0, "abc"), "must be a list of integers, got the string 'abc'"),
    (lambda: Sequence(0, [1.9]), r"prompt_token_ids\[0\] must be an integer, got 1.9"),
    (lambda: Sequence(0, [3, -1]), r"prompt_token_ids\[1\] must be an integer >= 0"),
    (lambda: Sequence(True, [1]), "seq_id must be an integer, got the bool"),
    (lambda: BlockManager(10**9, 4), r"num_blocks must be an integer in \[1, 1048576\]"),
    (lambda: BlockManager(8.0, 4), "num_blocks must be an integer, got 8.0"),
    (lambda: BlockManager(8, 2**17), "block_size must be an integer in"),
    (lambda: BlockManager(8, 4, watermark=float("inf")), "watermark must be a finite number"),
    (lambda: LLMEngine(MODEL, TOK, CacheConfig(block_size=1, memory_budget_bytes=2**40)),
     "memory_budget_bytes .* more than MAX_NUM_BLOCKS"),
])
def test_bad_types_and_sizes_name_the_value_and_rule(make, msg):
    """Each bad value raises ValueError with the field's name and the rule it breaks (no MemoryError, no silent
    int(1.9) == 1)."""
    with pytest.raises(ValueError, match=msg):
        make()


@pytest.mark.parametrize("block_ids", [[1.9], [True], ["1"], "12", [None]])
def test_move_to_front_refuses_non_integer_block_ids(block_ids):
    """move_to_front([1.9]) would put block 1 first; any non-integer id is refused and nothing changes."""
    bm = BlockManager(4, 4)
    with pytest.raises(ValueError, match="block"):
        bm.move_to_front(block_ids)
    assert list(bm.free_block_ids) == [0, 1, 2, 3] and not bm.tables
    bm.check_invariants()


def test_integer_scalars_are_normalised():
    """numpy / torch integer scalars are accepted and stored as plain ints (so they compare and serialise)."""
    import numpy as np

    cc = CacheConfig(block_size=np.int64(8), num_blocks=torch.tensor(16))
    assert (cc.block_size, cc.num_blocks) == (8, 16) and type(cc.block_size) is int and type(cc.num_blocks) is int
    assert SamplingParams(max_tokens=np.int32(3), stop=["a"]).stop == ("a",)


WILD = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**70), st.integers(-2, 70),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
                 st.lists(st.integers(-2, 300), max_size=3))


def _is_int(v) -> bool:
    return type(v) is int


def _check_cache(c: CacheConfig) -> None:
    assert _is_int(c.block_size) and 1 <= c.block_size <= MAX_BLOCK_SIZE
    assert c.num_blocks is None or _is_int(c.num_blocks) and 1 <= c.num_blocks <= MAX_NUM_BLOCKS
    assert type(c.watermark) is float and 0 <= c.watermark < 1 and _is_int(c.memory_budget_bytes)
    assert c.seed is None or _is_int(c.seed)
    assert type(c.enable_prefix_caching) is bool


def _check_params(p: SamplingParams) -> None:
    assert _is_int(p.max_tokens) and p.max_tokens >= 1 and _is_int(p.n) and p.n >= 1 and _is_int(p.top_k)
    assert type(p.temperature) is float and math.isfinite(p.temperature)
    assert p.temperature == 0 or p.temperature >= 0.01
    assert type(p.top_p) is float and 0 < p.top_p <= 1 and type(p.ignore_eos) is bool
    assert p.seed is None or _is_int(p.seed) and 0 <= p.seed < 2**64
    assert isinstance(p.stop, tuple) and all(isinstance(s, str) and s for s in p.stop)


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["cache", "sched", "params", "model", "sequence", "block_manager"]),
       values=st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "f"]), WILD, max_size=4))
def test_any_input_gives_a_result_or_a_value_error(kind, values):
    """Fields filled with wild values (None, bools, huge ints, NaN, text, lists): a correct object or a ValueError."""
    names = {"cache": ["block_size", "num_blocks", "watermark", "memory_budget_bytes", "seed",
                       "enable_prefix_caching"],
             "sched": ["max_num_batched_tokens", "max_num_seqs", "max_num_seqs", "max_num_seqs", "max_num_seqs",
                       "max_num_seqs"],
             "params": ["max_tokens", "temperature", "top_k", "top_p", "seed", "n"],
             "model": ["vocab_size", "hidden_size", "rope_theta", "rms_norm_eps", "num_key_value_heads",
                       "tie_word_embeddings"]}
    try:
        if kind in names:
            kwargs = {names[kind]["abcdef".index(k)]: v for k, v in values.items()}
            obj = {"cache": CacheConfig, "sched": SchedulerConfig, "params": SamplingParams,
                   "model": ModelConfig}[kind](**kwargs)
        elif kind == "sequence":
            obj = Sequence(values.get("a", 0), values.get("b", [1]))
        else:
            obj = BlockManager(values.get("a", 4), values.get("b", 2), values.get("c", 0.0), values.get("d"))
    except ValueError:
        return
    if kind == "cache":
        _check_cache(obj)
    elif kind == "sched":
        assert _is_int(obj.max_num_seqs) and _is_int(obj.max_num_batched_tokens) and obj.max_num_seqs >= 1
    elif kind == "params":
        _check_params(obj)
    elif kind == "model":
        assert obj.hidden_size % obj.num_attention_heads == 0 and obj.rope_theta > 0 and obj.rms_norm_eps > 0
        assert math.isfinite(obj.rope_theta) and math.isfinite(obj.rms_norm_eps)
    elif kind == "sequence":
        assert _is_int(obj.seq_id) and obj.prompt_token_ids and all(_is_int(t) and t >= 0
                                                                   for t in obj.prompt_token_ids)
    else:
        assert 1 <= obj.num_blocks <= MAX_NUM_BLOCKS and obj.num_free_blocks == obj.num_blocks
        obj.check_invariants()


PROMPTS = st.one_of(WILD, st.lists(st.one_of(st.integers(-2, 300), st.booleans(), st.floats(0, 5)), max_size=5),
                    st.text(min_size=1, max_size=8))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=PROMPTS, params=st.dictionaries(st.sampled_from(["max_tokens", "temperature", "top_k", "top_p", "seed",
                                                               "n", "stop"]), WILD, max_size=3))
def test_add_request_gives_a_runnable_request_or_a_value_error(prompt, params):
    """LLMEngine.add_request with wild prompts and params: refused with ValueError (nothing queued), or accepted,
    and then it runs to the end with consistent blocks."""
    engine = LLMEngine(MODEL, TOK, CacheConfig(block_size=4, num_blocks=16, watermark=0.0), attn_impl="gather")
    try:
        rid = engine.add_request(prompt, SamplingParams(**params))
    except ValueError:
        assert not engine.has_unfinished() and engine.block_manager.num_free_blocks == 16
        return
    for _ in range(60):
        if not engine.has_unfinished():
            break
        engine.step()
        engine.block_manager.check_invariants()
    out = engine.output(rid)
    assert out.finished and out.finish_reason in ("length", "eos", "stop")
    assert all(s.status is SequenceStatus.FINISHED for s in engine.sequences.values())
    assert engine.block_manager.num_free_blocks == 16
