"""Home page strings."""

STRINGS = {
    "title": {"en": "PagedAttention, on real tensors", "zh": "PagedAttention：在真实张量上看懂它"},
    "idea": {
        "en": ("An inference server keeps every sequence's keys and values (the KV cache) so that each new token can "
               "attend to the whole history. PagedAttention stores that cache in fixed-size **physical blocks** "
               "scattered through one pool. A sequence still sees a contiguous context: its **block_table** maps "
               "each logical block to the physical block that holds it.\n\n"
               "Attention's math does not change; only where K and V are read from. Every page here checks the "
               "paged result against a contiguous KV cache holding the same data."),
        "zh": ("推理服务会为每个 sequence 保存 key 和 value（即 KV cache），让每个新 token 都能 attend 到全部历史。"
               "PagedAttention 把这份 cache 存在固定大小的 **physical block** 里，这些 block 散落在同一个 pool 中。"
               "sequence 看到的上下文仍然是连续的：它的 **block_table** 把每个 logical block 映射到存放它的 "
               "physical block。\n\n"
               "attention 的数学不变，变的只是 K 和 V 从哪里读。这里的每一页都会把 paged 的结果与存放相同数据的"
               "连续 KV cache 对比。"),
    },
    "chain_heading": {"en": "The address chain", "zh": "寻址链路"},
    "chain_caption": {
        "en": "block_size {block_size}, block_table {block_table}: where does token {token_index} live?",
        "zh": "block_size 为 {block_size}，block_table 为 {block_table}：token {token_index} 存在哪里？",
    },
    "chain_notice": {
        "en": ("Two integer operations and one table lookup. The sequence only knows its logical block "
               "{logical_block_id}; the block_table turns it into physical block {physical_block_id}, so the token's "
               "K/V sit at key_cache[{physical_block_id}, {block_offset}]."),
        "zh": ("只需两次整数运算和一次查表。sequence 只知道自己的 logical block {logical_block_id}；block_table "
               "把它换成 physical block {physical_block_id}，所以这个 token 的 K/V 位于 "
               "key_cache[{physical_block_id}, {block_offset}]。"),
    },
    "walkthrough": {"en": "Walk through it", "zh": "逐步体验"},
    # the walkthrough's links: "<the page's name in the navigation>: <what you do there>" (ui.nav.title)
    "link": {"en": "{page}: {what}", "zh": "{page}：{what}"},
    "link_address": {"en": "edit a block table, follow one token", "zh": "编辑 block table，跟踪一个 token"},
    "link_gather": {"en": "read a sequence back token by token, then attend", "zh": "逐个 token 读回历史，再做 attention"},
    "link_batch": {"en": "several sequences share one pool, step by step", "zh": "多个 sequence 共用一个 pool，逐步解码"},
    "link_engine": {"en": "a mini vLLM on a real tiny Llama, checked against a contiguous twin",
                    "zh": "在真实的小型 Llama 上运行的迷你 vLLM，并与连续 cache 的孪生引擎对照"},
    "link_buglab": {"en": "inject a classic paged-cache bug and watch the output drift",
                    "zh": "注入一个经典的分页 cache 错误，观察输出如何漂移"},
    "link_sharing": {"en": "prefix caching, parallel sampling, reference counts, copy-on-write",
                     "zh": "prefix caching、并行采样、引用计数与 copy-on-write"},
    "link_fast": {"en": "from the teaching loop to fused kernels, and the memory saved",
                  "zh": "从教学循环到融合 kernel，以及节省的显存"},
    "link_beam": {"en": "beams as a tree on shared blocks: fork, copy-on-write, prune",
                  "zh": "共享 block 上的 beam 树：fork、copy-on-write、剪枝"},
    "link_swap": {"en": "preemption under memory pressure: swap to a host pool or recompute",
                  "zh": "显存不足时的抢占：换出到主机 pool，还是重算"},
    "link_window": {"en": "a sliding window frees the blocks behind it",
                    "zh": "滑动窗口释放它身后的 block"},
    "link_spec": {"en": "guess k tokens, check them in one pass, roll back the rejected",
                  "zh": "猜 k 个 token，一次前向验证，回退被拒绝的部分"},
}
