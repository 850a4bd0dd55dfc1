"""Page 1 · Address translation."""

STRINGS = {
    "title": {"en": "1 · Address translation", "zh": "1 · 地址映射"},
    "intro": {
        "en": ("A sequence's tokens are numbered 0, 1, 2, … as if contiguous. The block_table says which physical "
               "block holds each group of block_size tokens. Edit the table, move the token, follow the chain."),
        "zh": ("sequence 的 token 编号是 0, 1, 2, …，看起来是连续的。block_table 说明每 block_size 个 token 存在哪个 "
               "physical block 中。编辑 block table，移动 token，跟着链路走一遍。"),
    },
    "table_label": {"en": "block_table (physical block ids, in logical order)",
                    "zh": "block_table（按逻辑顺序排列的 physical block 编号）"},
    "table_help": {"en": "Entry i is the physical block that holds logical block i, e.g. 7, 2, 9.",
                   "zh": "第 i 项是存放 logical block i 的 physical block，例如 7, 2, 9。"},
    "randomise": {"en": "Randomise", "zh": "随机生成"},
    "token_label": {"en": "token_index (which token to read)", "zh": "token_index（要读取的 token）"},
    "token_only_one": {"en": "This table addresses a single token: token_index 0.",
                       "zh": "这个 block table 只能寻址一个 token：token_index 0。"},
    "duplicate": {
        "en": ("Physical block {block} is listed twice (logical blocks {logical}). Tokens {first} and tokens "
               "{second} map to the same slots: whichever is written later overwrites the other, and reading the "
               "earlier tokens returns the later ones' K/V. A real block manager never hands out one block twice "
               "to the same sequence."),
        "zh": ("physical block {block} 出现了两次（logical block {logical}）。token {first} 和 token {second} "
               "会映射到同一批 slot：后写入的会覆盖先写入的，读取前面的 token 时拿到的是后面 token 的 K/V。"
               "真正的 Block Manager 绝不会把同一个 block 两次分给同一个 sequence。"),
    },
    "help_token_index": {"en": "The token's position in the sequence (logical).",
                         "zh": "token 在 sequence 中的位置（逻辑位置）。"},
    "help_logical_block_id": {"en": "token_index // block_size", "zh": "token_index // block_size"},
    "help_physical_block_id": {"en": "block_table[logical_block_id]", "zh": "block_table[logical_block_id]"},
    "help_block_offset": {"en": "token_index % block_size", "zh": "token_index % block_size"},
    "help_slot": {"en": "physical_block_id * block_size + block_offset: the row in the flat pool",
                  "zh": "physical_block_id * block_size + block_offset：在展平的 pool 中的行号"},
    "pool_title": {"en": "Physical pool: {num_blocks} blocks × {block_size} slots (block id on the left)",
                   "zh": "物理 pool：{num_blocks} 个 block × {block_size} 个 slot（左侧为 block 编号）"},
    "pool_notice": {
        "en": ("Token {token_index} is the outlined cell, slot {slot} inside physical block {physical_block_id}. "
               "The sequence's blocks are not adjacent, yet reading them in block_table order gives tokens "
               "0, 1, 2, … in order. Grey blocks are free for other sequences. Hover a cell for its chain."),
        "zh": ("token {token_index} 是加粗边框的格子：physical block {physical_block_id} 中的 slot {slot}。"
               "这个 sequence 的 block 并不相邻，但按 block_table 的顺序读取，得到的仍是按顺序的 token 0, 1, 2, …。"
               "灰色 block 空闲，可以给其他 sequence 使用。把鼠标悬停在格子上可以看到完整链路。"),
    },
    "pool_notice_duplicate": {
        "en": ("Token {token_index} is the outlined cell, slot {slot} inside physical block {physical_block_id}. "
               "Block {block} is in the table twice, so each of its cells is claimed by two tokens (e.g. 4/8): "
               "reading the table in order does not give tokens 0, 1, 2, … in order, because one token's K/V "
               "overwrite the other's. Hover a cell for its chains."),
        "zh": ("token {token_index} 是加粗边框的格子：physical block {physical_block_id} 中的 slot {slot}。"
               "block {block} 在表中出现了两次，所以它的每个格子都被两个 token 占用（例如 4/8）：按表的顺序读取，"
               "得到的不再是按顺序的 token 0, 1, 2, …，因为一个 token 的 K/V 会覆盖另一个的。把鼠标悬停在格子上可以看到链路。"),
    },
    # quiz mode (?quiz=1): while a question is open, what would give its answer away waits for Reveal
    "quiz_hidden_chain": {"en": "The chain of token {token} is hidden until you reveal your prediction: it is the "
                                "token the question asks about. Move token_index to follow another one.",
                          "zh": "token {token} 的链路在你揭晓预测之前是隐藏的：题目问的正是这个 token。移动 token_index "
                                "可以查看其他 token。"},
    "quiz_hidden_pool": {"en": "While the question is open the cells name no token (hover shows only a slot's own "
                               "address): work the chain out, then reveal.",
                         "zh": "题目未揭晓时，格子里不显示 token（悬停只显示 slot 自身的地址）：先自己推算链路，再揭晓。"},
    "quiz_hidden_table": {"en": "The table of every token's slot comes back once you reveal your prediction.",
                          "zh": "揭晓预测之后，会重新显示每个 token 所在 slot 的表格。"},
    "table_heading": {"en": "Every token → (physical block, offset)", "zh": "每个 token →（physical block，块内偏移）"},
    "table_notice": {
        "en": ("Within a block the offset counts 0 … {last_offset} (block_size - 1) and the slot rises by one; at a block boundary "
               "the slot jumps to wherever the next physical block is."),
        "zh": ("在一个 block 内，块内偏移从 0 数到 {last_offset}（block_size - 1），slot 逐一增加；跨过 block 边界时，slot 会跳到下一个 "
               "physical block 所在的位置。"),
    },
    # a token past the table (issue 10: the token is kept, the missing entry named)
    "err_missing_entry": {
        "en": ("Token {token_index} lives in logical block {logical}, but the block_table's last entry is logical "
               "block {last}: logical block {logical} has no entry, so the chain stops before physical_block_id."),
        "zh": ("token {token_index} 位于 logical block {logical}，但 block_table 的最后一项是 logical block {last}："
               "logical block {logical} 没有对应的项，所以链路在 physical_block_id 之前中断。"),
    },
    "fix_missing_entry": {
        "en": ("Add physical block ids to the table until it has {needed} entries (one for each logical block "
               "0–{logical}), or move token_index below {capacity}."),
        "zh": "在 block table 中继续添加 physical block 编号，直到它有 {needed} 项（logical block 0–{logical} 各一项），"
              "或者把 token_index 移到 {capacity} 以下。",
    },
    "pool_notice_missing": {
        "en": ("No cell is outlined: token {token_index} has no slot, because its logical block has no physical "
               "block. The table's blocks hold tokens 0 … {last_token} only. A block manager appends a block to "
               "the table before a token past its end is written."),
        "zh": ("没有格子被加粗：token {token_index} 没有 slot，因为它的 logical block 没有对应的 physical block。"
               "表中的 block 只存放 token 0 … {last_token}。Block Manager 会在写入超出表尾的 token 之前先往表中追加一个 "
               "block。"),
    },
}
