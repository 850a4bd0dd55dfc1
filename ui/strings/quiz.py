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
    # page 11 · sliding window
    "window_ask": {"en": "The window is W = {window}. At the next step A's token {next} is written. Which physical "
                         "blocks go back to the free queue behind its window?",
                   "zh": "窗口 W = {window}。下一步写入 A 的 token {next}。哪些 physical block 会在它的窗口后面回到空闲队列？"},
    "window_why": {"en": "then token {after} is the next to compute: its window starts at token {first} = {after} + 1 "
                         "- {window}; the blocks of {bs} wholly before it that were still held: {blocks}",
                   "zh": "之后下一个要计算的是 token {after}：它的窗口从 token {first} = {after} + 1 - {window} 开始；完全在"
                         "它之前、仍被占用的 block（每个 {bs} 个 token）：{blocks}"},
}
