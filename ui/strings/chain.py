"""Page 4 · Engine: the chain, live (seven modules, this step's values on each arrow) and the state rule table."""

STRINGS = {
    # --- the chain, live ---
    "header": {"en": "The chain, live", "zh": "整条链路，实时查看"},
    "caption": {
        "en": ("Each step runs the same seven modules in order. The arrow leaving a module carries what it handed to "
               "the next one in this step; a dimmed module did nothing this step (an idle step, no new block, "
               "nothing finished). Pick a module to read the real code that did it."),
        "zh": ("每一步都按顺序经过同样的七个模块。离开某个模块的箭头上写着它在这一步交给下一个模块的内容；变暗的模块在这一步"
               "什么也没做（空闲的一步、没有新 block、没有结束的 sequence）。选择一个模块，查看真正执行这一步的代码。"),
    },
    "title": {"en": "Step {step}: who did what", "zh": "第 {step} 步：谁做了什么"},
    "title_none": {"en": "Before the first step: press “Next step”", "zh": "第一步之前：点击“下一步”"},
    "title_nothing": {"en": "No step has run, and none can: no request can be scheduled",
                      "zh": "还没有运行任何一步，也无法运行：没有可以调度的请求"},
    "pick": {"en": "Show the code of", "zh": "查看代码"},
    "code_from": {"en": "`{name}`, read from the library's source as it runs now",
                  "zh": "`{name}`，直接读取库中正在运行的源码"},
    "stage_scheduler": {"en": "Scheduler", "zh": "Scheduler"},
    "stage_block_manager": {"en": "Block Manager", "zh": "Block Manager"},
    "stage_model_runner": {"en": "ModelRunner", "zh": "ModelRunner"},
    "stage_paged_attention": {"en": "PagedAttention", "zh": "PagedAttention"},
    "stage_sampler": {"en": "Sampler", "zh": "Sampler"},
    "stage_sequence_update": {"en": "Sequence update", "zh": "Sequence 更新"},
    "stage_free_blocks": {"en": "Free finished blocks", "zh": "释放已结束的 block"},
    # arrow labels
    "out_scheduler": {"en": "{phase}: {seqs}<br>why: {why}", "zh": "{phase}：{seqs}<br>原因：{why}"},
    "out_idle": {"en": "idle: nobody runs", "zh": "idle：没有 sequence 运行"},
    "out_allocated": {"en": "new blocks {blocks}", "zh": "新分配 block {blocks}"},
    "out_preempt_freed": {"en": "freed by preemption {blocks}", "zh": "抢占释放 {blocks}"},
    "out_copies": {"en": "copy-on-write {copies}", "zh": "写时复制 {copies}"},
    "out_no_blocks": {"en": "no block taken or freed: every last block had room",
                      "zh": "没有分配或释放 block：每个最后的 block 都还有空位"},
    "out_runner": {"en": "slot_mapping {slots}<br>block_tables {tables}<br>context_lens {lens}",
                   "zh": "slot_mapping {slots}<br>block_tables {tables}<br>context_lens {lens}"},
    "out_attention": {"en": "K/V of {written} token(s) written at their slots; read {read}<br>→ logits, one row per "
                            "sequence ({rows})",
                      "zh": "{written} 个 token 的 K/V 写入各自的 slot；读取 {read}<br>→ logits，每个 sequence 一行（{rows}）"},
    "out_kernel": {"en": "{call} ({kernel})", "zh": "{call}（{kernel}）"},
    "kernel_loop": {"en": "the article's per-token loop", "zh": "文章中逐 token 的循环"},
    "kernel_gather": {"en": "gather then attend", "zh": "先 gather 再做 attention"},
    "kernel_fused": {"en": "fused PyTorch kernel", "zh": "融合的 PyTorch kernel"},
    "kernel_native": {"en": "native C kernel", "zh": "原生 C kernel"},
    "kernel_triton": {"en": "Triton kernel", "zh": "Triton kernel"},
    "kernel_sdpa": {"en": "torch SDPA", "zh": "torch SDPA"},
    "out_sampler": {"en": "sampled {tokens}", "zh": "采样 {tokens}"},
    "out_mid_prefill": {"en": "{seqs}: prompt chunk: nothing sampled yet", "zh": "{seqs}：prompt 分块，尚未采样"},
    "phase_mixed": {"en": "prefill chunk + decode", "zh": "prefill 分块 + decode"},
    "out_update": {"en": "cached_token_count / generated: {counts}", "zh": "cached_token_count / 已生成：{counts}"},
    "out_forked": {"en": "forked {forked}", "zh": "fork 出 {forked}"},
    "out_freed": {"en": "finished {freed} → free list; free {free}/{num_blocks}",
                  "zh": "已结束 {freed} → 空闲链表；空闲 {free}/{num_blocks}"},
    "out_nothing_freed": {"en": "nothing finished; free {free}/{num_blocks}",
                          "zh": "没有结束的 sequence；空闲 {free}/{num_blocks}"},
    "out_none": {"en": "—", "zh": "—"},
    # --- the state rule, one sequence ---
    "code_expander": {"en": "The code of {module}, read from the library as it runs now",
                      "zh": "{module} 的代码，直接读取自正在运行的库"},
    "rule_header": {"en": "The state rule, step by step", "zh": "状态规则，逐步查看"},
    "rule_pick": {"en": "Sequence", "zh": "序列"},
    "rule_fold": {"en": "How to read a row", "zh": "如何读一行"},
    "rule_caption": {
        "en": ("One row per step this sequence took part in. After a prefill, cached_token_count = every token fed "
               "and generated holds one new token; each decode feeds the newest generated token, writes its K/V "
               "(cached + 1) and samples the next: the newest token is always known but not yet cached. With chunked "
               "prefill a long prompt takes several rows (prefill chunk k/n): each adds its tokens to "
               "cached_token_count and samples nothing until the last."),
        "zh": ("这个 sequence 参与的每一步占一行。prefill 之后，cached_token_count = 喂入的全部 token，generated 多了一个新 token；"
               "每次 decode 喂入最新生成的 token，写入它的 K/V（cached + 1），再采样下一个：最新的 token 总是已知但尚未缓存。"
               "开启分块 prefill 时，长 prompt 占多行（prefill 分块 k/n）：每块把它的 token 数加到 cached_token_count 上，"
               "直到最后一块才采样。"),
    },
    "rule_none": {"en": "This sequence has not run yet.", "zh": "这个 sequence 还没有运行。"},
    "rule_recent": {"en": "The newest {shown} of this sequence's {rows} rows.",
                    "zh": "这个 sequence 共 {rows} 行，这里显示最新的 {shown} 行。"},
    "rule_no_seqs": {"en": "No sequence yet: add a request.", "zh": "还没有 sequence：先添加一个请求。"},
    "col_step": {"en": "step", "zh": "步"},
    "col_phase": {"en": "phase", "zh": "阶段"},
    "col_fed": {"en": "token fed", "zh": "喂入的 token"},
    "col_slot": {"en": "slot written", "zh": "写入的 slot"},
    "col_cached": {"en": "cached before → after", "zh": "cached 之前 → 之后"},
    "col_generated": {"en": "generated_token_ids: count · newest as text", "zh": "generated_token_ids：个数 · 最新几个的文本"},
    "slots_more": {"en": "+{count} more runs", "zh": "另有 {count} 段"},
    "col_context": {"en": "context_len", "zh": "context_len"},
    "fed_many": {"en": "{count} tokens", "zh": "{count} 个 token"},
    "fed_fork": {"en": "none (forked)", "zh": "无（fork）"},
    "phase_fork": {"en": "fork", "zh": "fork"},
    "phase_chunk": {"en": "prefill chunk {chunk}/{chunks}", "zh": "prefill 分块 {chunk}/{chunks}"},
}
