"""Page 12 · Speculative decoding."""

STRINGS = {
    "title": {"en": "12 · Speculative decoding", "zh": "12 · 推测解码（speculative decoding）"},
    "intro": {
        "en": ("A cheap proposer guesses the next k tokens (here prompt lookup: what followed the same few tokens "
               "earlier in the sequence). The model checks all of them in one forward pass over k + 1 positions, "
               "reading the history through the block table; the guesses it agrees with are kept, plus one token of "
               "its own. The K/V of the rejected guesses were written too, so cached_token_count must be rolled back "
               "and the blocks they opened freed. This is the article's state rule at its hardest (section "
               "写入 slot 和读取 block table 必须一致): generated vs cached tokens."),
        "zh": ("一个廉价的 proposer 猜出接下来的 k 个 token（这里是 prompt lookup：在序列前面相同的几个 token 之后出现过什么）。"
               "模型在一次前向计算中检查全部猜测，共 k + 1 个位置，历史通过 block table 读取；与模型一致的猜测被保留，"
               "再加上模型自己的一个 token。被拒绝的猜测的 K/V 也已写入，所以 cached_token_count 必须回退，"
               "它们新开的 block 也要释放。这是文章中状态规则最难的情形（“写入 slot 和读取 block table 必须一致”一节）："
               "已生成 token 与已缓存 token 不能混淆。"),
    },
    "k": {"en": "k (guesses per step)", "zh": "k（每步猜测数）"},
    "scenario": {"en": "Prompts", "zh": "Prompt"},
    "scenario_copies": {"en": "Two recalls (the model copies: lookup guesses right)",
                        "zh": "两个 recall（模型照抄：lookup 猜得准）"},
    "scenario_mixed": {"en": "A recall and a count (lookup guesses wrong on the count)",
                       "zh": "一个 recall 和一个计数（计数上 lookup 常猜错）"},
    "forget": {"en": "forget to roll back cached_token_count", "zh": "忘记回退 cached_token_count"},
    "forget_help": {"en": ("The paged engine counts every fed token as cached, rejected guesses included; its "
                           "contiguous twin rolls back as it should."),
                    "zh": "paged 引擎把每个送入的 token 都算作已缓存，包括被拒绝的猜测；它的 contiguous 孪生引擎照常回退。"},
    "no_step": {"en": "No step yet: press “Next step” (the first step is the prefill of both prompts).",
                "zh": "还没有运行：点击“下一步”（第一步是两个 prompt 的 prefill）。"},
    "prefill_step": {"en": "Step {step}: a prefill, nothing to guess yet.",
                     "zh": "第 {step} 步：prefill，还没有可猜的内容。"},
    "row_msg": {
        "en": ("{seq}: {proposed} guessed, {accepted} kept, +1 of the model's own; cached_token_count {before} → "
               "{after}"),
        "zh": "{seq}：猜了 {proposed} 个，保留 {accepted} 个，再加模型自己的 1 个；cached_token_count {before} → {after}",
    },
    "row_plain": {"en": "{seq}: no guess (plain decode, one token); cached_token_count {before} → {after}",
                  "zh": "{seq}：没有猜测（普通 decode，一个 token）；cached_token_count {before} → {after}"},
    "sep": {"en": "; ", "zh": "；"},
    "row_discarded": {"en": "slots {slots} written, then discarded", "zh": "slot {slots} 写入后被丢弃"},
    "row_freed": {"en": "block {blocks} freed (it held only rejected guesses)",
                  "zh": "block {blocks} 被释放（里面只有被拒绝的猜测）"},
    "row_bug": {"en": "the rejected guesses stay counted as cached: {ahead} ahead of the state rule",
                "zh": "被拒绝的猜测仍被算作已缓存：比状态规则多出 {ahead} 个"},
    "say": {"en": "Step {step}: {kept} tokens from one forward pass", "zh": "第 {step} 步：一次前向计算得到 {kept} 个 token"},
    "metric_rate": {"en": "acceptance rate", "zh": "接受率"},
    "metric_per_pass": {"en": "tokens per sequence per decode step", "zh": "每个序列每个 decode 步的 token 数"},
    "metric_proposed": {"en": "guesses (kept)", "zh": "猜测数（保留）"},
    "metric_passes": {"en": "forward passes", "zh": "前向计算次数"},
    "step_title": {"en": "This step: fed tokens, their slots, the blocks the guesses took",
                   "zh": "这一步：送入的 token、它们的 slot、猜测占用的 block"},
    "step_notice": {
        "en": ("First cell: the last known token. Green: a guess the model agreed with (its K/V stay: history now). "
               "Vermillion: rejected; its slot was written and is simply left to be overwritten. Dashed: the model's "
               "own token, known but not cached until the next step. A block holding only rejected guesses goes "
               "back to the free queue (vLLM 0.32 keeps it for the next step instead)."),
        "zh": ("第一格：最后一个已知 token。绿色：模型认可的猜测（K/V 保留，成为历史）。朱红色：被拒绝；它的 slot 已写入，"
               "之后会被覆盖。虚线：模型自己的 token，已知但要到下一步才缓存。只含被拒绝猜测的 block 回到空闲队列"
               "（vLLM 0.32 则留给下一步使用）。"),
    },
    "cell_fed": {"en": "{seq} fed its last known token {token} at position {position} → slot {slot}",
                 "zh": "{seq} 送入最后一个已知 token {token}，位置 {position} → slot {slot}"},
    "cell_kept": {"en": "guess {token} at position {position} → slot {slot}: the model agreed, kept",
                  "zh": "猜测 {token}，位置 {position} → slot {slot}：模型认可，保留"},
    "cell_rejected": {"en": "guess {token} at position {position} → slot {slot}: rejected, written then discarded",
                      "zh": "猜测 {token}，位置 {position} → slot {slot}：被拒绝，写入后丢弃"},
    "cell_kept_bug": {"en": "guess {token} at position {position} → slot {slot}: rejected, yet counted as cached "
                            "(the bug)",
                      "zh": "猜测 {token}，位置 {position} → slot {slot}：被拒绝，却仍算作已缓存（bug）"},
    "cell_own": {"en": "the model's own token {token}: known, not yet cached (fed next step)",
                 "zh": "模型自己的 token {token}：已知，尚未缓存（下一步送入）"},
    "cell_slots": {"en": "slots", "zh": "slot"},
    "cell_blocks": {"en": "blocks", "zh": "block"},
    "cell_taken": {"en": "block {block}: taken for this step's guesses", "zh": "block {block}：为这一步的猜测分配"},
    "cell_freed": {"en": "block {block}: held only rejected guesses, freed by the rollback",
                   "zh": "block {block}：只含被拒绝的猜测，回退时释放"},
    "accept_title": {"en": "Guesses per step: proposed and kept", "zh": "每步的猜测：提出与保留"},
    "proposed_name": {"en": "proposed", "zh": "提出"},
    "accepted_name": {"en": "kept", "zh": "保留"},
    "axis_step": {"en": "step", "zh": "步"},
    "axis_tokens": {"en": "tokens", "zh": "token 数"},
    "accept_notice": {
        "en": ("On a copy the lookup is right, so a step keeps up to k + 1 tokens; on a count it is mostly wrong and "
               "a step keeps one, as plain decoding would. Either way the text equals plain greedy decoding's."),
        "zh": ("复述时 lookup 猜得准，一步最多得到 k + 1 个 token；计数时大多猜错，一步只得到一个，和普通解码一样。"
               "无论哪种情况，文本都与普通 greedy 解码完全相同。"),
    },
    "text_header": {"en": "Outputs: paged engine and contiguous twin", "zh": "输出：paged 引擎与 contiguous 孪生引擎"},
    "col_seq": {"en": "sequence", "zh": "序列"},
    "col_paged": {"en": "paged output", "zh": "paged 输出"},
    "col_twin": {"en": "twin output", "zh": "孪生引擎输出"},
    "twins_ok": {"en": "The twins agree token for token; every table holds blocks_needed(cached_token_count) blocks.",
                 "zh": "两个孪生引擎逐 token 一致；每个 block table 恰好持有 blocks_needed(cached_token_count) 个 block。"},
    "twins_bad": {"en": ("The paged output drifts from its twin at generated token {index}: later tokens were "
                         "written after stale K/V and read it as history."),
                  "zh": "paged 输出在第 {index} 个生成 token 处与孪生引擎分叉：之后的 token 写在过时的 K/V 之后，"
                        "并把它当作历史读取。"},
    "twins_wait": {"en": "The twins agree so far; with the rollback forgotten, step on until a guess is rejected.",
                   "zh": "目前两个孪生引擎一致；忘记回退时，继续单步直到有猜测被拒绝。"},
    "twins_stale": {
        "en": ("From step {step} on, rejected guesses stay counted as cached ({seq} was {ahead} ahead of the state "
               "rule then). The outputs still agree only because the stale K/V has not changed a greedy choice yet."),
        "zh": ("从第 {step} 步起，被拒绝的猜测一直被算作已缓存（{seq} 当时比状态规则多出 {ahead} 个）。输出目前仍然一致，"
               "只是因为过时的 K/V 还没有改变任何一次 greedy 选择。"),
    },
    "finished": {"en": "Both requests have finished.", "zh": "两个请求都已结束。"},
}
