"""Page 3 · Batch decode."""

STRINGS = {
    "title": {"en": "3 · Batch decode", "zh": "3 · 批量解码（batch decode）"},
    "intro": {
        "en": ("Sequences A, B and C come from the article's batch (section 扩展到 batch). They share one pool "
               "of physical blocks, each with its own block_table and context_len. A decode step gives every "
               "running sequence one new token: the block manager hands out a slot, the token's K/V is written "
               "there, and attention reads the whole history back through the table."),
        "zh": ("sequence A、B、C 取自文章“扩展到 batch”一节，它们共用一个 physical block pool，"
               "各自有自己的 block_table 和 context_len。每个 decode step 给每个运行中的 sequence 增加一个 "
               "token：Block Manager 分配一个 slot，这个 token 的 "
               "K/V 写到那里，attention 再通过 block table 读回全部历史。"),
    },
    "which": {"en": "Sequence", "zh": "序列"},
    "finish": {"en": "Finish", "zh": "结束"},
    "none_running": {"en": "none running", "zh": "没有运行中的"},
    "new_len": {"en": "Prompt length", "zh": "prompt 长度"},
    "new_len_help": {"en": "Tokens in the new sequence's prompt: a whole number from 1 to {hi}.",
                     "zh": "新 sequence 的 prompt 中的 token 数：1 到 {hi} 之间的整数。"},
    "add": {"en": "Add sequence", "zh": "添加 sequence"},
    "replay_stopped": {"en": "The link's steps could only be replayed up to step {applied} of {total}.",
                       "zh": "链接中的步骤只能重放到第 {applied} 步（共 {total} 步）。"},
    "start_seed": {
        "en": ("Start: the article's batch. A = [7, 2, 9] with 10 tokens, B = [4, 1] with 6, C = [8, 5, 3, 6] with "
               "15. Press “Next step”."),
        "zh": ("开始：文章中的 batch。A = [7, 2, 9]，10 个 token；B = [4, 1]，6 个；C = [8, 5, 3, 6]，15 个。"
               "点击“下一步”。"),
    },
    "start_free_list": {
        "en": ("Start: the article's context lengths (10, 6, 15) with blocks taken from the free list, because the "
               "article's block tables do not fit this block_size / num_blocks."),
        "zh": ("开始：使用文章中的长度（10、6、15），但 block 从 free list 中分配，因为文章的 block table 不适用于当前的 "
               "block_size / num_blocks。"),
    },
    "start_short": {"en": "The pool is too small for the whole starting batch: {detail}",
                    "zh": "pool 太小，放不下完整的初始 batch：{detail}"},
    "decoded": {"en": "Step {step}: each running sequence wrote its newest token's K/V at {writes} (outlined below).",
                "zh": "第 {step} 步：每个运行中的 sequence 把最新 token 的 K/V 写到 {writes}（下图加粗边框）。"},
    "new_block": {
        "en": ("{seq}'s last block was full ({block_size} of {block_size} slots), so the block manager took "
               "physical block {blocks} from the free list."),
        "zh": "{seq} 的最后一个 block 已满（{block_size}/{block_size} 个 slot），Block Manager 从 free list 取出了 "
              "physical block {blocks}。",
    },
    "finished": {"en": "{seq} finished: blocks {blocks} went back to the free list.",
                 "zh": "{seq} 已结束：block {blocks} 回到了 free list。"},
    "added": {"en": "{seq} was added: its prompt was written into blocks {blocks} taken from the free list.",
              "zh": "添加了 {seq}：它的 prompt 写入了从 free list 取出的 block {blocks}。"},
    "refused_decode_pool_full": {
        "en": ("No decode step: {need} sequence(s) need a new block but {free} are free. Finish a sequence to return "
               "its blocks, then step again."),
        "zh": ("无法执行 decode：{need} 个 sequence 需要新 block，但只有 {free} 个空闲。先结束一个 sequence "
               "归还它的 block，再继续。"),
    },
    "refused_decode_nothing_running": {"en": "Nothing is running: add a sequence first.",
                                       "zh": "没有运行中的 sequence：请先添加一个。"},
    "refused_finish_not_running": {"en": "{seq} is not running, so it holds no blocks to return.",
                                   "zh": "{seq} 没有在运行，没有可归还的 block。"},
    "refused_add_pool_full": {
        "en": ("Cannot add it: {tokens} tokens need {need} blocks but {free} are free. Finish a sequence or choose a "
               "shorter prompt."),
        "zh": ("无法添加：{tokens} 个 token 需要 {need} 个 block，但只有 {free} 个空闲。请结束一个 sequence，"
               "或选择更短的 prompt。"),
    },
    "refused_add_out_of_range": {
        "en": "Prompt length {value} is outside its range {lo}–{hi}: nothing was added. Type a length from {lo} to {hi}.",
        "zh": "prompt 长度 {value} 超出了范围 {lo}–{hi}：没有添加任何 sequence。请输入 {lo} 到 {hi} 之间的长度。",
    },
    "refused_add_not_a_number": {
        "en": "Prompt length “{text}” is not a whole number: nothing was added. Type a length from {lo} to {hi}.",
        "zh": "prompt 长度“{text}”不是整数：没有添加任何 sequence。请输入 {lo} 到 {hi} 之间的长度。",
    },
    "refused_add_bad_op": {"en": "That prompt length is not allowed.", "zh": "这个 prompt 长度不被允许。"},
    "refused_bad_op_bad_op": {"en": "Unknown step “{detail}”.", "zh": "未知的步骤“{detail}”。"},
    "refused_bad_op_too_long": {
        "en": "This page keeps at most 256 steps so that a link can replay them: press Reset to start again.",
        "zh": "本页最多记录 256 步（这样链接才能重放）：请点击“重置”重新开始。",
    },
    "pool_title": {"en": "Physical pool: {free} of {num_blocks} blocks free (cell = sequence + token_index)",
                   "zh": "物理 pool：{num_blocks} 个 block 中有 {free} 个空闲（格子 = sequence + token_index）"},
    "pool_notice": {
        "en": ("Each colour is one sequence, the same at every step. A new block is taken only when a sequence's "
               "last block is full; pale cells are slots a sequence owns but has not written yet."),
        "zh": ("每种颜色代表一个 sequence，每一步都不变。只有当 sequence 的最后一个 block 写满时才会分配新 block；"
               "浅色格子是已分配但还没写入的 slot。"),
    },
    "free_list": {"en": "free_block_ids", "zh": "free_block_ids"},
    "mapping_title": {"en": "block_table of each sequence: logical block → physical block",
                      "zh": "每个 sequence 的 block_table：logical block → physical block"},
    "mapping_notice": {
        "en": ("Logical blocks are in order; their physical blocks are anywhere in the pool. A dotted thick line "
               "is a block taken by the latest step."),
        "zh": "logical block 按顺序排列，对应的 physical block 可以在 pool 的任何位置。粗虚线是最新一步新分配的 block。",
    },
    # the mapping image's words (viz.mapping.MappingLabels, one key map_<field> per field)
    "map_logical": {"en": "logical", "zh": "逻辑"},
    "map_physical": {"en": "physical", "zh": "物理"},
    "map_entry": {"en": "{seq} logical block {logical} → physical block {block} ({tokens})",
                  "zh": "{seq} 的 logical block {logical} → physical block {block}（{tokens}）"},
    "map_tokens": {"en": "tokens {first}–{last}", "zh": "token {first}–{last}"},
    "map_no_tokens": {"en": "no tokens yet", "zh": "尚未写入 token"},
    "map_block": {"en": "physical block {block}: {owner}", "zh": "physical block {block}：{owner}"},
    "map_free": {"en": "free", "zh": "空闲"},
    "map_alt": {"en": "block tables", "zh": "各 sequence 的 block_table"},
    "seq": {"en": "sequence", "zh": "序列"},
    "verdict": {"en": "verdict", "zh": "结论"},
    "nothing_running": {"en": "No running sequence.", "zh": "没有运行中的 sequence。"},
    "check_notice": {
        "en": ("After every step each sequence decodes a random query twice: through its block_table, and over a "
               "contiguous cache that received the same K/V. The relative error must stay below {tolerance} "
               "({dtype})."),
        "zh": ("每一步之后，每个 sequence 都用一个随机 query 计算两次：一次通过它的 block_table，一次在收到相同 K/V "
               "的连续 cache 上。相对误差必须小于 {tolerance}（{dtype}）。"),
    },
    # a "w<id>" step (write one token to the wrong slot, see ui.breaks) aimed at a sequence that is not running
    "refused_decode_not_running": {"en": "{seq} is not running, so it has no new token to write.",
                                   "zh": "{seq} 没有在运行，没有要写入的新 token。"},
}
