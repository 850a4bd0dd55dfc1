"""How one impl="native" call is cut: its threads, its work items, when it prefetches.

Rules only, each with the measurements it was fitted on; native.py applies them once per call shape.
"""

from __future__ import annotations

import functools

from ..addressing import blocks_needed

# The shortest partition worth a work item of its own (vLLM's v2 decode uses 512-token partitions
# on GPUs).
MIN_PARTITION_TOKENS = 256
# When a second thread pays (thread_count): a call's one-thread kernel time, estimated from its K/V
# bytes, its FMAs (one per query head, token and dim, for q.K and for p.V) and its sequences, must
# reach SECOND_THREAD_NS. Fitted on a 2-core EPYC (AVX-512VL, 32 MiB L3), warm caches, by timing 1
# against 2 threads interleaved (fastest of 21 reps, load average 1.8-3.6) on 196 calls: B 1..32,
# 8/8 and 8/2 heads at d 64 and 128, the tiny model's 4/2 at d 32, 32-512 KiB of K/V. Beyond the
# ~7.6 us every call costs, one thread took 11.5 ns per KiB + 28 ns per 1000 FMAs + 300 ns per
# sequence. Checked on a second sweep of 270 calls (16 KiB-1 MiB): of the 180 this rule gives two
# threads, two were > 3% faster on 163 and > 3% slower on 2 (a neighbour took the core); of the 90
# it keeps on one, two would have been > 3% faster on 14, by 9% at most. The rule before (one
# thread under 128 KiB of K/V) kept 122 of them on one, 47 of which ran > 3% faster on two (in the
# first sweep, B=32 x 2 tokens of the tiny model: 0.92x; B=16 x 2 tokens at 8/2 d64: 0.87x); it
# gave two to B=1, 4/2 d32 x 256 tokens, 1.05x slower.
KV_BYTES_PER_NS = 89.0
FMAS_PER_NS = 36.0
SEQUENCE_NS = 300.0
SECOND_THREAD_NS = 4000.0
# Prefetching each next block while the kernel reads the current one (see prefetch_min_bytes) pays
# when the K/V come from L3 or DRAM and costs load slots when they are still in L1/L2. A call that
# reads other K/V than the last call (the engine: each layer its own pool, the other layers ran in
# between) finds them out of cache: it prefetches from PREFETCH_COLD_MIN_BYTES. A call that reads
# the same K/V again (a benchmark's repeated call) may find them cached: from
# PREFETCH_WARM_MIN_BYTES. Measured on a 2-core EPYC (32 MiB L3), thresholds 0 / 256 KiB / 1 MiB /
# 4 MiB interleaved in one process each. The shipped model's engine (1 thread, CPU s per
# generation, 9 reps, load 0.8-1.7): batch 32 (0.3-1.4 MiB a call) 1.18x / 1.25x / 1.10x / 1.00,
# batch 8 1.04x / 1.02x / 0.98x / 1.00, batch 1 (<= 40 KiB) 1.01x / 0.99x / 0.98x / 1.00. `bench
# kernels`' data (2 threads, 31 reps in each impl order, B 1 and 4, ctx 64-2048, load 0.9-2.3),
# prefetching against not: after COLD_MB of other reads 1.03-2.5x on every call of 0.06-32 MiB
# (0.95x on one of 64 MiB); repeating the same call (warm) 0.87-1.0x on every call of 0.06-2 MiB
# (0.87-0.94x on 8/8 heads of 1-2 MiB). From 4 MiB, warm, as before: 0.82-0.94x on 8/8 heads up to
# 16 MiB, 1.26-1.7x on the rest. Then, on a 2-core Xeon (AVX-512, a 300 MiB L3 shared with other
# machines), warm, not prefetching against prefetching, interleaved (up to 201 reps, load
# 1.7-3.9), by medians: 8/8 heads (MHA) 0.74-0.88x at 4 MiB, 0.85-0.95x at 8 MiB, 0.88-0.92x at 16
# MiB (1 and 2 threads), 0.88-1.13x at 32 MiB; 8/2 heads (grouped) 0.90-0.93x at 4 MiB, 0.96-1.16x
# at 8 MiB, 1.06-1.12x at 16 MiB, 1.07x at 32 MiB. So a repeated call prefetches from 8 MiB when
# its heads are grouped (their 4 FMAs per K/V value leave time for the extra loads), from 32 MiB
# when not.
PREFETCH_COLD_MIN_BYTES = 0
PREFETCH_WARM_MIN_BYTES = 8 << 20  # grouped heads (GQA, MQA)
PREFETCH_WARM_MHA_MIN_BYTES = 32 << 20  # one query head per kv head


