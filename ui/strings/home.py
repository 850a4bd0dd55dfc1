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
    # the article the app is built on, named (its title stays in Chinese; the English gloss is ours)
    "article": {
        "en": ("Built on one article, in Chinese: **{title}** (“Implementing a teaching PagedAttention: reading "
               "the history KV cache from a block table”), part 11 of a mini-vLLM series. The table at the bottom "
               "says what each page takes from it."),
        "zh": ("本应用依据的文章：**{title}**，mini-vLLM 系列的第 11 篇。页面底部的表格列出每一页取自它的哪一部分。"),
    },
    "start_here": {"en": "Start here: the core path", "zh": "从这里开始：核心路线"},
    "start_caption": {
        "en": "Home → 1 → 2 → 3 → 4: one token's address, one sequence read back, a batch, the whole engine.",
        "zh": "首页 → 1 → 2 → 3 → 4：一个 token 的地址，读回一个 sequence，一个 batch，整个引擎。",
    },
    "then_heading": {"en": "Then the chapters", "zh": "然后是各章"},
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
    "link_guide": {"en": "a 45-minute lesson with a link for every step",
                   "zh": "45 分钟的一堂课，每一步都有对应链接"},
    "link_beam": {"en": "beams as a tree on shared blocks: fork, copy-on-write, prune",
                  "zh": "共享 block 上的 beam 树：fork、copy-on-write、剪枝"},
    "link_swap": {"en": "preemption under memory pressure: swap to a host pool or recompute",
                  "zh": "显存不足时的抢占：换出到主机 pool，还是重算"},
    "link_window": {"en": "a sliding window frees the blocks behind it",
                    "zh": "滑动窗口释放它身后的 block"},
    "link_spec": {"en": "guess k tokens, check them in one pass, roll back the rejected",
                  "zh": "猜 k 个 token，一次前向验证，回退被拒绝的部分"},
    # what each page takes from the article: a row per page, "—" where the page goes beyond it
    "takes_heading": {"en": "What each page takes from the article", "zh": "每一页取自文章的哪一部分"},
    "takes_page": {"en": "Page", "zh": "页面"},
    "takes_what": {"en": "What it takes", "zh": "取自什么"},
    "takes_section": {"en": "The article's section", "zh": "文章中的小节"},
    "takes_every": {"en": "Every page: its paged result checked against a contiguous KV cache",
                    "zh": "每一页：paged 的结果都与连续 KV cache 对照"},
    "takes_beyond": {"en": "nothing: beyond the article", "zh": "无：超出这篇文章"},
    "takes_address": {"en": "the address chain; token 5 of block_table [7, 2, 9]",
                      "zh": "寻址链路；block_table [7, 2, 9] 中的 token 5"},
    "takes_gather": {"en": "gather, then attend, for one sequence; where a mask is needed",
                     "zh": "单个 sequence 先 gather 再 attention；何时需要 mask"},
    "takes_batch": {"en": "the batch A, B, C, each with its own block table",
                    "zh": "batch A、B、C，各有自己的 block table"},
    "takes_engine": {"en": "the chain of modules in a mini vLLM; the state rule",
                     "zh": "迷你 vLLM 中的模块链路；状态规则"},
    "takes_buglab": {"en": "the silent bugs when the write side and the read side disagree",
                     "zh": "写入端与读取端不一致时的隐蔽 bug"},
    "takes_fast": {"en": "why the teaching version is slow; the way to a fast one",
                   "zh": "教学版为什么慢；通往高性能版的方向"},
    "takes_guide": {"en": "the whole article, in its order, as one lesson", "zh": "整篇文章，按原顺序讲成一堂课"},
    "takes_spec": {"en": "the state rule, rolled back", "zh": "状态规则，以及它的回退"},
}
# The article's section headings, as the article titles them (Chinese in both languages): page name -> headings.
ARTICLE_TITLE = "实现教学版 PagedAttention：从 block table 读取历史 KV cache"
SECTIONS = {
    "address": ("从逻辑 token 到物理 block", "先定义一个简单的 KV cache 布局"),
    "gather": ("教学版实现的思路：先 gather，再 attention", "单个 Sequence 的 paged gather", "attention mask 在哪里"),
    "batch": ("扩展到 batch：每个 Sequence 都有自己的 block table",),
    "engine": ("PagedAttention 如何接入 mini vLLM", "写入 slot 和读取 block table 必须一致"),
    "buglab": ("写入 slot 和读取 block table 必须一致",),
    "fast": ("为什么教学版会慢", "从教学版到高性能版的方向"),
    "spec": ("写入 slot 和读取 block table 必须一致",),
    "every": ("和连续 KV cache 对齐验证",),
}
