"""Page 7's "what comes next", touchable: the split of a long decode context into partitions (flash-decoding, vLLM's
v2 kernel) on a real paged pool, and where FlashAttention's and FlashInfer's paged layouts find the same tokens.

    plan = split_plan(context_len, partition_size, block_size)   # which tokens / blocks each partition reads
    run = split_k_run(SplitCase(...))     # every partition's max, sum of exponentials and partial output, the
                                          # reduce, checked against plain attention (float64), and both timed
    view = layout_views()                 # the article's batch in one pool, read through each layout's indexing

Split-K, one query per head: partition p holds scores s (its tokens only); it keeps m_p = max s, l_p = Σ exp(s - m_p)
and o_p = Σ exp(s - m_p) v / l_p. The reduce takes M = max m_p, weights w_p = l_p · exp(m_p - M), and returns
Σ w_p o_p / Σ w_p, which is softmax over the whole context exactly, whatever the partition size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from paged.addressing import blocks_needed, pad_block_tables, slot_mapping
from paged.attention import attention, gather_kv
from benchmarks.external import flashinfer_page_table

from .address import SEED_BATCH, SEED_BLOCK_SIZE, SEED_NUM_BLOCKS

PARTITION_SIZES = (64, 128, 256, 512, 1024)  # tokens; vLLM's v2 kernel uses 512
CONTEXT_LENS = (512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class Partition:
    index: int
    start: int                 # first token index
    end: int                   # one past the last
    blocks: tuple[int, ...]    # logical blocks it reads (a partition is a whole number of blocks)


def split_plan(context_len: int, partition_size: int, block_size: int) -> list[Partition]:
    """The context's tokens cut into partitions of `partition_size` (the last may be shorter). ValueError unless
    context_len >= 1 and partition_size is a positive multiple of block_size (a partition reads whole blocks)."""
    if context_len < 1 or block_size < 1 or partition_size < block_size or partition_size % block_size:
        raise ValueError(f"need context_len >= 1 and partition_size a positive multiple of block_size; got "
                         f"context_len={context_len}, partition_size={partition_size}, block_size={block_size}")
    per = partition_size // block_size
    out = []
    for p, start in enumerate(range(0, context_len, partition_size)):
        end = min(context_len, start + partition_size)
        out.append(Partition(p, start, end, tuple(range(p * per, p * per + blocks_needed(end - start, block_size)))))
    return out


@dataclass(frozen=True)
class SplitCase:
    context_len: int = 4096
    partition_size: int = 512
    block_size: int = 16
    num_heads: int = 8
    head_dim: int = 64
    seed: int = 0


@dataclass
class SplitRun:
    plan: list[Partition]
    block_table: list[int]         # the sequence's physical blocks (shuffled)
    maxes: torch.Tensor            # [P, num_heads] m_p
    sums: torch.Tensor             # [P, num_heads] l_p
    weights: torch.Tensor          # [P, num_heads] w_p / Σ w_p: each partition's share of the softmax mass
    out: torch.Tensor              # [num_heads, head_dim] the reduce's result (float32)
    rel_err: float                 # max |out - plain| / max |plain|, plain attention in float64
    unsplit_rel_err: float         # the same for one partition holding the whole context
    split_ms: float
    unsplit_ms: float

    @property
    def ok(self) -> bool:
        return self.rel_err < 1e-5


def partials(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, partition_size: int, scale: float
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every partition at once: q [H, D], keys / values [N, H, D] -> (m [P, H], l [P, H], o [P, H, D])."""
    n, h, d = keys.shape
    p = -(-n // partition_size)
    pad = p * partition_size - n
    scores = torch.einsum("hd,nhd->hn", q, keys) * scale              # [H, N]
    scores = torch.nn.functional.pad(scores, (0, pad), value=float("-inf")).view(h, p, partition_size)
    m = scores.amax(-1)                                               # [H, P]
    e = torch.exp(scores - m.unsqueeze(-1))                           # padded tokens: exp(-inf) = 0
    l = e.sum(-1)                                                     # [H, P]
    v = torch.nn.functional.pad(values, (0, 0, 0, 0, 0, pad)).view(p, partition_size, h, d)
    o = torch.einsum("hpt,pthd->phd", e, v) / l.T.unsqueeze(-1)       # [P, H, D]
    return m.T, l.T, o


def reduce_partials(m: torch.Tensor, l: torch.Tensor, o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The reduce step: (out [H, D], each partition's share [P, H]) from m, l [P, H] and o [P, H, D]."""
    w = l * torch.exp(m - m.amax(0, keepdim=True))                    # [P, H]
    share = w / w.sum(0, keepdim=True)
    return (share.unsqueeze(-1) * o).sum(0), share


def _best_ms(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def split_k_run(case: SplitCase, reps: int = 5) -> SplitRun:
    """A random pool holding one sequence of case.context_len tokens in shuffled blocks; its decode attention split
    into partitions, reduced, checked against plain float64 attention, and timed (best of `reps`) against the same
    code with one partition. ValueError for a bad case (split_plan's rule, or sizes < 1)."""
    plan = split_plan(case.context_len, case.partition_size, case.block_size)
    if case.num_heads < 1 or case.head_dim < 1:
        raise ValueError(f"num_heads and head_dim must be >= 1, got {case.num_heads}, {case.head_dim}")
    gen = torch.Generator().manual_seed(case.seed)
    num_blocks = blocks_needed(case.context_len, case.block_size) + 4
    table = torch.randperm(num_blocks, generator=gen)[:num_blocks - 4].tolist()
    shape = (num_blocks, case.block_size, case.num_heads, case.head_dim)
    key_cache, value_cache = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    q = torch.randn(case.num_heads, case.head_dim, generator=gen)
    scale = case.head_dim ** -0.5
    keys, values = gather_kv(key_cache, value_cache, table, case.context_len)    # through the block table
    plain = attention(q.double(), keys.double(), values.double(), scale)        # the independent reference
    m, l, o = partials(q, keys, values, case.partition_size, scale)
    out, share = reduce_partials(m, l, o)
    whole = reduce_partials(*partials(q, keys, values, case.context_len, scale))[0]
    err = lambda x: ((x.double() - plain).abs().max() / plain.abs().max()).item()  # noqa: E731
    split_ms = _best_ms(lambda: reduce_partials(*partials(q, keys, values, case.partition_size, scale)), reps)
    unsplit_ms = _best_ms(lambda: reduce_partials(*partials(q, keys, values, case.context_len, scale)), reps)
    return SplitRun(plan, table, m, l, share, out, err(out), err(whole), split_ms, unsplit_ms)


# --- the same tokens, three layouts ----------------------------------------------------------------------------------
@dataclass
class LayoutView:
    """The article's batch (A, B, C) written into one pool whose key of token i of sequence s is the number
    100·(s + 1) + i in every head and dim, read back through each layout's own indexing."""

    key_cache: torch.Tensor               # [num_blocks, block_size, num_kv_heads, head_dim]: ours = FlashAttention's
    hnd: torch.Tensor                     # FlashInfer "HND": [num_pages, num_kv_heads, page_size, head_dim]
    block_tables: torch.Tensor            # [B, max_blocks] -1 padded (ours; FlashAttention's block_table)
    context_lens: list[int]
    indptr: list[int]                     # FlashInfer's CSR page table
    indices: list[int]
    last_page_len: list[int]
    reads: dict[str, list[list[int]]]     # layout -> per sequence, the number read for each token

    @property
    def agree(self) -> bool:
        return len({str(r) for r in self.reads.values()}) == 1


def token_number(seq: int, token: int) -> int:
    return 100 * (seq + 1) + token


def layout_views(num_kv_heads: int = 2, head_dim: int = 4) -> LayoutView:
    """Write the batch once, then read every token through: our slot (block_table, block_size), FlashAttention's
    k_cache[block_table[b, i // page], i % page], FlashInfer NHD k[indices[indptr[b] + i // page], i % page] and
    HND k[indices[…], :, i % page] (the same pool permuted: a copy, so it is a real second tensor)."""
    bs = SEED_BLOCK_SIZE
    tables = [list(t) for t, _ in SEED_BATCH]
    lens = [n for _, n in SEED_BATCH]
    key_cache = torch.full((SEED_NUM_BLOCKS, bs, num_kv_heads, head_dim), -1.0)
    for s, (table, n) in enumerate(zip(tables, lens)):
        slots = slot_mapping(table, 0, n, bs)
        key_cache.view(-1, num_kv_heads, head_dim)[slots] = torch.tensor(
            [float(token_number(s, i)) for i in range(n)]).view(n, 1, 1)
    hnd = key_cache.permute(0, 2, 1, 3).contiguous()
    padded = pad_block_tables(tables)
    indptr, indices, last = flashinfer_page_table(padded, lens, bs)
    reads: dict[str, list[list[int]]] = {"ours": [], "flash_attn": [], "flashinfer_nhd": [], "flashinfer_hnd": []}
    flat = key_cache.view(-1, num_kv_heads, head_dim)
    for b, n in enumerate(lens):
        idx = range(n)
        reads["ours"].append([int(flat[s, 0, 0]) for s in slot_mapping(tables[b], 0, n, bs).tolist()])
        reads["flash_attn"].append([int(key_cache[padded[b, i // bs], i % bs, 0, 0]) for i in idx])
        pages = indices[int(indptr[b]):int(indptr[b + 1])]
        reads["flashinfer_nhd"].append([int(key_cache[pages[i // bs], i % bs, 0, 0]) for i in idx])
        reads["flashinfer_hnd"].append([int(hnd[pages[i // bs], 0, i % bs, 0]) for i in idx])
    return LayoutView(key_cache, hnd, padded, lens, indptr.tolist(), indices.tolist(), last.tolist(), reads)