def thread_count(batch: int, num_heads: int, num_kv_heads: int, head_dim: int, tokens: int,
                 element_size: int, threads: int) -> int:
    """Threads for one call: 1 if its one-thread time is under SECOND_THREAD_NS, else `threads`.

    `tokens` is the block table's width in tokens, `element_size` the K/V's bytes per value.
    Raises: ValueError if threads or batch is below 1, or any other count below 0.
    """
    if batch < 1 or threads < 1 or min(num_heads, num_kv_heads, head_dim, tokens, element_size) < 0:
        # (checked at once first: this runs on every decode call, where the loop cost about 1 us)
        for name, value, low in (("batch", batch, 1), ("threads", threads, 1),
                                 ("num_heads", num_heads, 0), ("num_kv_heads", num_kv_heads, 0),
                                 ("head_dim", head_dim, 0), ("tokens", tokens, 0),
                                 ("element_size", element_size, 0)):
            if value < low:
                raise ValueError(f"thread_count: {name} must be >= {low}, got {value}")
    kv_bytes = batch * tokens * num_kv_heads * head_dim * 2 * element_size
    fmas = batch * tokens * num_heads * head_dim * 2
    estimate_ns = kv_bytes / KV_BYTES_PER_NS + fmas / FMAS_PER_NS + batch * SEQUENCE_NS
    return 1 if estimate_ns < SECOND_THREAD_NS else threads


def prefetch_min_bytes(key_ptr: int, last_key_ptr: int, grouped: bool = True) -> int:
    """K/V bytes from which a call prefetches each next block (measurements above).

    Reading the same key_cache as the last call (`key_ptr == last_key_ptr`, maybe still cached):
    PREFETCH_WARM_MIN_BYTES for grouped heads, PREFETCH_WARM_MHA_MIN_BYTES for grouped=False;
    else PREFETCH_COLD_MIN_BYTES.
    """
    if key_ptr != last_key_ptr:
        return PREFETCH_COLD_MIN_BYTES
    return PREFETCH_WARM_MIN_BYTES if grouped else PREFETCH_WARM_MHA_MIN_BYTES


@functools.lru_cache(maxsize=256)
def plan_work(batch: int, num_heads: int, num_kv_heads: int, max_blocks: int, block_size: int,
              threads: int) -> tuple[int, int]:
    """Cut the work into equal items the threads share evenly: (head_chunks, partition_blocks).

    Each sequence becomes the fewest items that balance: `per_seq` such that batch * per_seq is a
    multiple of `threads`, or at least 2 * threads. Finer cuts only add per-item costs (2 cores,
    B=1: one item per thread was up to 1.2x faster than two). Context partitions first (vLLM's v2
    decode), each at least MIN_PARTITION_TOKENS or the combine costs more than it saves; kv-head
    ranges only where the context is too short for two partitions or partitions give too few
    items. Why partitions first: a partition's thread reads whole blocks front to back, where half
    the kv heads read half of each token's row. Two partitions against two kv-head halves, 2-core
    Xeon (warm, 400 interleaved reps, medians): MHA 8/8, B=1 x 512, d64 and d128, 0.74-0.82x the
    time (B=3: 0.93x); grouped 8/2, B=1 x 2048, 0.67-0.69x (d64) and 0.76-0.83x (d128); B=3 x
    2048 0.60-0.85x; B=3 x 512 d128 0.78-0.81x; B=1 x 1024 d64 0.93-0.99x.
    """
    per_seq = 1
    while threads > 1 and (batch * per_seq) % threads and batch * per_seq < 2 * threads:
        per_seq += 1
    if per_seq == 1:
        return 1, 0
    min_blocks = blocks_needed(MIN_PARTITION_TOKENS, block_size)

    def partition_blocks(parts: int) -> int:  # 0: the context is too short to cut into `parts`
        blocks = max(min_blocks, -(-max_blocks // parts))
        return 0 if blocks >= max_blocks else blocks

    if max_blocks < 2 * min_blocks:
        head_chunks = min(num_kv_heads, per_seq)
        return head_chunks, (partition_blocks(-(-per_seq // head_chunks))
                             if head_chunks < per_seq else 0)
    blocks = partition_blocks(per_seq)
    parts = -(-max_blocks // blocks) if blocks else 1
    return min(num_kv_heads, -(-per_seq // parts)), blocks
