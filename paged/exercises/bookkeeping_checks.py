"""Exercises 8 and 9, the bookkeeping around the address chain: the block manager (allocate,
append_slot, free) and a Sequence's state rule, each checked against the library.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from paged.sequence import Sequence as RefSequence

from .links import Failure, Workspace, check_appended, check_freed, check_tables, short


# --- 8. the block manager -------------------------------------------------------------------------
@contextmanager
def _method(name: str) -> Iterator[None]:
    """Tag any exception raised inside (a Failure, or the learner's own error) with the block
    manager method under check (`.method`: allocate, append_slot or free), for the hint.
    Raises: whatever the body raises, unchanged but tagged."""
    try:
        yield
    except Exception as err:
        if getattr(err, "method", None) is None:
            err.method = name
        raise


def check_block_manager(ws: Workspace) -> dict:
    """allocate / append_slot / free on library Sequences: tables the right size, no block twice,
    the free count, each decode slot the slot of token cached_token_count (every step), freed tables
    emptied, a too-big allocate refused. A failure carries the method under check (_method)."""
    num_blocks, bs = 12, 4
    bm = ws["block_manager"].BlockManager(num_blocks, bs, seed=3)
    a, b = RefSequence(0, list(range(10))), RefSequence(1, list(range(5)))
    live = []
    with _method("allocate"):
        for s in (a, b):
            got = bm.allocate(s)
            live.append(s)
            check_tables(
                bm, live, num_blocks, f"allocate(sequence {s.seq_id}, {s.num_tokens} tokens)", s
            )
            if got != s.block_table:
                raise Failure(
                    "block_table",
                    "allocate must return the table it set",
                    "allocate 应返回它设置的表",
                    f"allocate(sequence {s.seq_id})",
                    s.block_table,
                    short(got),
                )
            s.on_prefill_done(1)
    with _method("append_slot"):
        for step in range(6):
            token = a.cached_token_count
            shown = f"append_slot(sequence 0) for token {token}, table before {list(a.block_table)}"
            slot = bm.append_slot(a)
            check_appended(bm, a, live, num_blocks, bs, token, slot, shown, step)
            a.on_decode_done(1)
    with _method("free"):
        table = list(a.block_table)
        freed = bm.free(a)
        live.remove(a)
        shown = f"free(sequence 0) holding {table}"
        check_freed(a, table, freed, shown)
        check_tables(bm, live, num_blocks, shown)
    with _method("allocate"):
        c = RefSequence(2, list(range(20)))
        bm.allocate(c)
        live.append(c)
        check_tables(bm, live, num_blocks, "allocate(sequence 2, 20 tokens) after the free", c)
        big, before = RefSequence(3, list(range(100))), bm.num_free_blocks
        try:
            bm.allocate(big)
        except ValueError:
            pass
        else:
            raise Failure(
                "free_blocks",
                "allocate must raise ValueError when too few blocks are free",
                "空闲 block 不够时 allocate 应抛 ValueError",
                f"allocate(100 tokens), {before} free",
                "ValueError",
                f"table {short(big.block_table)}",
            )
        if big.block_table or bm.num_free_blocks != before:
            raise Failure(
                "free_blocks",
                "a refused allocate must change nothing",
                "被拒绝的 allocate 不应改变任何东西",
                "allocate(100 tokens)",
                f"{before} free, no table",
                f"{bm.num_free_blocks} free",
            )
    return {}


# --- 9. the state rule ----------------------------------------------------------------------------
def check_state_rule(ws: Workspace) -> dict:
    """Sequence: num_tokens, and cached_token_count / generated_token_ids after prefill and each
    decode step."""
    s = ws["sequence"].Sequence(0, [5, 6, 7])
    expected = [
        ("new", 0, [], 3),
        ("on_prefill_done(9)", 3, [9], 4),
        ("on_decode_done(4)", 4, [9, 4], 5),
        ("on_decode_done(2)", 5, [9, 4, 2], 6),
    ]
    for what, cached, generated, num_tokens in expected:
        if what.startswith("on_prefill"):
            s.on_prefill_done(9)
        elif what.startswith("on_decode"):
            s.on_decode_done(int(what[15]))
        shown = f"prompt_token_ids=[5, 6, 7], after {what}"
        if s.cached_token_count != cached:
            raise Failure(
                "cached_token_count",
                "cached_token_count must count the tokens whose K/V are written",
                "cached_token_count 应等于已写入 K/V 的 token 数",
                shown,
                cached,
                s.cached_token_count,
            )
        if list(s.generated_token_ids) != generated:
            raise Failure(
                "generated_token_ids",
                "generated_token_ids must hold the tokens sampled so far",
                "generated_token_ids 应是已采样的 token",
                shown,
                generated,
                list(s.generated_token_ids),
            )
        if s.num_tokens != num_tokens:
            raise Failure(
                "cached_token_count",
                "num_tokens must be prompt plus generated",
                "num_tokens 应等于 prompt 加已生成",
                shown,
                num_tokens,
                s.num_tokens,
            )
    return {}
