"""BlockManager's rules at their edges: a chunk's allocation needs only the chunk's blocks, refusals that name
the sequence and the rule, blocks saved by sharing, check_invariants naming what is broken, and prefix caching
hashing a block in the decode step that fills it."""

import pytest

from paged.block_manager import BlockManager
from paged.config import CacheConfig, SamplingParams
from paged.engine import LLMEngine
from paged.sequence import Sequence

from helpers import tiny_model

pytestmark = pytest.mark.article


def test_a_chunk_needs_only_its_own_blocks():
    """With max_new_tokens (chunked prefill) can_allocate and allocate count only the blocks of that many tokens:
    a 20-token prompt's first 4 tokens fit a pool with 2 free blocks of 2; the whole prompt does not."""
    bm = BlockManager(2, 2, watermark=0.0)
    seq = Sequence(0, list(range(20)))
    assert not bm.can_allocate(seq) and bm.can_allocate(seq, 4)
    assert len(bm.allocate(seq, max_new_tokens=4)) == 2 and bm.num_free_blocks == 0


def test_refusals_name_the_sequence_and_the_rule():
    """allocate refuses a sequence that already has a table, append_slot one this manager never allocated, fork
    a parent without blocks or a child with them, and append_slot with a full pool says the scheduler should
    preempt."""
    bm = BlockManager(2, 2, watermark=0.0)
    stray = Sequence(0, [1, 2])
    stray.block_table = [1]
    with pytest.raises(ValueError, match="already"):
        bm.allocate(stray)
    with pytest.raises(ValueError, match="sequence 0 holds no blocks"):
        bm.append_slot(stray)
    with pytest.raises(ValueError, match="sequence 0 holds no blocks"):
        bm.ensure_capacity(stray, 4)
    with pytest.raises(ValueError, match="cannot fork sequence 3: it holds no blocks"):
        bm.fork(Sequence(3, [1]), Sequence(4, [1]))
    a, b = Sequence(1, [1, 2]), Sequence(2, [3, 4])
    bm.allocate(a)
    bm.allocate(b)
    with pytest.raises(ValueError, match="sequence 2 already holds blocks"):
        bm.fork(a, b)
    a.on_prefill_done(5)
    with pytest.raises(ValueError, match=r"the pool is full \(the scheduler should preempt\)$"):
        bm.append_slot(a)


def test_blocks_saved_by_sharing():
    """num_shared_saved counts the block holdings sharing saves: none alone, the parent's two blocks after one
    fork, four after two."""
    bm = BlockManager(8, 4, watermark=0.0)
    parent = Sequence(0, list(range(6)))
    bm.allocate(parent)
    assert bm.num_shared_saved() == 0
    bm.fork(parent, Sequence(1, list(range(6))))
    assert bm.num_shared_saved() == 2
    bm.fork(parent, Sequence(2, list(range(6))))
    assert bm.num_shared_saved() == 4


def test_check_invariants_names_what_is_broken():
    """A ref count that disagrees with the tables, or a held block still in the free queue, is named."""
    bm = BlockManager(4, 2, watermark=0.0)
    bm.allocate(Sequence(0, [1, 2, 3]))
    bm.check_invariants()
    bm.ref_counts[bm.tables[0][0]] += 1
    with pytest.raises(AssertionError, match="^ref counts differ from the number of tables holding each block$"):
        bm.check_invariants()
    bm.ref_counts[bm.tables[0][0]] -= 1
    bm.free_block_ids.put_back([bm.tables[0][0]])
    with pytest.raises(AssertionError, match="^free queue != blocks with ref 0$"):
        bm.check_invariants()


def test_a_block_filled_by_a_decode_is_found_by_the_next_prompt():
    """Prefix caching: the decode step that writes a block's last token hashes it, so a later prompt starting with
    those tokens reuses it and is fed only the rest (from position 4)."""
    model, tok = tiny_model(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    eng = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=16, watermark=0.0, enable_prefix_caching=True),
                    attn_impl="gather")
    first = eng.generate([[7, 8, 9]], SamplingParams(max_tokens=2, ignore_eos=True))[0]
    block = [7, 8, 9, first.token_ids[0]]  # prompt + the first token: written by the decode step
    eng.add_request(block + [10, 11], SamplingParams(max_tokens=1, ignore_eos=True))
    t = eng.step()
    assert t.seqs[0].positions == [4, 5]


def test_construction_refuses_bad_settings_by_name():
    """watermark in [0, 1), an integer seed and a bool enable_prefix_caching, each refused by name."""
    for kwargs, rule in (({"watermark": -0.1}, "watermark"), ({"watermark": 1.0}, r"watermark must be in \[0, 1\)"),
                         ({"seed": 1.5}, "seed must be an integer"),
                         ({"enable_prefix_caching": "yes"}, "^enable_prefix_caching must be")):
        with pytest.raises(ValueError, match=rule):
            BlockManager(4, 2, **kwargs)
    assert BlockManager(4, 2, watermark=0.0).watermark_blocks == 0


def test_move_to_front_takes_free_block_ids_only():
    """The teaching demos' reordering: ids must be a list of block ids in [0, num_blocks) that are free; the error
    names the pool's range."""
    bm = BlockManager(4, 2, watermark=0.0)
    bm.move_to_front([3, 0])
    assert bm.allocate(Sequence(0, [1, 2, 3])) == [3, 0]
    for bad, rule in (("ab", "block_ids must be a list of physical block ids"), ([-1], r"block id .*\[0, 3\]"),
                      ([4], r"block id .*\[0, 3\]"), ([3], r"physical block\(s\) \[3\] are not free \(pool has "
                                                          r"blocks 0\.\.3\)")):
        with pytest.raises(ValueError, match=rule):
            bm.move_to_front(bad)


def test_a_prompt_reuses_every_cached_full_block_but_computes_its_last_token():
    """Prefix caching: a prompt of two cached blocks plus one token is fed that one token only."""
    model, tok = tiny_model(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    eng = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=16, watermark=0.0, enable_prefix_caching=True),
                    attn_impl="gather")
    eng.generate([list(range(10, 19))], SamplingParams(max_tokens=1, ignore_eos=True))
    eng.add_request(list(range(10, 18)) + [99], SamplingParams(max_tokens=1, ignore_eos=True))
    assert eng.step().seqs[0].positions == [8]
