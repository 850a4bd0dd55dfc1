"""Page 2 · Gather & attend."""

STRINGS = {
    "title": {"en": "2 · Gather & attend", "zh": "2 · Gather 与 attention"},
    "intro": {
        "en": ("Random K/V for one sequence were written through slot_mapping into scattered physical blocks. The "
               "teaching kernel first gathers them back in logical order, one token per loop iteration, then runs "
               "ordinary attention. Step through the gather, then compare with a contiguous KV cache."),
        "zh": ("一个 sequence 的随机 K/V 已经通过 slot_mapping 写入了分散的 physical block。教学版 kernel 先按逻辑顺序"
               "把它们 gather 回来（循环每次读一个 token），再做普通的 attention。逐步执行 gather，然后和连续 KV cache "
               "的结果对比。"),
    },
    "mode": {"en": "Phase", "zh": "阶段"},
    "mode_decode": {"en": "decode (one new query)", "zh": "decode（一个新 query）"},
    "mode_prefill": {"en": "prefill (q_len queries, causal mask)", "zh": "prefill（q_len 个 query，causal mask）"},
    "q_len": {"en": "q_len (prompt tokens computed in this pass)", "zh": "q_len（本次计算的 prompt token 数）"},
    "q_len_help": {
        "en": ("q_len = context_len is a whole prompt. A smaller q_len means the first context_len - q_len tokens "
               "were cached earlier, so the mask is aligned to the end of the context."),
        "zh": ("q_len = context_len 表示整段 prompt。q_len 更小时，前 context_len - q_len 个 token 已经在 cache 中，"
               "所以 mask 要对齐到上下文的末尾。"),
    },
    "err_gqa": {"en": "num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}.",
                "zh": "num_heads {num_heads} 不是 num_kv_heads {num_kv_heads} 的整数倍。"},
    "fix_gqa": {
        "en": ("Each K/V head serves an equal group of query heads. With num_heads {num_heads}, choose num_kv_heads "
               "among {options}."),
        "zh": "每个 K/V head 服务同样多的 query head。num_heads 为 {num_heads} 时，num_kv_heads 可选 {options}。",
    },
    "err_pool": {"en": "context_len {context_len} with block_size {block_size} needs {needed} blocks; this page's pool "
                       "holds at most {max_blocks}.",
                 "zh": "context_len {context_len}、block_size {block_size} 需要 {needed} 个 block；本页的 pool 最多 "
                       "{max_blocks} 个。"},
    "fix_pool": {"en": "Raise block_size to {fits} or more, or lower context_len to {max_len} or less.",
                 "zh": "把 block_size 调到 {fits} 或更大，或把 context_len 降到 {max_len} 或更小。"},
    "all": {"en": "Gather all", "zh": "全部 gather"},
    "progress": {"en": "gathered {step} of {context_len} tokens", "zh": "已 gather {step} / {context_len} 个 token"},
    "pool_title": {"en": "Physical pool: {num_blocks} blocks; this sequence's block_table is {block_table}",
                   "zh": "物理 pool：{num_blocks} 个 block；这个 sequence 的 block_table 为 {block_table}"},
    "current_read": {"en": "Loop iteration {step}: token_index {token_index}",
                     "zh": "第 {step} 次循环：token_index {token_index}"},
    "press_next": {"en": "Press “Next step” to run one iteration of the loop.",
                   "zh": "点击“下一步”执行一次循环。"},
    "pool_notice": {
        "en": ("The loop walks tokens in logical order, so it hops between physical blocks: within a block it reads "
               "neighbouring slots, at each block boundary it jumps to the next entry of the block_table."),
        "zh": ("循环按逻辑顺序遍历 token，所以会在 physical block 之间跳转：在一个 block 内读取相邻的 slot，"
               "每到 block 边界就跳到 block_table 的下一项。"),
    },
    "strip_title": {"en": "Logical K/V so far: a keys tensor of shape {shape} (tokens × num_kv_heads × head_dim); "
                          "a cell shows the physical block:offset it came from",
                    "zh": "目前的逻辑 K/V：keys 张量的形状为 {shape}（token 数 × num_kv_heads × head_dim）；格子中是来源的 "
                          "physical block:块内偏移"},
    "loop_heading": {"en": "The loop being stepped (paged.attention.gather_kv_loop)",
                     "zh": "正在逐步执行的循环（paged.attention.gather_kv_loop）"},
    "attend_after": {"en": "Attention runs on the whole context: {remaining} token(s) left to gather.",
                     "zh": "attention 需要完整的上下文：还剩 {remaining} 个 token 没有 gather。"},
    "attend_heading": {"en": "Attention over the gathered K/V", "zh": "对 gather 出的 K/V 做 attention"},
    "weights_title": {"en": "Attention weights: heads × tokens (each row sums to 1)",
                      "zh": "attention 权重：head × token（每行之和为 1）"},
    "weights_notice": {
        "en": ("A decode query is the newest token, so every cached token is in its past: no mask is needed. "
               "Query heads come in groups of {group} that read the same K/V head (grouped-query attention), yet "
               "their weights differ because their queries differ."),
        "zh": ("decode 的 query 是最新的 token，所有已缓存的 token 都在它之前，所以不需要 mask。每 {group} 个 query "
               "head 共用同一个 K/V head（grouped-query attention），但它们的 query 不同，所以权重也不同。"),
    },
    "output_title": {"en": "Output: heads × head_dim", "zh": "输出：head × head_dim"},
    "output_notice": {"en": "Each head's output is its weights times the gathered V: a blend of history.",
                      "zh": "每个 head 的输出等于它的权重乘以 gather 出的 V：对历史的加权混合。"},
    "mask_visible": {"en": "visible", "zh": "可见"},
    "mask_masked": {"en": "masked", "zh": "被遮蔽"},
    # the K/V strip's hover (viz.attention.StripWords, one key strip_<field> per field)
    "strip_token": {"en": "token {token} ← physical block {block}, offset {offset}, slot {slot}",
                    "zh": "token {token} ← physical block {block}，块内偏移 {offset}，slot {slot}"},
    "strip_not_gathered": {"en": "{read} (not gathered yet)", "zh": "{read}（尚未 gather）"},
    "weight": {"en": "weight", "zh": "权重"},
    "mask_title": {"en": "Causal mask: which keys each query may see (blue = visible)",
                   "zh": "causal mask：每个 query 能看到哪些 key（蓝色为可见）"},
    "mask_notice": {
        "en": ("In prefill the queries are prompt tokens themselves; a query must not see tokens after it. The mask "
               "is aligned to the end of the context: query i sees keys 0 … {start} + i."),
        "zh": ("prefill 时 query 就是 prompt 中的 token，本身不能看到它之后的 token。mask 对齐到上下文的末尾："
               "query i 能看到 key 0 … {start} + i。"),
    },
    "rows_cut": {"en": "Showing the last {rows} of {q_len} queries.", "zh": "只显示 {q_len} 个 query 中的最后 {rows} 个。"},
    "head": {"en": "Head to show", "zh": "显示的 head"},
    "prefill_weights_title": {"en": "Prefill weights of head {head}: queries × keys",
                              "zh": "head {head} 的 prefill 权重：query × key"},
    "future_weight": {"en": "Weight on the future without the mask", "zh": "去掉 mask 后分给未来的权重"},
    "future_help": {"en": "The largest share of attention any query would give to tokens after it if the mask were "
                          "dropped.",
                    "zh": "如果去掉 mask，某个 query 分给它之后 token 的注意力的最大比例。"},
    "prefill_notice": {"en": "Above the diagonal every weight is exactly 0: the mask removed the future.",
                       "zh": "对角线以上的权重全部为 0：mask 去掉了未来。"},
    "verdict": {"en": "verdict", "zh": "结论"},
    # with a break on (ui.breaks): the figures draw the broken attention, and say so
    "weights_title_told": {"en": "Attention weights of the broken decode: heads × the {told} tokens it read",
                           "zh": "弄坏后的 decode 的 attention 权重：head × 它读到的 {told} 个 token"},
    "output_title_told": {"en": "Output of the broken decode (context_len {told}): heads × head_dim",
                          "zh": "弄坏后的 decode 的输出（context_len {told}）：head × head_dim"},
    "mask_title_off": {"en": "Causal mask: removed by the break (every key visible to every query)",
                       "zh": "causal mask：已被弄坏去掉（每个 query 都能看到所有 key）"},
    "mask_notice_off": {"en": "With the mask removed, query i also sees the keys after it: tokens it must not know yet.",
                        "zh": "去掉 mask 后，query i 也能看到它之后的 key：那些它本不该知道的 token。"},
    "prefill_weights_title_off": {"en": "Prefill weights of head {head} without the causal mask: queries × keys",
                                  "zh": "去掉 causal mask 后 head {head} 的 prefill 权重：query × key"},
    "prefill_notice_off": {"en": "Above the diagonal the weights are no longer 0: each query reads tokens after it.",
                           "zh": "对角线以上的权重不再是 0：每个 query 都读到了它之后的 token。"},
    "check_broken": {"en": "The broken attention vs the contiguous reference ({what})",
                     "zh": "弄坏后的 attention 与连续 cache 参考结果对比（{what}）"},
    "diff_title_broken": {"en": "broken − contiguous (float64 reference, no break), centred at 0",
                          "zh": "弄坏后 − 连续 cache（float64 参考，未弄坏），以 0 为中心"},
    "broken_notice": {"en": "Switch the break off and the paged output matches the reference again: paging itself "
                            "is not what broke.",
                      "zh": "关掉弄坏开关，paged 输出就又与参考结果一致：出错的并不是分页本身。"},
    "diff_title": {"en": "paged − contiguous (float64 reference), centred at 0",
                   "zh": "paged − 连续 cache（float64 参考），以 0 为中心"},
    "bitwise_yes": {
        "en": ("Two comparisons. (1) The paged output against the same {dtype} attention over the contiguous cache: "
               "bit-for-bit equal (every element identical): paging changed where K/V were read, not the math. "
               "(2) The paged output against a float64 reference: max abs error {err}, relative {rel}, below the "
               "{dtype} tolerance {tol}: that is {dtype} rounding, not a paging error."),
        "zh": ("这里有两种比较。(1) paged 输出与在连续 cache 上用 {dtype} 做的同样 attention 相比：逐位相同（每个元素都一样）："
               "分页只改变了 K/V 的读取位置，没有改变数学。(2) paged 输出与 float64 参考结果相比：最大绝对误差 {err}，"
               "相对误差 {rel}，低于 {dtype} 容差 {tol}：这是 {dtype} 的舍入误差，不是分页的错误。"),
    },
    "bitwise_no": {
        "en": ("Two comparisons. (1) The paged output against the same {dtype} attention over the contiguous cache: "
               "not bit-for-bit equal (some elements differ in their last bits). (2) Against a float64 reference: max "
               "abs error {err}, relative {rel}, judged against the {dtype} tolerance {tol}."),
        "zh": ("这里有两种比较。(1) paged 输出与在连续 cache 上用 {dtype} 做的同样 attention 相比：并非逐位相同（部分元素的最低几位不同）。"
               "(2) 与 float64 参考结果相比：最大绝对误差 {err}，相对误差 {rel}，按 {dtype} 容差 {tol} 判断。"),
    },
}
