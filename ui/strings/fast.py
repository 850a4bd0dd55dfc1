"""Page 7 · Correct → fast: the kernel ladder measured live, and the memory-waste story."""

STRINGS = {
    "title": {"en": "7 · Correct → fast", "zh": "7 · 从正确到快速"},
    "intro": {
        "en": ("Every kernel on this page computes the same decode attention over the same paged pool, and each is "
               "checked against the contiguous reference before it is timed. What changes from rung to rung is how "
               "much work is spent finding K and V. Below that: why paging is worth this trouble at all, measured "
               "on a request trace."),
        "zh": ("本页每个 kernel 在同一个 paged pool 上计算同样的 decode attention，计时之前都先与连续 cache 的参考结果"
               "对比。每一级的区别只在于为了找到 K 和 V 花了多少功夫。再往下：为什么值得为分页付出这些代价——在一个"
               "请求 trace 上实测。"),
    },
    # --- the ladder -------------------------------------------------------------------------------------------------
    "rungs_fold": {"en": "What each rung does", "zh": "每一级做了什么"},
    "memory_fold": {"en": "The trace and its figures (settings, lengths, waste, fit, fragmentation)",
                    "zh": "请求轨迹与图（设置、长度、浪费、容量、碎片）"},
    "ladder_header": {"en": "The ladder: from the teaching loop to a real kernel", "zh": "阶梯：从教学循环到真正的 kernel"},
    "ladder_settings": {"en": "Kernel ladder", "zh": "Kernel 阶梯"},
    "batch": {"en": "batch (sequences decoding together)", "zh": "batch（一起 decode 的 sequence 数）"},
    "rung_loop": {"en": "① loop", "zh": "① loop"},
    "rung_gather": {"en": "② gather", "zh": "② gather"},
    "rung_fused": {"en": "③ fused", "zh": "③ fused"},
    "rung_native": {"en": "④ native (CPU)", "zh": "④ native（CPU）"},
    "rung_triton": {"en": "⑤ triton (GPU)", "zh": "⑤ triton（GPU）"},
    "rung_sdpa": {"en": "⑥ contiguous SDPA", "zh": "⑥ 连续 SDPA"},
    "does_loop": {
        "en": ("A Python loop over tokens: for each one, logical_block_id → physical_block_id → block_offset, then "
               "copy one row. **Costs:** interpreter work and indexing overhead per token."),
        "zh": ("Python 逐 token 循环：每个 token 走一遍 logical_block_id → physical_block_id → block_offset，再复制一行。"
               "**代价**：每个 token 都有解释器和索引开销。"),
    },
    "does_gather": {
        "en": ("**Removes** the per-token loop: every slot is computed at once and one vectorised copy builds a "
               "contiguous K/V buffer, then SDPA. **Still costs:** an extra full pass, writing the copy and reading "
               "it back."),
        "zh": ("**去掉了**逐 token 循环：一次算出所有 slot，一次向量化复制得到连续的 K/V 缓冲区，再做 SDPA。"
               "**仍有代价**：多了一整遍读写——写出副本再读回来。"),
    },
    "does_fused": {
        "en": ("**Removes** the materialised copy: walks the block tables a tile of blocks at a time with an online "
               "softmax (running max, running sum), reading each block straight from the pool."),
        "zh": ("**去掉了**物化的副本：按 block table 一次走一个 tile 的 block，用 online softmax（running max、running "
               "sum），直接从 pool 读取每个 block。"),
    },
    "does_native": {
        "en": ("**Removes** what fused still pays for PyTorch's ops: the tile copies and a dozen op calls per tile. "
               "The same online softmax as one C loop (built on first use), reading every K and V row once, in "
               "place, 8 tokens at a time with vector instructions, while it prefetches the next block: its "
               "address is in the block table, so the CPU need not guess it."),
        "zh": ("**去掉了** fused 仍要为 PyTorch 算子付出的代价：tile 的复制，以及每个 tile 十几次算子调用。同样的 online "
               "softmax 写成一个 C 循环（首次使用时编译），每行 K、V 只原地读一次，用向量指令一次处理 8 个 token，同时"
               "预取下一个 block：它的地址就在 block table 里，CPU 不必去猜。"),
    },
    "native_missing_note": {
        "en": "Not run here: {reason}",
        "zh": "这里没有运行：{reason}",
    },
    "building_native": {"en": "Building the C kernel (once per server process)…",
                        "zh": "正在编译 C kernel（每个服务器进程一次）……"},
    "native_gpu_note": {
        "en": "A CPU kernel: on this GPU, triton plays its part.",
        "zh": "这是 CPU kernel：在 GPU 上由 triton 担任这一角色。",
    },
    "does_triton": {
        "en": ("**Removes** the host-side tiling loop: one GPU program per sequence × kv-head group walks its own "
               "block table, one physical block at a time, all in parallel."),
        "zh": ("**去掉了**主机端的 tile 循环：每个 sequence × kv-head 组一个 GPU program，各自沿自己的 block table "
               "逐个 physical block 读取，全部并行。"),
    },
    "does_sdpa": {
        "en": ("**The yardstick:** the same K/V already stored contiguously, no indirection at all, read by "
               "PyTorch's general-purpose attention. The true bound is memory bandwidth (the GB/s chart): a kernel "
               "shaped for decode, like native, can beat SDPA and still pay for its block table."),
        "zh": ("**标尺**：同样的 K/V 本来就连续存放，完全没有间接寻址，由 PyTorch 的通用 attention 读取。真正的上限是内存"
               "带宽（见 GB/s 图）：像 native 这样为 decode 定制的 kernel 可以比 SDPA 还快，同时照样付出查 block table "
               "的代价。"),
    },
    "triton_cpu_note": {
        "en": ("No CUDA GPU here, so triton is not timed on this page: it runs on a GPU, and is tested on CPU "
               "through Triton's interpreter (TRITON_INTERPRET=1), far too slow to time."),
        "zh": ("这里没有 CUDA GPU，所以本页不对 triton 计时：它在 GPU 上运行，在 CPU 上通过 Triton 解释器"
               "（TRITON_INTERPRET=1）测试，慢得无法计时。"),
    },
    "run": {"en": "Run the ladder", "zh": "运行阶梯"},
    "loop_include": {"en": "include ① loop", "zh": "包含 ① loop"},
    "loop_help": {"en": "The per-token Python loop takes ~10 µs per token: it runs only where batch × context_len ≤ "
                        "{max_tokens}.",
                  "zh": "逐 token 的 Python 循环每个 token 约 10 µs：只在 batch × context_len ≤ {max_tokens} 时运行。"},
    "loop_skipped": {
        "en": ("① loop is skipped at this size: batch × context_len = {tokens} > {max_tokens} tokens (at ~10 µs per "
               "token it would take seconds per call). The context sweep still runs it where the product is ≤ "
               "{max_tokens}."),
        "zh": ("这个规模下跳过 ① loop：batch × context_len = {tokens} > {max_tokens} 个 token（每个 token 约 10 µs，"
               "每次调用要几秒）。context 扫描中乘积 ≤ {max_tokens} 的点仍会运行它。"),
    },
    "running": {"en": "Checking, then timing every rung…", "zh": "先校验，再为每一级计时……"},
    "progress": {"en": "measured {done} of {total} configurations", "zh": "已测 {done}/{total} 个配置"},
    "press_run": {
        "en": ("Not measured yet for this configuration. Press “Run the ladder”: it checks and times every rung here "
               "and over two small sweeps (a few seconds). Results are kept for this session."),
        "zh": ("这个配置还没有测量。点击“运行阶梯”：会在这里以及两个小扫描上校验并计时每一级（几秒钟）。结果在本次会话"
               "中保留。"),
    },
    "run_stopped": {
        "en": ("The last run was stopped before it finished: a setting changed (or the page was left) while it "
               "measured, and Streamlit starts the page over on every change. Nothing from that run was kept. Press "
               "“Run the ladder” again to measure the settings shown now."),
        "zh": ("上一次运行没有完成就被停止了：测量期间改了设置（或离开了页面），而每次改动都会让 Streamlit 重新运行页面。"
               "那次运行的结果没有保留。请再次点击“运行阶梯”，测量当前显示的设置。"),
    },
    "measured": {
        "en": ("Measured on this machine, now: {device}, {threads} torch thread(s), fp32, shuffled block tables, "
               "medians of {reps} runs ({sweep_reps} per sweep point, 3 for the loop); read bandwidth {bw:.1f} GB/s "
               "(x.sum()); load average {load}; took {seconds:.1f} s. Shared machines are noisy: compare ratios "
               "within this run, not absolute times across runs."),
        "zh": ("在本机此刻测得：{device}，{threads} 个 torch 线程，fp32，打乱的 block table，{reps} 次运行的中位数"
               "（扫描每点 {sweep_reps} 次，loop 3 次）；读带宽 {bw:.1f} GB/s（x.sum()）；负载 {load}；耗时 "
               "{seconds:.1f} 秒。共享机器噪声大：请比较同一次运行内的比值，而不是不同运行间的绝对时间。"),
    },
    "all_ok": {"en": "Every rung matches the contiguous reference (relative error < 1e-4) at every point measured.",
               "zh": "在所有测量点上，每一级都与连续 cache 的参考结果一致（相对误差 < 1e-4）。"},
    "some_bad": {"en": "At least one rung differs from the contiguous reference: its time means nothing until fixed.",
                 "zh": "至少有一级与连续 cache 的参考结果不一致：修好之前它的时间没有意义。"},
    "noisy": {
        "en": ("{rungs} ran faster than contiguous SDPA in this run, although it does all of SDPA's work plus a "
               "copy. That is the machine (other processes, caches), not the kernel: press “Run the ladder” again."),
        "zh": ("本次运行中 {rungs} 比连续 SDPA 还快，但它做了 SDPA 的全部工作外加一次复制。这是机器的原因（别的进程、"
               "cache），不是 kernel 的原因：请再点一次“运行阶梯”。"),
    },
    "col_rung": {"en": "rung", "zh": "级"},
    "col_check": {"en": "vs reference", "zh": "与参考对比"},
    "col_rel_err": {"en": "rel. error", "zh": "相对误差"},
    "col_ms": {"en": "ms (median)", "zh": "ms（中位数）"},
    "col_x_sdpa": {"en": "× SDPA", "zh": "× SDPA"},
    "col_gbps": {"en": "KV GB/s", "zh": "KV GB/s"},
    "col_pct_bw": {"en": "% of read bandwidth", "zh": "占读带宽 %"},
    "skipped": {"en": "skipped (batch × context_len > {max_tokens})", "zh": "跳过（batch × context_len > {max_tokens}）"},
    "not_chosen": {"en": "not chosen", "zh": "未选择"},
    "ladder_title": {"en": "One decode step, this configuration (log scale)", "zh": "一次 decode，当前配置（对数坐标）"},
    "ms_x": {"en": "milliseconds per decode call", "zh": "每次 decode 调用的毫秒数"},
    "ladder_notice": {
        "en": ("the time axis is logarithmic: 1 → 10 → 100 ms are equal steps. The loop is usually one to two orders "
               "of magnitude behind; gather and fused sit within a small factor of contiguous SDPA. native, the "
               "same math in C, usually lands at or below SDPA: what the middle rungs lost was not the paging, but "
               "the extra passes and op calls around it."),
        "zh": ("时间轴是对数坐标：1 → 10 → 100 ms 是等距的。loop 通常慢一到两个数量级；gather 和 fused 与连续 SDPA 只差一个"
               "小倍数。native 是同样的数学写成 C，通常与 SDPA 持平或更快：中间几级慢下来的原因不是分页本身，而是分页"
               "周围多出来的读写遍数和算子调用。"),
    },
    "sweep_header": {"en": "Sweeps", "zh": "扫描"},
    "ctx_ms_title": {"en": "Time vs context_len (batch {batch}, block_size {block_size})",
                     "zh": "时间与 context_len（batch {batch}，block_size {block_size}）"},
    "ctx_gbps_title": {"en": "KV bytes read per second vs context_len", "zh": "每秒读取的 KV 字节数与 context_len"},
    "ms_y": {"en": "ms", "zh": "ms"},
    "gbps_y": {"en": "KV GB/s", "zh": "KV GB/s"},
    "read_bw": {"en": "this machine's read bandwidth (x.sum())", "zh": "本机读带宽（x.sum()）"},
    "ctx_ms_notice": {
        "en": ("decode reads the whole history once, so time grows roughly in proportion to context_len for every "
               "rung; the gaps between the lines stay roughly constant. At short contexts fixed per-call costs "
               "dominate and the lines bunch together. On a busy machine a line can jump between neighbouring "
               "points: that is another process taking the cores, not the kernel. Press run again and compare "
               "rungs at the same point."),
        "zh": ("decode 要把全部历史读一遍，所以每一级的时间大致与 context_len 成正比；线之间的差距大致不变。context "
               "很短时，每次调用的固定开销占主导，几条线挤在一起。机器繁忙时，一条线可能在相邻两点间跳动：那是别的进程占了 CPU，"
               "不是 kernel 的问题。再运行一次，并在同一个点上比较各级。"),
    },
    "ctx_gbps_notice": {
        "en": ("decode attention does almost no arithmetic per byte, so the roof is memory bandwidth (dashed). The "
               "closer a rung gets to that line, the less work it spends on anything but reading K and V once. "
               "Points can exceed it when K/V still sit in cache from the previous repetition."),
        "zh": ("decode attention 每字节几乎没有计算，所以上限是内存带宽（虚线）。越接近这条线，说明除了把 K、V 读一遍"
               "之外花的功夫越少。当 K/V 还留在上一轮的 cache 里时，点可能超过这条线。"),
    },
    "bs_title": {"en": "Time vs block_size (context_len {context_len})",
                 "zh": "时间与 block_size（context_len {context_len}）"},
    "bs_x": {"en": "block_size (tokens per block)", "zh": "block_size（每个 block 的 token 数）"},
    "bs_notice": {
        "en": ("contiguous SDPA does not care about block_size (no blocks). The paged rungs pay per block: tiny "
               "blocks mean more table lookups and scattered short reads; from ~16 tokens per block on, a block is "
               "big enough that its lookup is lost in the reading."),
        "zh": ("连续 SDPA 与 block_size 无关（它没有 block）。paged 各级按 block 付出代价：block 很小时查表多、读取零碎；"
               "从每个 block 约 16 个 token 起，一个 block 足够大，查表开销就淹没在读取之中。"),
    },
    "err_run": {"en": "The ladder stopped: {message}", "zh": "阶梯运行中止：{message}"},
    "fix_run": {"en": "Make the configuration smaller (batch, context_len, head_dim) and run again.",
                "zh": "把配置调小一些（batch、context_len、head_dim）后再运行。"},
    "impl_sdpa": {"en": "contiguous SDPA", "zh": "连续 SDPA"},
    # --- memory waste ------------------------------------------------------------------------------------------------
    "memory_header": {"en": "Why page at all: KV memory reserved vs needed", "zh": "为什么要分页：预留的 KV 内存与实际需要"},
    "memory_intro": {
        "en": ("A server does not know how long a request will run. Without paging it reserves a contiguous "
               "region per request up front: max_model_len slots, to be safe. The “oracle” knows every final length "
               "in advance (impossible, a bound). Paged allocates blocks of block_size slots on demand, wasting at "
               "most block_size − 1 slots per request, in its last block. One slot = one token's K and V in every "
               "layer: 0.5 MiB for a Llama-2-7B-shaped model in fp16."),
        "zh": ("服务器事先不知道一个请求会生成多长。不分页时，它要一开始就为每个请求预留一段连续空间：为保险起见预留 "
               "max_model_len 个 slot。“oracle”预先知道每个请求的最终长度（不可能做到，是一个下界）。paged 按需分配"
               "每块 block_size 个 slot 的 block，每个请求最多在最后一个 block 中浪费 block_size − 1 个 slot。一个 "
               "slot = 一个 token 在每一层的 K 和 V：对于 Llama-2-7B 结构的 fp16 模型是 0.5 MiB。"),
    },
    "mem_seed": {"en": "trace seed", "zh": "trace 种子"},
    "mem_requests": {"en": "requests", "zh": "请求数"},
    "mem_max_model_len": {"en": "max_model_len", "zh": "max_model_len"},
    "mem_budget": {"en": "KV budget (token slots)", "zh": "KV 预算（token slot 数）"},
    "trace_desc": {
        "en": ("**The trace:** {num_requests} requests drawn with seed {seed}. Prompt length ~ lognormal, median "
               "{prompt_median:g} tokens, σ {prompt_sigma:g} (of the log), clipped to [{prompt_min}, {prompt_max}]; "
               "output length ~ lognormal, median {output_median:g}, σ {output_sigma:g}, clipped to [{output_min}, "
               "{output_max}]. A request's final length is prompt + output."),
        "zh": ("**Trace**：用种子 {seed} 抽取 {num_requests} 个请求。prompt 长度服从对数正态分布，中位数 "
               "{prompt_median:g} 个 token，σ {prompt_sigma:g}（对数尺度），截断到 [{prompt_min}, {prompt_max}]；"
               "输出长度服从对数正态分布，中位数 {output_median:g}，σ {output_sigma:g}，截断到 [{output_min}, "
               "{output_max}]。请求的最终长度 = prompt + 输出。"),
    },
    "m_waste_max": {"en": "waste, max_model_len each", "zh": "浪费：每个预留 max_model_len"},
    "m_waste_paged": {"en": "waste, paged (block_size 16)", "zh": "浪费：paged（block_size 16）"},
    "m_fit_max": {"en": "requests that fit, max_model_len", "zh": "能放下的请求：max_model_len"},
    "m_fit_paged": {"en": "requests that fit, paged 16", "zh": "能放下的请求：paged 16"},
    "m_help": {"en": "At the final length of every request; waste = (reserved − needed) / reserved.",
               "zh": "取每个请求的最终长度；浪费 = (预留 − 需要) / 预留。"},
    "trace_title": {"en": "Final lengths of the requests", "zh": "请求的最终长度"},
    "trace_x": {"en": "tokens in the KV cache when the request finishes", "zh": "请求结束时 KV cache 中的 token 数"},
    "trace_y": {"en": "requests", "zh": "请求数"},
    "trace_mean": {"en": "mean", "zh": "均值"},
    "trace_notice": {
        "en": ("most requests end far to the left of the max_model_len line, yet a contiguous server must reserve up "
               "to that line for every one of them, because it cannot tell in advance which request will be the "
               "long one."),
        "zh": ("大多数请求远在 max_model_len 线的左边就结束了，但连续分配的服务器必须为每个请求都预留到这条线，因为它"
               "事先无法知道哪个请求会很长。"),
    },
    "waste_title": {"en": "KV memory reserved but not used", "zh": "预留但未使用的 KV 内存"},
    "waste_y": {"en": "waste, % of reserved", "zh": "浪费（占预留的 %）"},
    "waste_final": {"en": "at each request's final length", "zh": "在每个请求的最终长度时"},
    "waste_decode": {"en": "averaged over every decode step", "zh": "在所有 decode step 上平均"},
    "scheme_max_len": {"en": "max_model<br>_len", "zh": "max_model<br>_len"},  # two short lines: a narrow category
    "scheme_oracle": {"en": "oracle", "zh": "oracle"},
    "scheme_paged": {"en": "paged<br>{block_size}", "zh": "paged<br>{block_size}"},
    "waste_notice": {
        "en": ("reserving max_model_len wastes most of the memory. Even the oracle wastes a lot while requests are "
               "still decoding, since it holds the final size from the first token. Paged grows with the request: "
               "small blocks waste almost nothing at every moment."),
        "zh": ("按 max_model_len 预留会浪费大部分内存。即使是 oracle，在请求仍在 decode 时也浪费不少，因为它从第一个 "
               "token 起就占着最终大小。paged 随请求增长：小 block 在任何时刻都几乎不浪费。"),
    },
    "fit_title": {"en": "Requests held at once in a budget of {budget} slots", "zh": "{budget} 个 slot 的预算中能同时容纳的请求数"},
    "fit_y": {"en": "requests", "zh": "请求数"},
    "fit_notice": {
        "en": ("requests taken in trace order, each at its final length, until the next one does not fit. More "
               "requests in memory at once means a bigger batch, and decode throughput grows with the batch."),
        "zh": "按 trace 顺序取请求，每个按最终长度计，直到下一个放不下为止。同时放下的请求越多，batch 越大，decode 吞吐量就越高。",
    },
    "frag_title": {"en": "Internal fragmentation per block_size", "zh": "各 block_size 的内部碎片"},
    "frag_y": {"en": "spare slots per request (last block)", "zh": "每个请求的空闲 slot（最后一个 block）"},
    "frag_measured": {"en": "measured on the trace", "zh": "trace 上实测"},
    "frag_expected": {"en": "(block_size − 1) / 2: a uniformly filled last block",
                      "zh": "(block_size − 1) / 2：最后一个 block 均匀填充时"},
    "frag_notice": {
        "en": ("paged waste lives only in each request's last, partly filled block: about half a block per request. "
               "Bigger blocks waste more; smaller blocks mean more table entries and slower kernels (see the "
               "block_size sweep above). vLLM's default, 16, sits between the two."),
        "zh": ("paged 的浪费只在每个请求最后一个未填满的 block 里：平均约半个 block。block 越大浪费越多；block 越小 "
               "block table 越长、kernel 越慢（见上面的 block_size 扫描）。vLLM 默认的 16 折中了两者。"),
    },
    "external_note": {
        "en": ("Not simulated: external fragmentation (holes between contiguous reservations of different sizes), "
               "so the contiguous numbers here are optimistic."),
        "zh": "未模拟外部碎片（不同大小的连续预留之间的空洞），所以这里连续分配的数字是偏乐观的。",
    },
    "computing_memory": {"en": "Serving the trace three ways…", "zh": "正在用三种方式服务这个 trace……"},
    "err_trace": {"en": "This trace cannot be built: {message}", "zh": "无法生成这个 trace：{message}"},
    "fix_trace": {"en": "Pick a larger max_model_len.", "zh": "选一个更大的 max_model_len。"},
}
