"""Page 4 · Engine (several keys are reused by page 6 · Sharing as "engine.<key>")."""

from paged.engine import WHY_ENGLISH

# The scheduler's reasons for a step, by code (see the scheduler, paged/engine/scheduler.py): English from the scheduler itself.
WHY_ZH = {
    "prefill": "prefill {count} 个等待中的 prompt，共 {tokens} 个 token",
    "prefill_chunk": "{seq} 的 prefill 分块：第 {start}–{end} 个 token（共 {total} 个）",
    "stop_max_seqs": "停止：已达到 max_num_seqs {max_num_seqs}",
    "stop_decode_budget": "停止：{seats} 个运行中的 sequence 会让一次 decode 超过 max_num_batched_tokens {budget}",
    "stop_tokens": "停止：{seq}（{tokens} 个 token）会超过 max_num_batched_tokens {budget}",
    "stop_blocks": "停止：{seq} 需要 {need} 个 block，空闲 {free} 个（watermark {watermark}）",
    "idle": "没有可运行的内容",
    "decode": "decode {count} 个运行中的 sequence，每个一个 token",
    "new_blocks": "{count} 个拿到了新 block（最后一个 block 已满或被共享）",
    "preempted": "以重算方式抢占了 {seqs}（pool 已满）",
    "swapped_out": "把 {seqs} 换出到 swap pool（复制了 {blocks} 个 block，pool 已满）",
    "swapped_in": "把 {seqs} 从 swap pool 换回（复制回 {blocks} 个 block）",
    "swap_full": "swap pool 已满：{seq} 需要 {need} 个 swap block，空闲 {free} 个（共 {swap_space} 个），改为重算",
    "swap_too_small": "swap pool 太小：{seq} 需要 {need} 个 swap block，比它总共的 {swap_space} 个还多，改为重算",
    "swap_wait": "等待中的 prompt 先等：swap pool 里的 {count} 个 sequence 先回来",
}

