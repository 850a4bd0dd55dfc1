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
    # --- split-K, touchable (ui.beyond_lab) ---
    "lab_header": {"en": "Try it: split a long context", "zh": "动手试：切分一条长 context"},
    "lab_intro": {
        "en": ("One decode query per head over a real paged pool (8 heads, head_dim 64, block_size 16, shuffled "
               "blocks), cut into partitions as vLLM's v2 kernel does. Each partition keeps its max score m, its sum "
               "of exponentials l and its own normalised output; the reduce rescales each by l · exp(m − M) and adds "
               "them. The result is checked against plain attention over the whole context, in float64."),
        "zh": ("在一个真实的分页 pool 上（8 个 head、head_dim 64、block_size 16、block 打乱），每个 head 一个 decode query，"
               "像 vLLM 的 v2 kernel 那样切成若干段。每段保留自己的最大分数 m、指数和 l 以及自己归一化后的输出；归约时把每段"
               "乘以 l · exp(m − M) 再相加。结果与对整个 context 做普通 attention 的结果（float64）核对。"),
    },
    "lab_context": {"en": "context_len (tokens)", "zh": "context_len（token 数）"},
    "lab_partition": {"en": "partition size (tokens)", "zh": "每段大小（token 数）"},
    "lab_part": {"en": "P{p}", "zh": "P{p}"},
    "lab_tokens": {"en": "tokens {start}…{end}", "zh": "token {start}…{end}"},
    "lab_stats": {"en": "m {m} · l {l}", "zh": "m {m} · l {l}"},
    "lab_share": {"en": "{share} of the mass", "zh": "占权重 {share}"},
    "lab_reduce": {"en": "reduce: Σ l·exp(m − M)·o / Σ l·exp(m − M)", "zh": "归约：Σ l·exp(m − M)·o / Σ l·exp(m − M)"},
    "lab_more": {"en": "… {count} more", "zh": "…… 另有 {count} 段"},
    "lab_plan_title": {"en": ("The plan: {parts} partition(s) of {size} tokens, head 0 (m, l and its share after "
                              "the reduce)"),
                       "zh": "切分方案：{parts} 段，每段 {size} 个 token，head 0（m、l 及归约后所占权重）"},
    "lab_check": {"en": "Reduce vs plain attention (float64): max relative error {err}", "zh":
                  "归约结果与普通 attention（float64）对比：最大相对误差 {err}"},
    "lab_time_split": {"en": "split + reduce", "zh": "切分 + 归约"},
    "lab_time_whole": {"en": "one partition", "zh": "不切分"},
    "lab_blocks": {"en": "GPU thread blocks in flight", "zh": "GPU 上同时运行的线程块"},
    "lab_time_note": {
        "en": ("Timed here on the CPU, best of 5, in this session: {split} ms split vs {whole} ms whole. A CPU thread "
               "works through the partitions one after another, so splitting only adds work (each partition's "
               "bookkeeping, then the reduce). On a GPU each partition is its own thread block: with one sequence "
               "and {heads} heads the whole context keeps {heads} blocks busy, split into {parts} partitions "
               "{blocks}, which is why vLLM splits long contexts when sequences × heads are few."),
        "zh": ("在本机 CPU 上计时（本会话，5 次取最好）：切分 {split} ms，不切分 {whole} ms。CPU 线程逐段依次计算，"
               "所以切分只会多做工作（每段的记录，再加上归约）。在 GPU 上每段是一个独立的线程块：一条 sequence、"
               "{heads} 个 head 时，不切分只能让 {heads} 个线程块工作，切成 {parts} 段则有 {blocks} 个——这就是 "
               "sequence 数 × head 数较少时 vLLM 要切分长 context 的原因。"),
    },
    "lab_bad": {"en": "The reduce does not match plain attention: {err} ≥ 1e-5.",
                "zh": "归约结果与普通 attention 不一致：{err} ≥ 1e-5。"},
    "layouts_header": {"en": "The same tokens, three layouts, one pool", "zh": "同样的 token，三种排布，同一个 pool"},
    "layouts_intro": {
        "en": ("The article's batch (A, B, C; block_size 4; section 扩展到 batch) written once into a pool; "
               "each cell shows what the tensor holds there. FlashAttention's paged k_cache is our tensor "
               "itself, indexed k_cache[block_table[b, i // 4], i % 4]. FlashInfer's NHD layout is the same "
               "tensor too, found through its CSR page table "
               "indptr = {indptr}, indices = {indices}, last_page_len = {last}; its HND layout is a second tensor "
               "(heads before offsets), drawn below from its own memory."),
        "zh": ("文章“扩展到 batch”一节中的 batch（A、B、C；block_size 4）只写入 pool 一次；"
               "每个格子显示张量在该处存放的内容。FlashAttention 的分页 k_cache 就是我们的张量本身，"
               "按 k_cache[block_table[b, i // 4], i % 4] 索引。FlashInfer 的 NHD 排布也是同一个"
               "张量，通过它的 CSR 页表 indptr = {indptr}、indices = {indices}、last_page_len = {last} 找到；它的 HND 排布是"
               "另一个张量（head 维在块内偏移之前），下面直接从它自己的内存画出。"),
    },
    "layouts_nhd": {"en": "Ours = FlashAttention = FlashInfer NHD: key_cache[page, offset, head 0]",
                    "zh": "我们的 = FlashAttention = FlashInfer NHD：key_cache[page, offset, head 0]"},
    "layouts_hnd": {"en": "FlashInfer HND (its own tensor): k[page, head 0, offset]",
                    "zh": "FlashInfer HND（独立的张量）：k[page, head 0, offset]"},
    "layouts_page": {"en": "page", "zh": "page"},
    "layouts_offset": {"en": "offset", "zh": "offset"},
    "layouts_agree": {"en": "Every token of A, B and C read through all four indexings: the same {count} keys, in the "
                            "same order.",
                      "zh": "通过全部四种索引读取 A、B、C 的每个 token：得到相同的 {count} 个 key，顺序也相同。"},
    "layouts_differ": {"en": "The layouts disagree: {detail}", "zh": "排布之间不一致：{detail}"},
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
