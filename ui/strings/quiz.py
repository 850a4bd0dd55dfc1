"""Predict, then reveal (`?quiz=1` on pages 1, 3 and 4): questions, reveals and the session's score."""

STRINGS = {
    "header": {"en": "Predict, then reveal", "zh": "先预测，再揭晓"},
    "your_guess": {"en": "Your prediction", "zh": "你的预测"},
    "reveal": {"en": "Reveal", "zh": "揭晓"},
    "another": {"en": "Another question", "zh": "换一道题"},
    "right": {"en": "Right: {answer}.", "zh": "答对了：{answer}。"},
    "wrong": {"en": "Not quite: you said {guess}, the answer is {answer}.",
              "zh": "不太对：你选了 {guess}，答案是 {answer}。"},
    "score": {"en": "Score this session: {right} of {asked}", "zh": "本次会话得分：{asked} 题中答对 {right} 题"},
    "watch": {"en": "Now take the step and watch it happen.", "zh": "现在执行这一步，亲眼看看。"},
    "none_batch": {"en": "No question now: nothing is running, or the next decode would be refused (pool full).",
                   "zh": "现在没有题目：没有运行中的 sequence，或者下一次 decode 会被拒绝（pool 已满）。"},
    "none_engine": {"en": "No question now: every request has finished.", "zh": "现在没有题目：所有请求都已结束。"},
    "none_choice": {"en": "none", "zh": "没有"},
    # the swap page
    "swap_q_blocks": {"en": "Swap mode, step {step}: {seq} is preempted. How many blocks go to the swap pool?",
                      "zh": "swap 模式，第 {step} 步：{seq} 被抢占。有多少个 block 被复制到 swap pool？"},
    "swap_a_blocks": {"en": "Every block of {seq}'s block table is copied, one swap block each: {n}.",
                      "zh": "{seq} 的 block table 中每个 block 各复制到一个 swap block：{n} 个。"},
    "swap_q_tokens": {"en": "Recompute mode, step {step}: {seq} comes back. How many tokens does its prefill feed?",
                      "zh": "重算模式，第 {step} 步：{seq} 回来了。它的 prefill 要输入多少个 token？"},
    "swap_a_tokens": {"en": "Its cache was forgotten (cached_token_count 0): prompt and generated tokens, {n}.",
                      "zh": "它的缓存已被丢弃（cached_token_count 为 0）：prompt 加已生成的 token，共 {n} 个。"},
    # page 12 · speculative decoding
    "spec_q": {"en": ("{seq} was fed {fed} tokens from cached_token_count {before} (its last known token and "
                      "{proposed} guesses); the model kept {accepted} of the guesses. What is its cached_token_count "
                      "now?"),
               "zh": ("{seq} 从 cached_token_count {before} 起送入了 {fed} 个 token（最后一个已知 token 和 {proposed} 个猜测）；"
                      "模型保留了其中 {accepted} 个猜测。它现在的 cached_token_count 是多少？")},
    "spec_why": {"en": ("{before} + 1 (the last known token) + {accepted} kept guesses = {answer}; the {rejected} "
                        "rejected ones were written but rolled back, and the model's own new token is not cached yet."),
                 "zh": ("{before} + 1（最后一个已知 token）+ {accepted} 个保留的猜测 = {answer}；{rejected} 个被拒绝的猜测虽已写入，"
                        "但被回退，模型自己的新 token 还未缓存。")},
    "none_spec": {"en": "No question now: the step shown speculated nothing to ask about (or the rollback is broken).",
                  "zh": "现在没有题目：显示的这一步没有可问的推测（或者回退已被破坏）。"},
    # page 1 · address translation
    "ask_physical_block_id": {"en": "Token {token} (block_size {block_size}): which physical block holds it?",
                              "zh": "token {token}（block_size {block_size}）：它在哪个 physical block 中？"},
    "ask_block_offset": {"en": "Token {token} (block_size {block_size}): at which block_offset?",
                         "zh": "token {token}（block_size {block_size}）：它的 block_offset 是多少？"},
    "ask_slot": {"en": "Token {token} (block_size {block_size}): which slot of the pool holds its K/V?",
                 "zh": "token {token}（block_size {block_size}）：它的 K/V 存在 pool 的哪个 slot？"},
    "why_address": {
        "en": ("{token} // {block_size} = logical block {logical}; block_table[{logical}] = physical block "
               "{physical}; {token} % {block_size} = offset {offset}; slot = {physical}·{block_size} + {offset} = "
               "{slot}."),
        "zh": ("{token} // {block_size} = logical block {logical}；block_table[{logical}] = physical block {physical}；"
               "{token} % {block_size} = offset {offset}；slot = {physical}·{block_size} + {offset} = {slot}。"),
    },
    # page 3 · batch decode
    "ask_new_block": {"en": "At the next decode step, which sequences take a new block from the free list?",
                      "zh": "下一次 decode 时，哪些 sequence 会从空闲链表拿到新 block？"},
    "why_full": {"en": "{seq}: {cached} tokens fill its {blocks} block(s) of {block_size}, so token {cached} starts a "
                       "new one",
                 "zh": "{seq}：{cached} 个 token 填满了它的 {blocks} 个 block（每个 {block_size}），所以 token {cached} "
                       "要用新 block"},
    "why_room": {"en": "{seq}: {cached} tokens in {blocks} block(s) of {block_size}: its last block still has room",
                 "zh": "{seq}：{blocks} 个 block（每个 {block_size}）中有 {cached} 个 token：最后一个 block 还有空位"},
    # page 4 · engine
    "ask_cached_after": {"en": "{seq} is {status} with cached_token_count {before}. What will it be after the next "
                               "step?",
                         "zh": "{seq} 当前{status}，cached_token_count 为 {before}。下一步之后它是多少？"},
    "why_prefill": {"en": "{seq} is prefilled: {fed} token(s) from index {start} are fed and written at once, so "
                          "cached becomes {after}",
                    "zh": "{seq} 进行 prefill：从索引 {start} 开始的 {fed} 个 token 一次喂入并写入，cached 变为 {after}"},
    "why_decode": {"en": "{seq} decodes: its newest token is fed and its K/V written, {before} → {after}",
                   "zh": "{seq} 进行 decode：喂入最新的 token 并写入它的 K/V，{before} → {after}"},
    "why_waits_prefill": {"en": "the step is a prefill of {seqs}; running {seq} waits one step, still {before}",
                          "zh": "这一步是 {seqs} 的 prefill；运行中的 {seq} 等待一步，仍为 {before}"},
    "why_waits_budget": {"en": "{seqs} use up max_num_batched_tokens ({budget}) this step; running {seq} gets no token "
                               "and stays at {before}",
                         "zh": "{seqs} 这一步用完了 max_num_batched_tokens（{budget}）；运行中的 {seq} 没有分到 token，仍为 {before}"},
    "why_stays_waiting": {"en": "{seq} is not admitted this step and stays waiting: still {before}",
                          "zh": "{seq} 这一步没有被接纳，继续等待：仍为 {before}"},
    "why_preempted": {"en": "the pool cannot give every running sequence its next slot: {seq}, the newest, is "
                            "preempted by recompute and its cache forgotten ({before} → 0)",
                      "zh": "pool 无法给每个运行中的 sequence 提供下一个 slot：最新的 {seq} 被以重算方式抢占，cache 被丢弃"
                            "（{before} → 0）"},
    "why_scheduler": {"en": "the scheduler: {why}", "zh": "调度器：{why}"},
    "why_prefill_chunk": {"en": "{seq} gets a prompt chunk: {fed} token(s) from index {start} are written, so cached "
                                "becomes {after} of its {total}; nothing is sampled before the last chunk",
                          "zh": "{seq} 得到一个 prompt 分块：从索引 {start} 开始的 {fed} 个 token 被写入，cached 变为 {after}"
                                "（共 {total} 个）；最后一块之前不采样"},
    "ask_prefix_hits": {"en": "Prefix caching is on. {seq} ({tokens} tokens, blocks of {block_size}) is admitted at "
                              "the next step. How many of its blocks will be prefix-cache hits?",
                        "zh": "prefix caching 已开启。{seq}（{tokens} 个 token，每个 block {block_size} 个）将在下一步被接纳。"
                              "它有几个 block 会命中 prefix cache？"},
    "why_prefix_hit": {"en": "{seq}'s first {hits} full block(s) hold the same tokens, from the start, as cached "
                             "blocks {blocks}: it shares them, and its cached_token_count starts at {cached}",
                       "zh": "{seq} 的前 {hits} 个完整 block 从头起与已缓存的 block {blocks} 内容相同：直接共享它们，"
                             "cached_token_count 从 {cached} 开始"},
    "why_prefix_miss": {"en": "no cached block holds {seq}'s first {block_size} tokens (a hit needs equal tokens from "
                              "the start, block by block), so every block is computed",
                        "zh": "没有已缓存的 block 存有 {seq} 的前 {block_size} 个 token（命中要求从头起逐块 token 相同），"
                              "所以每个 block 都要计算"},
    "why_prefix_rule": {"en": "at most {most} can hit: only full blocks before the one holding the last token",
                        "zh": "最多 {most} 个可以命中：只有最后一个 token 所在 block 之前的完整 block"},
    # page 9 · beam search
    "none_beam": {"en": "No question now: the search has ended.", "zh": "现在没有题目：搜索已经结束。"},
    "beam_copies": {"en": "Step {step} decodes {beams} beams: how many blocks will it copy (copy-on-write)?",
                    "zh": "第 {step} 步要 decode {beams} 个 beam：它会复制（copy-on-write）多少个 block？"},
    "beam_freed": {"en": "Step {step} ({beams} beams): how many blocks will it free (pruned or finished beams)?",
                   "zh": "第 {step} 步（{beams} 个 beam）：它会释放多少个 block（被剪枝或结束的 beam）？"},
    "why_beam_copies": {
        "en": ("{n}: a beam copies its last block only when that block is shared (ref count > 1) and not full; "
               "a full last block needs a fresh block instead, with nothing to copy."),
        "zh": ("{n}：只有当最后一个 block 被共享（ref count > 1）且没写满时，beam 才复制它；最后一个 block 写满时，"
               "beam 改为申请一个新 block，不需要复制。")},
    "why_beam_freed": {
        "en": ("{n}: a pruned beam (or, at the end, every beam) drops a reference to each of its blocks; only "
               "blocks whose ref count reaches 0 (held by no other beam) become free."),
        "zh": "{n}：被剪枝的 beam（或搜索结束时的每个 beam）对它的每个 block 减少一个引用；只有 ref count 降到 0（没有其他 beam 持有）的 block 才变为空闲。"},
    # page 11 · sliding window
    "window_ask": {"en": "The window is W = {window}. At the next step A's token {next} is written. Which physical "
                         "blocks go back to the free queue behind its window?",
                   "zh": "窗口 W = {window}。下一步写入 A 的 token {next}。哪些 physical block 会在它的窗口后面回到空闲队列？"},
    "window_why": {"en": "then token {after} is the next to compute: its window starts at token {first} = {after} + 1 "
                         "- {window}; the blocks of {bs} wholly before it that were still held: {blocks}",
                   "zh": "之后下一个要计算的是 token {after}：它的窗口从 token {first} = {after} + 1 - {window} 开始；完全在"
                         "它之前、仍被占用的 block（每个 {bs} 个 token）：{blocks}"},
}