STRINGS = {
    # a page names a sequence by its letter (ui.engine_actions.why_values): "prefill chunk of C", not "of seq C"
    **{f"why_{code}": {"en": WHY_ENGLISH[code].replace("seq {seq}", "{seq}"), "zh": WHY_ZH[code]}
       for code in WHY_ENGLISH},
    "title": {"en": "4 · Engine", "zh": "4 · 推理引擎（Engine）"},
    "intro": {  # short: the seven modules in order are the chain's, in the folded reference
        "en": ("The whole mini vLLM on the shipped tiny Llama, one step at a time: Scheduler, Block Manager, model "
               "runner (slot_mapping, block tables), PagedAttention and sampler, with a contiguous-cache twin that "
               "runs the same steps so every token can be checked."),
        "zh": ("在自带的 tiny Llama 上一步一步运行整个 mini vLLM：Scheduler、Block Manager、model runner（slot_mapping、"
               "block table）、PagedAttention 与 sampler；一个使用连续 cache 的孪生引擎执行同样的步骤，每个 token 都可以核对。"),
    },
    "err_model": {"en": "The shipped model could not be loaded: {detail}",
                  "zh": "无法加载自带的模型：{detail}"},
    "fix_model": {"en": "Train it once with `python -m paged.model.train` (about 10 minutes on a CPU), then reload.",
                  "zh": "先运行一次 `python -m paged.model.train` 训练模型（CPU 上约 10 分钟），然后刷新页面。"},
    "scenario": {"en": "Scenario", "zh": "场景"},
    "scenario_placeholder": {"en": "Load a scenario…", "zh": "加载一个场景…"},
    "scenario_three": {"en": "Three prompts (default)", "zh": "三个 prompt（默认）"},
    "scenario_tiny_pool": {"en": "Tiny pool: preemption and recompute", "zh": "很小的 pool：抢占与重算"},
    "scenario_chunked": {"en": "Chunked prefill: a long prompt enters beside decodes",
                         "zh": "分块 prefill：长 prompt 与 decode 同步进入"},
    "scenario_empty": {"en": "Empty: add your own requests", "zh": "空：自己添加请求"},
    "chunked_prefill": {"en": "enable_chunked_prefill (long prompts in chunks, beside decodes)",
                        "zh": "enable_chunked_prefill（长 prompt 分块，与 decode 同一步）"},
    "chunked_prefill_help": {
        "en": ("vLLM v1's single rule: each step feeds every request the tokens between its cached_token_count and "
               "its length, within max_num_batched_tokens. A prompt longer than the budget is prefilled over "
               "several steps (phase \"mixed\" when decodes share the step); off, such a prompt is refused."),
        "zh": ("vLLM v1 的唯一规则：每一步在 max_num_batched_tokens 之内，给每个请求喂入从 cached_token_count 到其长度之间的 "
               "token。比预算长的 prompt 分几步完成 prefill（与 decode 同一步时阶段为 \"mixed\"）；关闭时这样的 prompt 会被拒绝。"),
    },
    "prefix_caching": {"en": "enable_prefix_caching (reuse full blocks of equal prompt prefixes)",
                       "zh": "enable_prefix_caching（复用相同 prompt 前缀的完整 block）"},
    "prefix_caching_help": {
        "en": ("A new prompt whose leading full blocks equal cached ones shares those physical blocks and starts "
               "with their tokens already cached; page 6 shows it in detail."),
        "zh": "新 prompt 开头的完整 block 若与已缓存的相同，就共享这些 physical block，其 token 一开始就算已缓存；第 6 页有详细演示。",
    },
    "watermark": {"en": "watermark (fraction of blocks kept free at admission)",
                  "zh": "watermark（接纳新请求时保留的空闲 block 比例）"},
    "max_num_batched_tokens": {"en": "max_num_batched_tokens (tokens per step)",
                               "zh": "max_num_batched_tokens（每步最多 token 数）"},
    "max_num_seqs": {"en": "max_num_seqs (sequences running at once)", "zh": "max_num_seqs（同时运行的 sequence 数）"},
    "restarted": {"en": "Settings changed: the same requests start again from step 0.",
                  "zh": "设置已更改：同样的请求从第 0 步重新开始。"},
    # request errors: err_<code> / fix_<code> (codes from lessons.engine_requests.RequestError)
    "err_empty": {"en": "The prompt is empty (spaces and invisible characters do not count).",
                  "zh": "prompt 是空的（空格和不可见字符不算）。"},
    "fix_empty": {"en": "Type some text, or pick a preset prompt.", "zh": "输入一些文字，或选择一个预设 prompt。"},
    "err_too_long": {"en": "The prompt has {chars} characters; this page takes at most {max_chars}.",
                     "zh": "prompt 有 {chars} 个字符；本页最多接受 {max_chars} 个。"},
    "fix_too_long": {"en": "Shorten the prompt to {max_chars} characters or fewer.",
                     "zh": "把 prompt 缩短到 {max_chars} 个字符以内。"},
    "err_rejected": {"en": "The engine refused this request: {message}", "zh": "引擎拒绝了这个请求：{message}"},
    "fix_rejected": {"en": ("Change the value the engine names above (prompt, max_tokens, n or temperature) and add "
                            "the request again; the requests already added are unchanged."),
                     "zh": "修改上面引擎指出的那个值（prompt、max_tokens、n 或 temperature），然后重新添加；已添加的请求不受影响。"},
    # why the engine refused a request, with the numbers for its fix (lessons.engine_checks.refusal)
    "err_positions": {
        "en": ("The request needs {tokens} positions (prompt {prompt} tokens + max_tokens), but the model has only "
               "{max_positions}."),
        "zh": "这个请求需要 {tokens} 个位置（prompt {prompt} 个 token + max_tokens），但模型只有 {max_positions} 个位置。",
    },
    "fix_positions": {"en": "Lower max_tokens to {fit} or less, or shorten the prompt.",
                      "zh": "把 max_tokens 降到 {fit} 或更小，或者缩短 prompt。"},
    "err_pool": {
        "en": ("The request's {tokens} tokens need {need} blocks, but the pool can give at most {usable}: it could "
               "never run, even alone."),
        "zh": "这个请求的 {tokens} 个 token 需要 {need} 个 block，但 pool 最多只能提供 {usable} 个：即使单独运行也放不下。",
    },
    "fix_pool": {
        "en": ("Raise num_blocks to {min_blocks} or more in the sidebar, or ask for fewer tokens: at most {fit_tokens} "
               "in all (prompt + max_tokens)."),
        "zh": "在侧边栏把 num_blocks 调到 {min_blocks} 或更大，或者减少 token：总数（prompt + max_tokens）最多 {fit_tokens} 个。",
    },
    "err_samples": {
        "en": ("n = {n} parallel samples could never run together: they need up to {need} blocks (the pool can give "
               "{usable}) and {n} sequence slots (max_num_seqs = {max_num_seqs})."),
        "zh": ("n = {n} 个并行样本永远无法同时运行：它们最多需要 {need} 个 block（pool 最多能给 {usable} 个），"
               "以及 {n} 个 sequence 位置（max_num_seqs = {max_num_seqs}）。"),
    },
    "fix_samples": {"en": "Lower n to {n_fit}, or lower max_tokens, or raise num_blocks in the sidebar.",
                    "zh": "把 n 降到 {n_fit}，或者减小 max_tokens，或者在侧边栏调大 num_blocks。"},
    "err_batch_tokens": {
        "en": ("The request has {tokens} tokens, more than one step may schedule (max_num_batched_tokens = {budget}): "
               "after a preemption it could not be recomputed."),
        "zh": "这个请求有 {tokens} 个 token，超过了一步能调度的数量（max_num_batched_tokens = {budget}）：被抢占后无法重新计算。",
    },
    "fix_batch_tokens": {
        "en": ("Raise max_num_batched_tokens to {tokens} or more in the sidebar, turn on enable_chunked_prefill "
               "(long sequences then run in chunks), or ask for fewer tokens: at most {budget} in all (prompt + "
               "max_tokens)."),
        "zh": ("在侧边栏把 max_num_batched_tokens 调到 {tokens} 或更大，或者开启 enable_chunked_prefill（长序列分块运行），"
               "或者减少 token：总数（prompt + max_tokens）最多 {budget} 个。"),
    },
    "err_out_of_range": {"en": "{label} = {value} is outside its range {lo}–{hi}: nothing was added.",
                         "zh": "{label} = {value} 超出了范围 {lo}–{hi}：没有添加任何请求。"},
    "fix_out_of_range": {"en": "Type a value from {lo} to {hi} in “{label}”, then press Add again.",
                         "zh": "在“{label}”中输入 {lo} 到 {hi} 之间的值，然后再点击添加。"},
    "err_not_a_number": {"en": "{label}: “{text}” is not a whole number, so nothing was added.",
                         "zh": "{label}：“{text}”不是整数，所以没有添加任何请求。"},
    "fix_not_a_number": {"en": "Type a whole number from {lo} to {hi} in “{label}”, then press Add again.",
                         "zh": "在“{label}”中输入 {lo} 到 {hi} 之间的整数，然后再点击添加。"},
    # the slot_mapping cells' tooltip (viz.cells.SlotWords, one key slots_<field> per field)
    "slots_token": {"en": "{seq} token {position} → logical block {logical}, offset {offset} → slot {slot} ({where})",
                    "zh": "{seq} 的 token {position} → 逻辑 block {logical}，块内偏移 {offset} → slot {slot}（{where}）"},
    "slots_place": {"en": "physical block {block}, offset {offset}", "zh": "physical block {block}，块内偏移 {offset}"},
    "slots_skipped": {"en": "skipped: -1 is no slot, nothing is written", "zh": "跳过：-1 表示没有 slot，不写入"},
    "seed_help": {"en": "A whole number from 0 to 9999: the same seed samples the same tokens.",
                  "zh": "0 到 9999 之间的整数：相同的 seed 采样出相同的 token。"},
    # the engine raised while stepping, or while replaying a link
    "err_step_failed": {"en": "The engine stopped with an error during a step: {message}",
                        "zh": "引擎在执行一步时出错并停止：{message}"},
    "fix_step_failed": {
        "en": ("Press Reset: every request is replayed from step 0. Export keeps the steps that ran. If the same "
               "step fails again, raise num_blocks in the sidebar or add fewer requests."),
        "zh": "点击“重置”：所有请求从第 0 步重新回放。“导出”可以保存已经运行的步骤。如果同一步再次出错，请在侧边栏调大 num_blocks，或者少添加一些请求。",
    },
    "err_replay_failed": {"en": "The link's steps could not all be replayed: {message}",
                          "zh": "链接中的步骤无法全部回放：{message}"},
    "fix_replay_failed": {
        "en": ("The page went back to step 0 with the same requests. Press “Next step” to find the step that fails, or "
               "raise num_blocks in the sidebar."),
        "zh": "页面已回到第 0 步，请求保持不变。点击“下一步”找出出错的那一步，或者在侧边栏调大 num_blocks。",
    },
    "err_too_many": {"en": "This page keeps at most {max_requests} requests.", "zh": "本页最多保留 {max_requests} 个请求。"},
    "fix_too_many": {"en": "Press Reset or load a scenario to start over.", "zh": "点击“重置”或加载一个场景重新开始。"},
    # a new request
    "add_header": {"en": "Add a request", "zh": "添加请求"},
    "preset": {"en": "Preset prompt", "zh": "预设 prompt"},
    "preset_recall_fox": {"en": "recall: the quick brown fox", "zh": "复述：the quick brown fox"},
    "preset_recall_paged": {"en": "recall: PagedAttention", "zh": "复述：PagedAttention"},
    "preset_recall_code": {"en": "recall: a line of code", "zh": "复述：一行代码"},
    "preset_count": {"en": "continue: counting", "zh": "续写：数数"},
    "preset_alphabet": {"en": "continue: the alphabet", "zh": "续写：字母表"},
    "prompt": {"en": "Prompt", "zh": "提示词"},
    "task": {"en": "Task", "zh": "任务"},
    "task_recall": {"en": "recall", "zh": "复述"},
    "task_continue": {"en": "continue", "zh": "续写"},
    "task_help": {
        "en": ("The shipped model was trained on two things: recall (BOS text SEP → it copies the text, then stops "
               "with EOS) and simple continuations (counting, alphabets). Other text gives odd but harmless output."),
        "zh": ("自带模型只训练了两件事：复述（BOS 文本 SEP → 复制文本，然后以 EOS 结束）和简单的续写（数数、字母表）。"
               "其他文本会得到奇怪但无害的输出。"),
    },
    "max_tokens": {"en": "max_tokens", "zh": "max_tokens"},
    "temperature": {"en": "temperature (0 = greedy)", "zh": "temperature（0 = 贪心）"},
    "seed": {"en": "seed (sampling)", "zh": "seed（采样）"},
    "add": {"en": "Add request", "zh": "添加请求"},
    "added": {"en": "Request {seq} joined the waiting queue.", "zh": "请求 {seq} 进入了等待队列。"},
    # actions
    "run": {"en": "Run to end", "zh": "运行到结束"},
    "running": {"en": "Stepping both twins…", "zh": "两个孪生引擎运行中…"},
    "run_capped": {"en": "Run to end stopped after {steps} steps: one press runs at most {steps}, so everyone's "
                         "clicks on this server stay quick. Press it again to go on.",
                   "zh": "“运行到结束”在 {steps} 步后暂停：每按一次最多运行 {steps} 步，这样服务器上每个人的点击都能保持流畅。"
                         "再按一次即可继续。"},
    "step_count": {"en": "**{steps}** steps run.", "zh": "已运行 **{steps}** 步。"},
    "no_step_possible": {"en": "No step can run: no request is waiting. Add one above, or change the setting a "
                               "refusal names; “Next step” stays off until then.",
                         "zh": "现在无法运行任何一步：没有等待中的请求。请在上方添加请求，或修改拒绝信息中指出的设置；在此之前“下一步”不可用。"},
    "refused_request": {"en": "Not added: the request “{prompt}” (arriving at step {step}).",
                        "zh": "未添加：请求“{prompt}”（在第 {step} 步到达）。"},
    "no_step_yet": {"en": "No step yet: the requests wait in the queue. Press “Next step”.",
                    "zh": "还没有运行任何一步：请求在队列中等待。点击“下一步”。"},
    "step_info": {"en": "**Step {step} · {phase}.** Why: {reason}.", "zh": "**第 {step} 步 · {phase}。** 原因：{reason}。"},
    "budget_tokens": {"en": "tokens fed / budget", "zh": "输入 token / 上限"},
    "budget_seqs": {"en": "sequences run / budget", "zh": "运行的 sequence / 上限"},
    "budget_blocks": {"en": "free blocks / pool", "zh": "空闲 block / pool"},
    "step_time": {"en": "step time (paged)", "zh": "单步耗时（paged）"},
    "preempted_msg": {
        "en": ("Preempted by recompute: {seqs}. The pool had no free block for every running sequence's next "
               "token, so the newest sequence gave all its blocks back and returned to the front of the waiting "
               "queue; its cached_token_count is 0 until a later prefill recomputes prompt + generated tokens."),
        "zh": ("被抢占（recompute）：{seqs}。pool 中没有足够的空闲 block 给每个运行中的 sequence 写下一个 token，所以最新的 "
               "sequence 归还了它全部的 block，回到等待队列的最前面；它的 cached_token_count 变为 0，直到之后的 prefill "
               "重新计算 prompt 和已生成的 token。"),
    },
    "finished_msg": {"en": "Finished: {seqs}. Their blocks went back to the free list.",
                     "zh": "已结束：{seqs}。它们的 block 回到了 free list。"},
    "pending": {"en": "{count} request(s) will arrive after step(s) {steps}.",
                "zh": "{count} 个请求将在第 {steps} 步之后到达。"},
    "all_done": {"en": "Every request has finished. Add a request, press Reset, or load a scenario.",
                 "zh": "所有请求都已完成。可以添加请求、点击“重置”或加载场景。"},
    # figures
    "queues_title": {"en": "The Scheduler's queues (outlined: scheduled this step; ring: preempted)",
                     "zh": "Scheduler 的队列（粗框：本步被调度；圆环：被抢占）"},
    "status_waiting": {"en": "waiting", "zh": "等待中"},
    "status_running": {"en": "running", "zh": "运行中"},
    "status_finished": {"en": "finished", "zh": "已完成"},
    "reason_eos": {"en": "eos", "zh": "遇到 EOS"},
    "reason_stop": {"en": "stop string", "zh": "遇到停止串"},
    "reason_length": {"en": "max_tokens reached", "zh": "达到 max_tokens"},
    "reason_abort": {"en": "aborted", "zh": "已中止"},
    "reason_error": {"en": "error (its step failed and was rolled back)", "zh": "出错（其所在的 step 失败并已回滚）"},
    "lane_waiting": {"en": "waiting", "zh": "等待中"},
    "lane_running": {"en": "running", "zh": "运行中"},
    "lane_finished": {"en": "finished", "zh": "已完成"},
    # a square's tooltip in the queues (viz.cells.QueueWords: the lane_<field> keys); seq_id is the code's name
    "lane_cell": {"en": "{seq} (seq {seq_id}): {lane}", "zh": "{seq}（seq_id {seq_id}）：{lane}"},
    "queues_notice": {
        "en": ("A step is either prefill (waiting prompts, first come first served, while they fit the token, "
               "sequence and block budgets) or decode (one token for every running sequence). Prefill goes first "
               "whenever a waiting prompt fits."),
        "zh": ("每一步要么是 prefill（按先来先服务处理等待中的 prompt，直到超出 token、sequence 或 block 预算），要么是 "
               "decode（每个运行中的 sequence 生成一个 token）。只要有等待的 prompt 放得下，就先做 prefill。"),
    },
    "pool_title": {"en": "Physical pool: {free} of {num_blocks} blocks free (cell = sequence + token_index)",
                   "zh": "物理 pool：{num_blocks} 个 block 中有 {free} 个空闲（格子 = sequence + token_index）"},
    "pool_notice": {
        "en": ("Outlined cells are the slots written this step. A sequence's blocks are scattered over the pool, "
               "and a new one is taken only when its last block is full; pale cells are reserved but not written."),
        "zh": ("加粗边框的格子是本步写入的 slot。一个 sequence 的 block 分散在 pool 中，只有最后一个 block 写满时才会取新 "
               "block；浅色格子是已预留但尚未写入的 slot。"),
    },
    "slots_title": {"en": "This step's slot_mapping ({phase}): one cell per fed token, the slot it is written to",
                    "zh": "本步的 slot_mapping（{phase}）：每个输入 token 一格，格中是它写入的 slot"},
    "slots_notice": {
        "en": ("Prefill feeds the whole prompt (after a preemption: prompt + generated tokens); decode feeds one "
               "token per sequence, at position cached_token_count. slot = physical_block_id × block_size + "
               "block_offset."),
        "zh": ("prefill 输入整个 prompt（被抢占后：prompt 加已生成的 token）；decode 每个 sequence 只输入一个 token，"
               "位置是 cached_token_count。slot = physical_block_id × block_size + block_offset。"),
    },
    "tables_title": {"en": "block_table before → after this step (new blocks in bold)",
                     "zh": "本步前后的 block_table（新 block 加粗）"},
    "no_tables": {"en": "No sequence held blocks this step.", "zh": "本步没有 sequence 持有 block。"},
    "tables_notice": {
        "en": "A table grows by one block only when a decode crosses a block boundary; — means the sequence gave its "
              "blocks back (finished or preempted).",
        "zh": "只有 decode 跨过 block 边界时，block table 才会增加一个 block；— 表示该 sequence 归还了 block（结束或被抢占）。",
    },
    "col_seq": {"en": "sequence", "zh": "序列"},
    "col_before": {"en": "before", "zh": "之前"},
    "col_after": {"en": "after", "zh": "之后"},
    "text_header": {"en": "The text as it grows", "zh": "逐步生成的文本"},
    "col_prompt": {"en": "prompt", "zh": "提示词"},
    "col_output": {"en": "output so far", "zh": "目前的输出"},
    "col_newest": {"en": "this step's token", "zh": "本步的 token"},
    "col_status": {"en": "status", "zh": "状态"},
    "col_generated": {"en": "generated_token_ids (count)", "zh": "generated_token_ids（个数）"},
    "col_preemptions": {"en": "preemptions", "zh": "被抢占次数"},
    "no_requests": {"en": "No requests yet: add one above or load a scenario.",
                    "zh": "还没有请求：在上方添加一个，或加载一个场景。"},
    "cache_title": {"en": "cached_token_count (dots) against the rule prompt_len + generated − 1 (dotted line)",
                    "zh": "cached_token_count（圆点）与规则 prompt_len + generated − 1（虚线）"},
    "cache_recent": {"en": ", the newest {shown} of {steps} steps", "zh": "，共 {steps} 步中最新的 {shown} 步"},
    "rule_name": {"en": "prompt_len + generated − 1", "zh": "prompt_len + generated − 1"},
    "axis_step": {"en": "step", "zh": "步"},
    "axis_tokens": {"en": "tokens", "zh": "token 数"},
    "rule_tip": {"en": "{seq} step {step}: {name} = {value}", "zh": "{seq} 第 {step} 步：{name} = {value}"},
    # the twins' chart tooltips (viz.cells.TwinWords, one key twin_<field> per field)
    "twin_bar": {"en": "step {step}: {diff} {verdict}", "zh": "第 {step} 步：{diff} {verdict}"},
    "twin_tolerance": {"en": "tolerance {tolerance}", "zh": "容差 {tolerance}"},
    "cache_notice": {
        "en": ("After every step that ran a sequence, its dots sit on its dotted line: the newest token is known but "
               "not yet cached, so cached_token_count = prompt_len + generated − 1. A preempted sequence drops to 0 "
               "and rejoins the line at its recompute."),
        "zh": ("每次运行过某个 sequence 之后，它的圆点都落在虚线上：最新的 token 已知但还没有写入 cache，所以 "
               "cached_token_count = prompt_len + generated − 1。被抢占的 sequence 降到 0，重算之后回到虚线上。"),
    },
    "reference_fold": {"en": "More on this step: the seven modules, its addresses, the text, vLLM alongside",
                       "zh": "这一步的更多内容：七个模块、地址、文本，以及并排的 vLLM"},
    "twins_fold": {"en": "Why they agree, and the difference at each step", "zh": "为什么一致，以及每一步的差异"},
    "addresses_fold": {"en": "This step's addresses ({phase}): slot_mapping and block tables",
                       "zh": "这一步的地址（{phase}）：slot_mapping 与 block table"},
    "twins_header": {"en": "Paged vs contiguous twin, token by token", "zh": "paged 与连续 cache 孪生引擎逐 token 对比"},
    "twins_ok": {"en": ":material/check_circle: The twins agree: same schedule and same tokens at every step; max |Δlogits| = {worst} "
                       "(tolerance {tol}).",
                 "zh": ":material/check_circle: 两个孪生引擎一致：每一步调度相同、token 相同；最大 |Δlogits| = {worst}（容差 {tol}）。"},
    "twins_bad": {"en": ":material/cancel: The twins differ: max |Δlogits| = {worst} (tolerance {tol}) or a token / schedule differs.",
                  "zh": ":material/cancel: 两个孪生引擎不一致：最大 |Δlogits| = {worst}（容差 {tol}），或某个 token / 调度不同。"},
    "twins_title": {"en": "max |paged − contiguous| logits per step", "zh": "每一步 paged 与连续 cache 的最大 logits 差"},
    "twins_notice": {
        "en": ("The contiguous twin keeps each sequence's K/V in one array, with the same scheduler decisions. Only "
               "where K/V live differs, so the logits agree up to float rounding (far below the {tol} tolerance) and the "
               "tokens are identical."),
        "zh": ("连续 cache 孪生引擎把每个 sequence 的 K/V 存在一个数组中，调度决策完全相同。只有 K/V 的存放位置不同，"
               "所以 logits 只差浮点舍入（远小于 {tol} 的容差），token 完全相同。"),
    },
    "twins_schedules_differ": {
        "en": "The twins' schedules differ: prefix caching saves the paged engine steps the contiguous twin has to "
              "compute, so they are compared token by token (the logits that produced the same generated token).",
        "zh": "两个引擎的调度不同：prefix caching 让 paged 引擎省下了 contiguous 孪生引擎必须计算的步骤，"
              "因此逐个 token 比较（比较产生同一个生成 token 的 logits）。"},
}
