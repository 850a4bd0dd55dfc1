"""Page 7 · Correct → fast, last section: what comes next (how vLLM, FlashAttention and FlashInfer read a paged
cache, split-K, and the outside kernels as extra rungs). Facts checked against each project's docs and source; the
words are ours."""

STRINGS = {
    "header": {"en": "What comes next: the kernels that read paged caches in production",
               "zh": "下一步：生产环境中读取分页 cache 的 kernel"},
    "intro": {
        "en": ("Every serious kernel reads a paged cache the way this project does: a block table maps a sequence's "
               "logical blocks to physical ones, and the kernel follows it block by block instead of copying the "
               "history out first. What differs is how the pool is laid out in memory, how the table is handed "
               "over, and which page sizes a kernel accepts."),
        "zh": ("所有正经的 kernel 读取分页 cache 的方式都和本项目一样：block table 把 sequence 的 logical block 映射到 "
               "physical block，kernel 沿着它逐块读取，而不是先把历史复制出来。不同之处在于 pool 在内存中的排布、"
               "block table 的传入形式，以及 kernel 接受哪些页大小。"),
    },
    "col_who": {"en": "who", "zh": "谁"},
    "col_layout": {"en": "K / V layout (one layer)", "zh": "K / V 排布（单层）"},
    "col_table": {"en": "how the table is given", "zh": "block table 的形式"},
    "col_page": {"en": "block / page size", "zh": "block / 页大小"},
    "row_ours_who": {"en": "this project", "zh": "本项目"},
    "row_ours_table": {"en": "block_tables [B, max_blocks] (−1 padded), context_lens [B]",
                       "zh": "block_tables [B, max_blocks]（用 −1 填充），context_lens [B]"},
    "row_ours_page": {"en": "any block_size ≥ 1", "zh": "任意 block_size ≥ 1"},
    "row_vllm_v1_who": {"en": "vLLM, original PagedAttention kernel", "zh": "vLLM 最初的 PagedAttention kernel"},
    "row_vllm_v1_layout": {
        "en": ("K [num_blocks, num_kv_heads, head_size/x, block_size, x] with x = 16 bytes / element size (one thread "
               "loads 16 bytes of a key at once); V [num_blocks, num_kv_heads, head_size, block_size]"),
        "zh": ("K [num_blocks, num_kv_heads, head_size/x, block_size, x]，x = 16 字节 / 元素大小（一个线程一次读取 key 的 "
               "16 字节）；V [num_blocks, num_kv_heads, head_size, block_size]"),
    },
    "row_vllm_v1_table": {"en": "block_tables [B, max_blocks], seq_lens [B]", "zh": "block_tables [B, max_blocks]，seq_lens [B]"},
    "row_vllm_v1_page": {"en": "8, 16 or 32 (compiled in)", "zh": "8、16 或 32（编译时确定）"},
    "row_vllm_fa_who": {"en": "vLLM, FlashAttention backend", "zh": "vLLM 的 FlashAttention 后端"},
    "row_vllm_fa_layout": {"en": "one tensor [2, num_blocks, block_size, num_kv_heads, head_size]: K and V halves are "
                                 "exactly our layout",
                           "zh": "一个张量 [2, num_blocks, block_size, num_kv_heads, head_size]：K 和 V 两半与我们的排布完全相同"},
    "row_vllm_fa_table": {"en": "block_table [B, max_blocks] int32, seq_lens, plus slot_mapping for the writes",
                          "zh": "block_table [B, max_blocks] int32、seq_lens，写入时另有 slot_mapping"},
    "row_vllm_fa_page": {"en": "a multiple of 16 (vLLM builds its own copy of the FlashAttention kernels)",
                         "zh": "16 的倍数（vLLM 自己编译了一份 FlashAttention kernel）"},
    "row_fa_who": {"en": "FlashAttention 2, flash_attn_with_kvcache", "zh": "FlashAttention 2 的 flash_attn_with_kvcache"},
    "row_fa_layout": {"en": "k_cache, v_cache [num_blocks, page_block_size, nheads_k, headdim]: ours",
                      "zh": "k_cache、v_cache [num_blocks, page_block_size, nheads_k, headdim]：与我们相同"},
    "row_fa_table": {"en": "block_table [B, max_blocks] int32, cache_seqlens [B]",
                     "zh": "block_table [B, max_blocks] int32，cache_seqlens [B]"},
    "row_fa_page": {"en": "upstream 2.x: a multiple of 256 (its docstring and a check in the C++ entry point)",
                    "zh": "上游 2.x：256 的倍数（见其 docstring 和 C++ 入口处的检查）"},
    "row_fi_who": {"en": "FlashInfer, BatchDecodeWithPagedKVCacheWrapper", "zh": "FlashInfer 的 BatchDecodeWithPagedKVCacheWrapper"},
    "row_fi_layout": {
        "en": ("(K, V) each [max_num_pages, page_size, num_kv_heads, head_dim] in “NHD” (ours) or [max_num_pages, "
               "num_kv_heads, page_size, head_dim] in “HND”; or one 5-D tensor with a K/V axis of 2 after the page axis"),
        "zh": ("(K, V) 各为 [max_num_pages, page_size, num_kv_heads, head_dim]（“NHD”，与我们相同）或 [max_num_pages, "
               "num_kv_heads, page_size, head_dim]（“HND”）；也可以是一个在页维之后带大小为 2 的 K/V 维的 5 维张量"),
    },
    "row_fi_table": {"en": "CSR: indptr [B + 1], indices (physical pages in order), last_page_len [B]",
                     "zh": "CSR 形式：indptr [B + 1]、indices（按顺序排列的 physical page）、last_page_len [B]"},
    "row_fi_page": {"en": "a run-time argument (16 in its examples); last_page_len in 1 … page_size",
                    "zh": "运行时参数（示例中为 16）；last_page_len 在 1 … page_size 之间"},
    "csr_header": {"en": "The article's batch in FlashInfer's form", "zh": "文章中的 batch 换成 FlashInfer 的形式"},
    "csr_text": {
        "en": ("A, B, C with block_tables {tables} and context_lens {lens} (block_size {block_size}) become "
               "indptr = {indptr}, indices = {indices}, last_page_len = {last}: the padded rows are flattened into one "
               "list and indptr says where each sequence's pages start. No −1 padding is needed."),
        "zh": ("A、B、C 的 block_tables {tables}、context_lens {lens}（block_size {block_size}）变成 indptr = {indptr}、"
               "indices = {indices}、last_page_len = {last}：填充过的各行被拼成一个列表，indptr 指出每个 sequence 的页"
               "从哪里开始。不再需要 −1 填充。"),
    },
    "split_header": {"en": "Split-K: one long sequence, many thread blocks", "zh": "Split-K：一条长序列，多个线程块"},
    "split_text": {
        "en": ("In decode each sequence has one query. vLLM's first kernel gives each (sequence, head) pair one GPU "
               "thread block, which walks the whole context. With a small batch that is too few blocks to keep the "
               "GPU's streaming multiprocessors busy, however long each walk is. vLLM's second kernel (v2) cuts the "
               "context into partitions of 512 tokens and gives each partition its own thread block; each one returns "
               "a partial output with its own softmax maximum and sum of exponentials, and a small reduce kernel "
               "rescales and adds them, exactly the online-softmax step our fused rung takes between tiles. vLLM "
               "uses v1 only up to 8192 tokens, and only when the context fits in one partition or sequences × heads "
               "already exceed 512; otherwise v2. FlashAttention (split-KV, num_splits) and FlashInfer split long "
               "contexts the same way."),
        "zh": ("decode 时每个 sequence 只有一个 query。vLLM 最初的 kernel 为每个 (sequence, head) 分配一个 GPU 线程块，"
               "由它走完整个 context。batch 很小时，线程块太少，无论每个走多久都填不满 GPU 的 SM。vLLM 的第二个 kernel"
               "（v2）把 context 切成 512 个 token 一段，每段交给一个线程块；每段返回部分输出及其自己的 softmax 最大值和指数和，"
               "再由一个小的归约 kernel 重新缩放并相加——这正是我们 fused 这一级在 tile 之间做的 online softmax 步骤。"
               "vLLM 只在不超过 8192 个 token、且 context 只有一段或 sequence 数 × head 数已超过 512 时使用 v1；否则"
               "使用 v2。FlashAttention（split-KV，num_splits）和 FlashInfer 也用同样的方式切分长 context。"),
    },
    "rungs_header": {"en": "Outside kernels as extra rungs", "zh": "外部 kernel 作为额外的梯级"},
    "rungs_text": {
        "en": ("On a CUDA GPU each installed kernel reads the ladder's own pool (block_size {block_size}), is checked "
               "against the contiguous reference first, and only then timed next to contiguous SDPA. FlashAttention "
               "and FlashInfer run in float16 (they have no float32 kernels)."),
        "zh": ("在 CUDA GPU 上，每个已安装的 kernel 读取梯子自己的 pool（block_size {block_size}），先与连续 cache 参考结果核对，"
               "然后才与连续 SDPA 一起计时。FlashAttention 和 FlashInfer 使用 float16（它们没有 float32 kernel）。"),
    },
    "rungs_run": {"en": "Run the outside kernels", "zh": "运行外部 kernel"},
    "col_kernel": {"en": "kernel", "zh": "kernel"},
    "col_status": {"en": "status", "zh": "状态"},
    "skip_no_cuda": {"en": "skipped: needs a CUDA GPU (this run is on {device})",
                     "zh": "跳过：需要 CUDA GPU（本次运行在 {device} 上）"},
    "skip_missing": {"en": "skipped: the {package} package is not installed", "zh": "跳过：未安装 {package} 包"},
    "skip_refused": {"en": "skipped: the kernel refused this case: {message}", "zh": "跳过：kernel 拒绝了这个用例：{message}"},
    "ran": {"en": "{verdict} · rel err {rel_err} · {ms} ms · {x_sdpa}× SDPA ({dtype})",
            "zh": "{verdict} · 相对误差 {rel_err} · {ms} ms · SDPA 的 {x_sdpa} 倍（{dtype}）"},
    "not_run": {"en": "not run yet", "zh": "尚未运行"},
}
