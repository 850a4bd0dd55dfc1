"""Page 10 · Swap or recompute (the scheduler's reasons come from "engine.why_<code>")."""

STRINGS = {
    "title": {"en": "10 · Swap or recompute", "zh": "10 · 换出还是重算"},
    "intro": {
        "en": ("When decode needs a block and the pool has none, a running sequence must leave. Recompute frees its "
               "blocks and forgets its cache (cached_token_count becomes 0): it comes back as a prefill of every "
               "token it knows. Swap copies its blocks to a second pool first and keeps cached_token_count: it comes "
               "back into fresh blocks and goes on decoding. Here both pools are host memory, so a swap is a copy "
               "between two host pools; on a GPU it crosses PCIe."),
        "zh": ("decode 需要新 block 而 pool 已经没有空闲 block 时，必须让一个运行中的 sequence 离开。重算（recompute）"
               "释放它的 block 并丢弃缓存（cached_token_count 变为 0）：它回来时要对已知的全部 token 重新 prefill。"
               "换出（swap）先把它的 block 复制到第二个 pool，并保留 cached_token_count：回来时换进新的 block，接着 "
               "decode。这里两个 pool 都在主机内存中，所以 swap 是两个主机 pool 之间的复制；在 GPU 上它要经过 PCIe。"),
    },
    "block_size_help": {"en": "Tokens per block: smaller blocks mean more, smaller copies.",
                        "zh": "每个 block 的 token 数：block 越小，复制次数越多、每次越小。"},
    "num_blocks_help": {"en": "Blocks of the pool: fewer means more pressure (more preemptions).",
                        "zh": "pool 的 block 数：越少压力越大（抢占越多）。"},
    "swap_space": {"en": "swap_space (blocks of the swap pool)", "zh": "swap_space（swap pool 的 block 数）"},
    "swap_space_help": {"en": "A victim needing more swap blocks than are free is recomputed instead (swap pool full).",
                        "zh": "如果被抢占的 sequence 需要的 swap block 多于空闲数，就改为重算（swap pool 已满）。"},
    "break": {"en": "what to break (swap mode only)", "zh": "弄坏什么（仅 swap 模式）"},
    "break_off": {"en": "off: swap in correctly", "zh": "关闭：正确换回"},
    "break_no_copy": {"en": "swap in without copying the K/V back", "zh": "换回时不把 K/V 复制回来"},
    "break_wrong_blocks": {"en": "copy each swap block into the wrong pool block",
                           "zh": "把每个 swap block 复制到错误的 pool block"},
    "scenario": {"en": "Scenario: four prompts, {max_tokens} new tokens each, greedy; the same requests in both modes.",
                 "zh": "场景：四个 prompt，每个生成 {max_tokens} 个新 token，greedy；两种模式使用相同的请求。"},
    "col_swap": {"en": "Swap", "zh": "换出（swap）"},
    "col_recompute": {"en": "Recompute", "zh": "重算（recompute）"},
    "no_step": {"en": "No step yet: press “Next step”.", "zh": "还没有运行任何一步：点击“下一步”。"},
    "ended": {"en": "This mode finished at step {step}.", "zh": "这个模式在第 {step} 步结束。"},
    "pools_title": {"en": "Pool and swap pool after step {step} (label = sequence + logical block)",
                    "zh": "第 {step} 步之后的 pool 和 swap pool（标签 = sequence + logical block）"},
    "pool_title": {"en": "Pool after step {step} (label = sequence + logical block)",
                   "zh": "第 {step} 步之后的 pool（标签 = sequence + logical block）"},
    "cell_pool": {"en": "KV pool", "zh": "KV 缓存池"},
    "cell_swap_pool": {"en": "swap pool (host)", "zh": "swap pool （主机）"},  # the space: a narrow column breaks there
    "col_ratio": {"en": "recompute / swap", "zh": "重算 / 换出"},
    "cell_held": {"en": "{pool} block {block}: {seq}, logical block {logical}{what}",
                  "zh": "{pool} block {block}：{seq}，logical block {logical}{what}"},
    "cell_free": {"en": "{pool} block {block}: free{what}", "zh": "{pool} block {block}：空闲{what}"},
    "cell_left": {"en": " (left this step)", "zh": "（这一步离开）"},
    "cell_arrived": {"en": " (arrived this step)", "zh": "（这一步到达）"},
    "cell_handed": {"en": " (taken this step; {prev} left it in the same step)",
                    "zh": "（这一步被拿走；{prev} 在同一步离开了它）"},
    "out_msg": {"en": "{seq} swapped out: pool blocks {src} → swap blocks {dst} (cached_token_count {cached} kept).",
                "zh": "{seq} 被换出：pool block {src} → swap block {dst}（保留 cached_token_count {cached}）。"},
    "in_msg": {"en": "{seq} swapped in: swap blocks {src} → fresh pool blocks {dst}; it decodes in this very step.",
               "zh": "{seq} 被换回：swap block {src} → 新的 pool block {dst}；它在这一步就继续 decode。"},
    "recompute_msg": {"en": "{seq} preempted by recompute: blocks {blocks} freed, its cache forgotten.",
                      "zh": "{seq} 被以重算方式抢占：释放 block {blocks}，缓存被丢弃。"},
    "back_msg": {"en": ("{seq} comes back: its prefill re-feeds {n} tokens, the {cached} it had cached once and "
                        "{new} sampled but never cached yet."),
                 "zh": "{seq} 回来了：它的 prefill 重新输入 {n} 个 token：{cached} 个曾经缓存过，{new} 个已采样但还没缓存过。"},
    "swapped_now": {"en": "Waiting in the swap pool: {seqs}", "zh": "在 swap pool 中等待：{seqs}"},
    "metric_copied": {"en": "blocks copied", "zh": "复制的 block"},
    "metric_bytes": {"en": "bytes copied", "zh": "复制的字节"},
    "metric_recomputed": {"en": "tokens recomputed", "zh": "重算的 token"},
    "metric_preempt": {"en": "swaps / recomputes", "zh": "换出 / 重算次数"},
    "same_tokens": {"en": "Both modes produced the same tokens for every prompt, as a run without pressure does.",
                    "zh": "两种模式为每个 prompt 生成的 token 完全相同，和没有内存压力的运行一样。"},
    "different_tokens": {"en": "The two modes' tokens differ: something is broken.",
                         "zh": "两种模式生成的 token 不同：有东西坏了。"},
    "twin_ok": {"en": "Swap mode agrees with its contiguous-cache twin at every step so far (logits within rel 1e-4).",
                "zh": "到目前为止，swap 模式每一步都与连续 cache 的孪生引擎 一致（logits 相对误差在 1e-4 以内）。"},
    "twin_bad": {
        "en": ("The contiguous twin caught it at step {step}: swap mode's logits differ by {worst} (more than rel "
               "1e-4). The block table says where the K/V should be; after this swap-in they are not there."),
        "zh": ("连续 cache 的孪生引擎 在第 {step} 步发现了问题：swap 模式的 logits 相差 {worst}（超过相对 1e-4）。block table "
               "指出 K/V 应该在哪里；这次换回之后它们不在那里。"),
    },
    "twin_later": {"en": "Broken, but not yet visible: the twin will catch it at step {step}.",
                   "zh": "已经弄坏了，但还看不出来：孪生引擎会在第 {step} 步发现。"},
    "tokens_hide": {"en": "The tokens may even look right: greedy argmax can survive wrong K/V; the logits do not.",
                    "zh": "生成的 token 甚至可能看起来是对的：greedy 的 argmax 可能扛得住错误的 K/V，logits 却不会。"},
    "measure_header": {"en": "Measured here: the cost of each mode by block size",
                       "zh": "在这台机器上测量：两种模式的开销随 block_size 的变化"},
    "measure_button": {"en": "Measure on this machine", "zh": "在这台机器上测量"},
    "measuring": {"en": "Timing swap copies and a recompute prefill…", "zh": "正在计时 swap 复制和重算 prefill……"},
    "measure_caption": {
        "en": ("One sequence of {tokens} tokens on the shipped model, best of {repeats}: swap = copy every block to "
               "the swap pool and back (both host memory here); recompute = the prefill of all its tokens. Ratios of "
               "one run are what hold; absolute times vary with the machine's load."),
        "zh": ("在自带模型上，一个 {tokens} 个 token 的 sequence，取 {repeats} 次中最好的：swap = 把每个 block 复制到 "
               "swap pool 再复制回来（这里都是主机内存）；recompute = 对它的全部 token 做 prefill。可信的是同一次运行中"
               "的比值；绝对时间随机器负载变化。"),
    },
    "cost_title": {"en": "Preempting one sequence of {tokens} tokens, by block size (best of {repeats}, this machine)",
                   "zh": "抢占一个 {tokens} 个 token 的 sequence，按 block_size（{repeats} 次取最好，本机）"},
    "cost_swap": {"en": "swap out + in (one copy per direction)", "zh": "换出 + 换回（每个方向一次复制）"},
    "cost_per_block": {"en": "swap out + in (a copy per block and layer, as vLLM v0)",
                       "zh": "换出 + 换回（每个 block、每层一次复制，同 vLLM v0）"},
    "cost_recompute": {"en": "recompute (prefill of every token)", "zh": "重算（对每个 token 做 prefill）"},
    "cost_x": {"en": "block_size (tokens per block)", "zh": "block_size（每个 block 的 token 数）"},
    "cost_y": {"en": "ms (log scale)", "zh": "毫秒（对数坐标）"},
    "paper_note": {
        "en": ("The paper's reference (§4.5, Fig. 19, on a GPU): swapping pays for many small PCIe copies when blocks "
               "are small, recompute costs the same at every block size; recompute wins at small blocks, swapping at "
               "large ones, and from 16 to 64 the two are about even. Here the copy never leaves host memory, so "
               "swapping is far cheaper than on a GPU; vLLM v1 (0.32) dropped swapping and preempts by recompute "
               "only."),
        "zh": ("论文的参考结论（§4.5，图 19，GPU 上）：block 小时，swap 要付出大量小的 PCIe 复制；重算的开销与 block_size "
               "无关；block 小时重算更好，block 大时 swap 更好，16 到 64 之间两者相当。这里的复制不离开主机内存，所以 "
               "swap 比在 GPU 上便宜得多；vLLM v1（0.32）已经去掉了 swap，只用重算来抢占。"),
    },
    "notice": {
        "en": ("Watch a victim leave: in swap mode its cells reappear in the swap pool row, then come back into other "
               "pool blocks with the same labels; in recompute mode they just vanish, and later its prefill feeds "
               "every token again."),
        "zh": ("看被抢占的 sequence 离开：swap 模式下它的格子出现在 swap pool 一行，之后以相同的标签回到别的 pool block；"
               "重算模式下它们直接消失，之后它的 prefill 会再次输入每个 token。"),
    },
    "none_quiz": {"en": "No question now: no preemption is left in this run.",
                  "zh": "现在没有题目：这次运行中已经没有抢占了。"},
}
