"""Property test: random interleavings of add / prefill / decode / free keep every invariant."""

from hypothesis import given, settings
from hypothesis import strategies as st

from lessons.playground import Playground

ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 13)),
    st.tuples(st.just("decode"), st.integers(0, 7)),
    st.tuples(st.just("free"), st.integers(0, 7)),
), min_size=1, max_size=25)


def check_invariants(pg: Playground) -> None:
    bm = pg.manager
    owners = bm.block_owners()
    assert all(len(o) <= 1 for o in owners), "a block is owned by more than one sequence"
    free = set(bm.free_block_ids)
    assert all((b in free) != bool(owners[b]) for b in range(bm.num_blocks)), "a block is both free and owned"
    assert bm.num_free_blocks + sum(1 for o in owners if o) == bm.num_blocks
    for seq in pg.running():
        assert seq.cached_token_count <= len(seq.block_table) * bm.block_size
        assert seq.cached_token_count == seq.num_tokens - 1
    for result in pg.check():
        assert result.ok, f"paged != contiguous for sequence {result.seq_id}: rel err {result.rel_err}"


@settings(max_examples=60, deadline=None)
@given(ops=ops, block_size=st.sampled_from([1, 2, 4]), seed=st.integers(0, 3))
def test_random_interleavings_keep_invariants(ops, block_size, seed):
    """After every step: blocks free or singly owned, free + used = num_blocks, cached <= capacity, and every live
    sequence's paged decode equals its contiguous twin. After freeing all, every block is free."""
    pg = Playground(num_blocks=12, block_size=block_size, num_heads=4, num_kv_heads=2, head_dim=8, seed=seed)
    for op, arg in ops:
        live = pg.running()
        if op == "add":
            if pg.manager.num_free_blocks * block_size >= arg:
                pg.add_sequence(arg)
        elif op == "decode" and live:
            chosen = [s.seq_id for s in live[: 1 + arg % len(live)]]
            if pg.can_decode(chosen):
                pg.decode_step(chosen)
        elif op == "free" and live:
            pg.finish(live[arg % len(live)].seq_id)
        check_invariants(pg)
    for seq in pg.running():
        pg.finish(seq.seq_id)
    assert pg.manager.num_free_blocks == pg.manager.num_blocks
    pg.manager.check_invariants()
