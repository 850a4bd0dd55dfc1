"""Pages 4 and 6 · the real vLLM side by side: its own KVCacheManager fed the same steps (lessons.vllm_side)."""

STRINGS = {
    "header": {"en": "The real vLLM, side by side", "zh": "真正的 vLLM，并排对照"},
    "caption": {
        "en": ("Our Block Manager follows vLLM {version}'s v1 `KVCacheManager` (vllm.v1.core), and here the same "
               "steps are fed to vLLM's own, block for block. Which free block is taken next: a freed block without "
               "a hash is reused first (nobody can hit it), cached blocks wait at the tail and the least recently "
               "used is evicted first; a request's blocks are freed last block first (its most specific blocks go "
               "first); a full block is hashed as soon as the step writing its last token is scheduled. vLLM keeps "
               "block 0 as a reserved null block, so its block b is our block b − 1 (a shuffled pool renames them)."),
        "zh": ("我们的 Block Manager 遵循 vLLM {version} v1 的 `KVCacheManager`（vllm.v1.core）的规则；这里把同样的"
               "每一步交给 vLLM 自己的实现，逐个 block 对照。下一个取哪个空闲 block：没有哈希的已释放 block 最先复用"
               "（没人能命中它），已缓存的 block 排在队尾，最久未用的最先被驱逐；一个请求的 block 从最后一个开始释放"
               "（最具体的 block 先走）；写入某个 block 最后一个 token 的那一步一被调度，这个满 block 就立即计算哈希。"
               "vLLM 把 block 0 留作保留的空 block，所以它的 block b 就是我们的 block b − 1（打乱的 pool 只是给它们"
               "换了名字）。"),
    },
    "missing": {"en": "Install the real vLLM to see its own block tables here: `{hint}` (the optional extra, "
                      "requirements-vllm.txt).",
                "zh": "安装真正的 vLLM 即可在这里看到它自己的 block table：`{hint}`（可选依赖 requirements-vllm.txt）。"},
    "none": {"en": "Run a step to compare.", "zh": "运行一步即可对照。"},
    "identical": {"en": "**Identical**: after each of {steps} step(s), vLLM's block tables, free blocks and "
                        "prefix-cache hits equal ours.",
                  "zh": "**完全一致**：{steps} 步中的每一步之后，vLLM 的 block table、空闲 block 数和 prefix cache "
                        "命中都与我们相同。"},
    "differs": {"en": "**Differs at step {step}**: {why}", "zh": "**在第 {step} 步出现差异**：{why}"},
    "why_free": {"en": "free blocks: ours {ours}, vLLM {theirs}", "zh": "空闲 block：我们 {ours}，vLLM {theirs}"},
    "why_table": {"en": "{seq}'s block table: ours {ours}, vLLM {theirs}",
                  "zh": "{seq} 的 block table：我们 {ours}，vLLM {theirs}"},
    "why_hits": {"en": "{seq}'s prefix-cache hits: ours {hits_ours}, vLLM {hits_theirs}",
                 "zh": "{seq} 的 prefix cache 命中：我们 {hits_ours}，vLLM {hits_theirs}"},
    "why_no_room": {"en": "vLLM has no room for {seq}'s {tokens} token(s) ({free} blocks free)",
                    "zh": "vLLM 没有空间放 {seq} 的 {tokens} 个 token（空闲 {free} 个 block）"},
    "why_fork": {"en": "{seqs} forked into parallel samples here: forking is ours; vLLM v1 runs each sample as a "
                       "request of its own (sharing through the prefix cache), so the comparison stops",
                 "zh": "{seqs} 在这里分叉成并行采样：fork 是我们的做法；vLLM v1 把每个样本当作独立请求运行（通过 "
                       "prefix cache 共享），所以对照到此为止"},
    "step_title": {"en": "After step {step}: free blocks ours {ours} · vLLM {theirs}",
                   "zh": "第 {step} 步之后：空闲 block 我们 {ours} · vLLM {theirs}"},
    "col_seq": {"en": "sequence", "zh": "sequence"},
    "col_ours": {"en": "our block_table", "zh": "我们的 block_table"},
    "col_theirs": {"en": "vLLM's block_table", "zh": "vLLM 的 block_table"},
    "col_hits": {"en": "prefix-cache hits (ours / vLLM)", "zh": "prefix cache 命中（我们 / vLLM）"},
    "col_same": {"en": "same", "zh": "一致"},
    "yes": {"en": "yes", "zh": "是"},
    "no": {"en": "no", "zh": "否"},
    "error": {"en": "vLLM could not be driven here: {error}", "zh": "无法在这里驱动 vLLM：{error}"},
}
