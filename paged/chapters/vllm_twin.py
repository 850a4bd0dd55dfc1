"""The real vLLM's block manager driven like ours: vLLM 0.32's v1 `KVCacheManager`, no model.

`VllmKVCache` owns a KVCacheManager over num_blocks + 1 blocks (vLLM keeps block 0 as its reserved
null block) and speaks in our block ids (vLLM's block b is our block order[b - 1]: b - 1 for an
unshuffled pool; a shuffled one is the same pool, renamed), so its tables, free blocks and
prefix-cache hits can be put next to a `BlockManager`'s, operation for operation. vLLM is an
optional extra (requirements-vllm.txt), imported only when a VllmKVCache is built;
`vllm_available()` says whether that can work.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache

from ..prefix_cache import initial_order

VLLM_VERSION = "0.32.0"  # whose policies paged.block_manager mirrors (requirements-vllm.txt)
INSTALL_HINT = "bash scripts/install_vllm.sh"  # the optional extra, into the active venv


def vllm_available() -> bool:
    """Whether vLLM is installed (without importing it: that takes seconds)."""
    return importlib.util.find_spec("vllm") is not None


@lru_cache(maxsize=None)
def _hasher(block_size: int):
    """vLLM's request block hasher (sha256 over the chained prefix), built once per block size."""
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    init_none_hash(sha256)
    return get_request_block_hasher(block_size, sha256)


class VllmKVCache:
    """vLLM's KVCacheManager over `num_blocks` blocks of `block_size` slots, a request per seq id.

    The calls mirror one engine step each: `admit` (a new or preempted request: prefix-cache lookup,
    then slots for its first num_new_tokens tokens), `grow` (a running request: that many more),
    then `done` (the step computed them and maybe sampled one); `free` and `preempt` give its
    blocks back. `admit` and `grow` return False, changing nothing, when vLLM refuses (too few
    free blocks).
    Raises: ImportError without vLLM.
    """

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool,
                 seed: int | None = None, max_model_len: int = 1 << 20) -> None:
        """seed: the BlockManager's shuffle seed, so vLLM's block ids are named as ours."""
        import torch
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

        spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=8,
                                 dtype=torch.float32)
        config = KVCacheConfig(num_blocks=num_blocks + 1, kv_cache_tensors=[],
                               kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
        self.manager = KVCacheManager(config, max_model_len=max_model_len,
                                      scheduler_block_size=block_size, hash_block_size=block_size,
                                      enable_caching=enable_prefix_caching)
        self.num_blocks, self.block_size = num_blocks, block_size
        self.names = initial_order(num_blocks, seed)  # vLLM block b -> our id names[b - 1]
        self.requests: dict[int, object] = {}  # seq id -> vllm.v1.request.Request
        self.hits: dict[int, int] = {}  # seq id -> prefix-cache hits (blocks) at its last admission
        self._pending: dict[int, int] = {}  # seq id -> tokens scheduled this step, not yet `done`
        self.running: set[int] = set()  # seq ids holding blocks

    # --- what a page or a test compares -----------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return self.manager.block_pool.get_num_free_blocks()

    def table(self, seq_id: int) -> list[int]:
        """seq's block table in our ids ([] when it holds none)."""
        if seq_id not in self.requests:
            return []
        return [self.names[b - 1] for b in self.manager.get_block_ids(str(seq_id))[0]]

    def free_queue(self) -> list[int]:
        """The free blocks in the order vLLM will take them (our ids)."""
        return [self.names[b.block_id - 1]
                for b in self.manager.block_pool.free_block_queue.get_all_free_blocks()]

    def cached_blocks(self) -> set[int]:
        """Blocks that hold a prefix-cache hash (our ids)."""
        return {self.names[b.block_id - 1] for b in self.manager.block_pool.blocks
                if b.block_hash is not None}

    # --- one step's calls -------------------------------------------------------------------------
    def admit(self, seq_id: int, token_ids: list[int], num_new_tokens: int | None = None) -> bool:
        """A request (re)starts with `token_ids` (prompt + any generated): its prefix-cache hits,
        then slots for num_new_tokens tokens after them (None: all the rest); False if refused."""
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request, RequestStatus

        req = self.requests.get(seq_id)
        if req is None:
            req = Request(str(seq_id), list(token_ids), SamplingParams(max_tokens=1 << 20), None,
                          block_hasher=_hasher(self.block_size))
        assert req.num_computed_tokens == 0 and list(req.all_token_ids) == list(token_ids), \
            "admit a fresh request"
        blocks, num_hit_tokens, _ = self.manager.get_computed_blocks(req)
        n = (req.num_tokens - num_hit_tokens if num_new_tokens is None
             else min(num_new_tokens, req.num_tokens - num_hit_tokens))
        if self.manager.allocate_slots(req, n, num_hit_tokens, blocks) is None:
            return False
        self.requests[seq_id], self.hits[seq_id] = req, num_hit_tokens // self.block_size
        req.num_computed_tokens, req.status = num_hit_tokens, RequestStatus.RUNNING
        self._pending[seq_id] = n
        self.running.add(seq_id)
        return True

    def grow(self, seq_id: int, num_new_tokens: int = 1) -> bool:
        """A running request's next step: slots for num_new_tokens more tokens (1 at decode)."""
        if self.manager.allocate_slots(self.requests[seq_id], num_new_tokens) is None:
            return False
        self._pending[seq_id] = num_new_tokens
        return True

    def done(self, seq_id: int, token_out: int | None) -> None:
        """The step ran: the scheduled tokens are computed, and `token_out` (None for a non-final
        prompt chunk) is appended as vLLM's scheduler does after a model step."""
        req = self.requests[seq_id]
        req.num_computed_tokens += self._pending.pop(seq_id)
        if token_out is not None:
            req.append_output_token_ids(int(token_out))

    def preempt(self, seq_id: int) -> None:
        """Preemption by recompute, as vLLM's scheduler does: free the blocks, forget the tokens."""
        from vllm.v1.request import RequestStatus

        req = self.requests[seq_id]
        self.manager.free(req)
        req.num_computed_tokens, req.status = 0, RequestStatus.PREEMPTED
        self._pending.pop(seq_id, None)
        self.running.discard(seq_id)

    def free(self, seq_id: int) -> None:
        """The request finished: its blocks go back (tail first; cached ones stay until evicted)."""
        req = self.requests.pop(seq_id)
        self.manager.free(req)
        self.hits.pop(seq_id, None)
        self._pending.pop(seq_id, None)
        self.running.discard(seq_id)
