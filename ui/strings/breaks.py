"""Break it where it is taught: page 2 (no causal mask, context_len off by one) and page 3 (a token written to the
wrong slot)."""

STRINGS = {
    # --- page 2 · Gather & attend ---
    "header": {"en": "Break it", "zh": "动手弄坏它"},
    "no_mask": {"en": "Remove the causal mask", "zh": "去掉因果 mask"},
    "no_mask_help": {"en": "Attend with causal=False and compare each query row with the masked reference.",
                     "zh": "用 causal=False 计算 attention，并把每个 query 行与带 mask 的参考结果比较。"},
    "ctx_off": {"en": "context_len handed to attention", "zh": "交给 attention 的 context_len"},
    "ctx_off_help": {"en": "Tell decode attention one token too few or too many, as an off-by-one bug would.",
                     "zh": "像 off-by-one bug 那样，告诉 decode attention 少一个或多一个 token。"},
    "off_0": {"en": "exact", "zh": "准确"},
    "off_-1": {"en": "−1 (one too few)", "zh": "−1（少一个）"},
    "off_1": {"en": "+1 (one too many)", "zh": "+1（多一个）"},
    "wait": {"en": "Break on: {what}. Its effect shows here once the gather is complete (press “{all}”).",
             "zh": "已弄坏：{what}。gather 完成后（点击“{all}”）会在这里显示它的后果。"},
    "what_mask": {"en": "no causal mask", "zh": "没有因果 mask"},
    "what_len": {"en": "attention told context_len = {told} (the cache holds {context_len})",
                 "zh": "attention 被告知 context_len = {told}（cache 中有 {context_len} 个）"},
    "top_mask_decode": {
        "en": ("Break on: no causal mask. In decode nothing differs (max |Δ| {worst}): the one query is the newest "
               "token, so there is no future to hide."),
        "zh": "已弄坏：没有因果 mask。decode 时没有任何不同（max |Δ| {worst}）：唯一的 query 就是最新的 token，没有需要隐藏的未来。",
    },
    "top_mask": {
        "en": ("Break on: no causal mask. {changed} of {rows} query rows now differ from the masked reference "
               "(relative error {rel}, {dtype} tolerance {tol}): the future leaks into the past. The weights, the "
               "check and the Δ below are of the broken attention."),
        "zh": ("已弄坏：没有因果 mask。{rows} 个 query 行中有 {changed} 行与带 mask 的参考结果不同（相对误差 {rel}，"
               "{dtype} 容差 {tol}）：未来泄漏到了过去。下面的权重、校验和 Δ 都是弄坏后的 attention。"),
    },
    "top_mask_ok": {
        "en": ("Break on: no causal mask. No query row differs beyond the {dtype} tolerance {tol} (relative error "
               "{rel}): with q_len 1 the only query is the last token, which sees every key anyway."),
        "zh": ("已弄坏：没有因果 mask。没有 query 行的差异超过 {dtype} 容差 {tol}（相对误差 {rel}）：q_len 为 1 时唯一的 "
               "query 是最后一个 token，它本来就能看到所有 key。"),
    },
    "top_len": {
        "en": ("Break on: attention told context_len = {told} (the cache holds {context_len}). Its output differs "
               "from the reference: relative error {rel} against the {dtype} tolerance {tol}. The weights, the output, "
               "the check and the Δ below are of the broken attention."),
        "zh": ("已弄坏：attention 被告知 context_len = {told}（cache 中有 {context_len} 个）。输出与参考结果不同：相对误差 "
               "{rel}，{dtype} 容差为 {tol}。下面的权重、输出、校验和 Δ 都是弄坏后的 attention。"),
    },
    "top_len_ok": {
        "en": ("Break on: attention told context_len = {told} (the cache holds {context_len}), yet its output stays "
               "within the {dtype} tolerance {tol} (relative error {rel})."),
        "zh": ("已弄坏：attention 被告知 context_len = {told}（cache 中有 {context_len} 个），但输出仍在 {dtype} 容差 "
               "{tol} 之内（相对误差 {rel}）。"),
    },
    "mask_header": {"en": "Without the causal mask", "zh": "去掉因果 mask 之后"},
    "mask_title": {"en": "max |Δ| per query row: no mask vs the masked reference",
                   "zh": "每个 query 行的 max |Δ|：无 mask 与带 mask 的参考结果"},
    "mask_changed": {"en": "rows changed", "zh": "改变的行"},
    "mask_x": {"en": "query position", "zh": "query 的位置"},
    "mask_prefill": {
        "en": ("{changed} of {rows} query rows change (largest |Δ| {worst}). Row i may now read tokens after "
               "position i: the future leaks into the past. Only the last row (token {last}) is untouched: it was "
               "allowed to see every token anyway."),
        "zh": ("{rows} 个 query 行中有 {changed} 行改变（最大 |Δ| {worst}）。第 i 行现在能读到位置 i 之后的 token："
               "未来泄漏到了过去。只有最后一行（token {last}）不受影响：它本来就能看到所有 token。"),
    },
    "mask_decode": {
        "en": ("Nothing changes (|Δ| {worst}): the one decode query is the newest token, position {last}, and every "
               "token in the cache comes before it. There is no future to hide, which is why decode needs no mask."),
        "zh": ("没有任何变化（|Δ| {worst}）：decode 唯一的 query 就是最新的 token（位置 {last}），cache 中的每个 token "
               "都在它之前。没有需要隐藏的未来，所以 decode 不需要 mask。"),
    },
    "len_header": {"en": "Attention told context_len = {told} (the cache holds {context_len})",
                   "zh": "attention 被告知 context_len = {told}（cache 中有 {context_len} 个）"},
    "len_minus": {
        "en": ("Token {dropped}, the newest one (its K/V were just written), is not read: the query attends to "
               "one token too few and every head's output moves (max |Δ| {worst})."),
        "zh": ("最新的 token {dropped}（它的 K/V 刚刚写入）没有被读取：query 少看了一个 token，每个 head 的输出都变了"
               "（max |Δ| {worst}）。"),
    },
    "len_minus_impossible": {"en": "With a one-token context, −1 would read nothing at all: pick a longer context.",
                             "zh": "context 只有一个 token 时，−1 什么也读不到：请选更长的 context。"},
    "len_plus_empty": {
        "en": ("Token index {context_len} is read through the table: slot {slot}, in the sequence's last block, "
               "never written, so it holds zeros (in a real server: whatever an earlier owner left). A zero key "
               "still takes softmax weight and its zero value dilutes the output (max |Δ| {worst})."),
        "zh": ("按 block table 读取 token 索引 {context_len}：slot {slot}，在这个 sequence 最后一个 block 中，从未写入，"
               "所以全是零（真实服务器中则是之前的使用者留下的数据）。零 key 仍会分到 softmax 权重，零 value 会稀释输出"
               "（max |Δ| {worst}）。"),
    },
    "len_plus_past": {
        "en": ("Token index {context_len} lies past the block table's last block. This library's gather then "
               "re-reads the last entry: slot {slot}, which holds token {token}'s K/V, counted twice. A CUDA kernel "
               "would follow whatever the padded table entry points to: another sequence's block, or garbage "
               "(max |Δ| {worst})."),
        "zh": ("token 索引 {context_len} 超出了 block table 的最后一个 block。本库的 gather 会重复读取最后一项：slot "
               "{slot}，其中是 token {token} 的 K/V，被算了两次。CUDA kernel 则会沿着填充项指向的位置读取："
               "另一个 sequence 的 block，或者垃圾数据（max |Δ| {worst}）。"),
    },
    "len_diff_title": {"en": "Δ = output with context_len {told} − contiguous reference",
                       "zh": "Δ = context_len 为 {told} 时的输出 − 连续 cache 参考结果"},
    "verdict": {"en": "check", "zh": "校验"},
    # --- page 3 · Batch decode ---
    "wrong_toggle": {"en": "Break the next decode: write a token one slot too far",
                     "zh": "弄坏下一次 decode：把一个 token 写到下一个 slot"},
    "wrong_help": {"en": "On the next decode step, the chosen sequence writes its newest token's K/V at slot + 1. "
                         "Its contiguous twin gets it right, so the check shows the damage.",
                   "zh": "下一次 decode 时，选中的 sequence 把最新 token 的 K/V 写到 slot + 1。它的连续 cache 孪生引擎写对了，"
                         "所以校验会显示出损坏。"},
    "wrong_seq": {"en": "Which sequence", "zh": "哪个 sequence"},
    "wrong_armed": {"en": "Armed: the next “Next step” writes {seq}'s token one slot too far.",
                    "zh": "已就绪：下一次“下一步”会把 {seq} 的 token 写到下一个 slot。"},
    "wrong_none": {"en": "No sequence is running.", "zh": "没有正在运行的 sequence。"},
    "wrong_what": {"en": "{seq}'s token {token} belonged in slot {slot}; its K/V went to slot {written}.",
                   "zh": "{seq} 的 token {token} 应写入 slot {slot}；它的 K/V 却写进了 slot {written}。"},
    "wrong_self": {
        "en": ("Slot {written} is {seq}'s own next slot (token {victim_token}), not written yet: its next decode will "
               "cover it. But slot {slot} never got token {token}: {seq} now reads stale K/V there at every step."),
        "zh": ("slot {written} 是 {seq} 自己的下一个 slot（token {victim_token}），还没有写入：下一次 decode 会覆盖它。"
               "但 slot {slot} 一直没有得到 token {token}：此后每一步 {seq} 都会在那里读到错误的 K/V。"),
    },
    "wrong_overwrote": {
        "en": ("Slot {written} belongs to {victim}: it held {victim}'s token {victim_token}, now overwritten. "
               "{victim} is corrupted by a bug in {seq}, and {seq}'s own slot {slot} is missing its token."),
        "zh": ("slot {written} 属于 {victim}：原本存着 {victim} 的 token {victim_token}，现在被覆盖了。{seq} 的 bug "
               "损坏了 {victim}，而 {seq} 自己的 slot {slot} 也缺了这个 token。"),
    },
    "wrong_reserved": {
        "en": ("Slot {written} belongs to {victim}, reserved for its token {victim_token}, not written yet: "
               "{victim} will write over the stray K/V when it gets there. {seq}'s own slot {slot} is missing its "
               "token."),
        "zh": ("slot {written} 属于 {victim}，预留给它的 token {victim_token}，还没有写入：{victim} 写到那里时会覆盖这份"
               "错放的 K/V。{seq} 自己的 slot {slot} 缺了这个 token。"),
    },
    "wrong_free": {
        "en": ("Slot {written} is in a free block: nobody reads it now, but the block will be handed out later with "
               "stray K/V inside. {seq}'s own slot {slot} is missing its token."),
        "zh": ("slot {written} 在一个空闲 block 中：现在没人读它，但这个 block 之后会连同错放的 K/V 一起被分配出去。"
               "{seq} 自己的 slot {slot} 缺了这个 token。"),
    },
    "wrong_past": {
        "en": ("Slot {slot} is the pool's last slot: slot + 1 is outside the cache. A GPU kernel would write past "
               "the buffer (a crash, or silent damage to other memory); here the write is dropped, and {seq}'s "
               "slot {slot} is missing its token."),
        "zh": ("slot {slot} 是 pool 的最后一个 slot：slot + 1 已在 cache 之外。GPU kernel 会越界写入（崩溃，或悄悄破坏"
               "其他内存）；这里丢弃了这次写入，{seq} 的 slot {slot} 缺了这个 token。"),
    },
    "wrong_checks": {"en": "paged vs contiguous now fails for: {seqs}.", "zh": "paged 与连续 cache 的校验现在失败的有：{seqs}。"},
}
