"""Page 11 · Sliding window."""

STRINGS = {
    "title": {"en": "11 · Sliding window", "zh": "11 · 滑动窗口"},
    "intro": {
        "en": ("With sliding-window attention (Mistral, Qwen2's use_sliding_window) a token reads only itself and the "
               "W - 1 tokens before it. Once the window has moved past a block, no query will ever read that block "
               "again, so the block manager frees it while the sequence is still running: the block table keeps its "
               "length (the address chain is unchanged) and gets holes at the front, as vLLM v1's sliding-window "
               "manager does. Request B arrives after A's prefill and reuses the blocks A's window left behind."),
        "zh": ("使用滑动窗口 attention（Mistral、Qwen2 的 use_sliding_window）时，一个 token 只读取它自己和它之前的 W - 1 个 "
               "token。窗口一旦越过某个 block，以后再也没有 query 会读它，所以 block manager 在 sequence 仍在运行时就释放它："
               "block table 的长度不变（地址链不变），只是前面出现空洞，和 vLLM v1 的滑动窗口管理器一样。请求 B 在 A 的 "
               "prefill 之后到达，复用 A 的窗口留下的 block。"),
    },
    "window": {"en": "sliding_window W", "zh": "sliding_window W"},
    "window_help": {"en": "Each token reads itself and the W - 1 tokens before it.",
                    "zh": "每个 token 读取它自己和它之前的 W - 1 个 token。"},
    "prompt": {"en": "A's prompt", "zh": "A 的 prompt"},
    "prompt_recall": {"en": "“blocks of KV” to recall (the model copies it back)",
                      "zh": "要复述的 “blocks of KV”（模型会把它抄写一遍）"},
    "prompt_long": {"en": "a longer plain sentence", "zh": "一个较长的普通句子"},
    "start": {"en": "Nothing has run yet: press “Next step”. A is prefilled first; B joins after A's prefill.",
              "zh": "还没有运行：点击“下一步”。先 prefill A；B 在 A 的 prefill 之后加入。"},
    "said_prefill_a": {
        "en": ("Step {step}: A's {tokens}-token prompt was prefilled in one pass (all of its blocks held during the "
               "step). Its next token {next} reads tokens {first}–{next}, so {count} block(s) wholly before the "
               "window went back to the free queue right away: {blocks}."),
        "zh": ("第 {step} 步：A 的 {tokens} 个 token 的 prompt 一次 prefill 完成（这一步中它的所有 block 都被占用）。它的下一个 "
               "token {next} 读取 token {first}–{next}，所以完全在窗口之前的 {count} 个 block 立即回到空闲队列：{blocks}。"),
    },
    "said_prefill_b": {
        "en": ("Step {step}: B's prompt was prefilled into blocks {blocks}; {taken} of them ({taken_blocks}) are "
               "blocks A's window freed."),
        "zh": "第 {step} 步：B 的 prompt prefill 到 block {blocks} 中；其中 {taken} 个（{taken_blocks}）是 A 的窗口释放的 block。",
    },
    "said_prefill_b_slid": {
        "en": "B's own window then released {blocks} right away; B's table now lists {held}.",
        "zh": "随后 B 自己的窗口立即释放了 {blocks}；B 的 block table 现在列着 {held}。",
    },
    "said_overwrite": {
        "en": ("The break bites: B took block(s) {blocks}, which A's table still lists, and wrote its own K/V where "
               "A's window reads."),
        "zh": "弄坏的后果出现了：B 拿走了 A 的 block table 仍然列着的 block {blocks}，并在 A 的窗口读取的位置写入了自己的 K/V。",
    },
    "said_early": {
        "en": ("The break: block(s) {blocks} went back to the free queue too, although A's window (from token "
               "{first}) still reads them and A's table still lists them; the next request to allocate can take "
               "them."),
        "zh": ("弄坏之处：block {blocks} 也回到了空闲队列，尽管 A 的窗口（从 token {first} 开始）仍读取它们，A 的 block table "
               "也仍然列着它们；下一个分配 block 的请求可以拿走它们。"),
    },
    "said_decode": {
        "en": ("Step {step}: A wrote token {token} and sampled the next; its window now covers tokens {first}–{next}. "
               "A holds {held} block(s) (at most {bound})."),
        "zh": ("第 {step} 步：A 写入 token {token} 并采样下一个；它的窗口现在覆盖 token {first}–{next}。A 持有 {held} 个 block"
               "（最多 {bound} 个）。"),
    },
    "said_freed": {"en": "Blocks {blocks} slid out of A's window and went back to the free queue.",
                   "zh": "block {blocks} 滑出了 A 的窗口，回到空闲队列。"},
    "said_done": {"en": "Step {step}: A finished; all of its blocks went back to the free queue.",
                  "zh": "第 {step} 步：A 完成；它的所有 block 都回到空闲队列。"},
    "metric_held": {"en": "blocks held (A + B)", "zh": "占用的 block（A + B）"},
    "metric_full": {"en": "without the window", "zh": "没有窗口时"},
    "metric_bound": {"en": "A's bound ⌈W / block_size⌉ + 1", "zh": "A 的上限 ⌈W / block_size⌉ + 1"},
    "metric_free": {"en": "free blocks", "zh": "空闲 block"},
    "table_title": {"en": "Block tables after step {step} (outlined: what A's next token reads)",
                    "zh": "第 {step} 步之后的 block table（加粗框：A 的下一个 token 读取的内容）"},
    "table_notice": {
        "en": ("The holes are always at the front, and the table never gets shorter: logical block i still starts at "
               "token i × block_size. Attention reads only the window's slots, so it never touches a hole."),
        "zh": ("空洞总是在最前面，block table 也从不变短：logical block i 仍从 token i × block_size 开始。attention 只读取窗口"
               "内的 slot，所以永远不会碰到空洞。"),
    },
    "w_request": {"en": "request {seq}", "zh": "请求 {seq}"},
    "w_hole": {"en": "L{logical}: freed", "zh": "L{logical}：已释放"},
    "w_hole_now": {"en": "L{logical}: P{physical} freed now", "zh": "L{logical}：P{physical} 刚释放"},
    "w_slot": {"en": "token {token} “{text}”: logical block {logical}, physical block {physical}, slot {slot}",
               "zh": "token {token} “{text}”：logical block {logical}，physical block {physical}，slot {slot}"},
    "w_empty": {"en": "not written yet", "zh": "尚未写入"},
    "w_next": {"en": "the next token: it reads the outlined tokens", "zh": "下一个 token：它读取加粗框内的 token"},
    "memory_title": {"en": "Blocks held, with and without the window", "zh": "占用的 block：有窗口与没有窗口"},
    "held_name": {"en": "held with the window", "zh": "有窗口时占用"},
    "without_name": {"en": "held with full attention", "zh": "完整 attention 时占用"},
    "axis_blocks": {"en": "blocks", "zh": "block 数"},
    "memory_notice": {
        "en": ("With full attention the blocks held grow with every token; with the window they stay flat once the "
               "window is full. A prompt fed whole still holds all of its blocks during its own prefill step."),
        "zh": ("完整 attention 时，占用的 block 随每个 token 增长；有窗口时，窗口填满后就保持不变。一次性输入的 prompt 在它"
               "自己的 prefill 这一步中仍占用全部 block。"),
    },
    "text_header": {"en": "A's text: paged, its contiguous twin, and full attention",
                    "zh": "A 的文本：paged、contiguous 孪生引擎、完整 attention"},
    "paged_text": {"en": "paged engine (window)", "zh": "paged 引擎（窗口）"},
    "twin_text": {"en": "contiguous twin (window as a mask)", "zh": "contiguous 孪生引擎（窗口作为 mask）"},
    "full_text": {"en": "full attention (no window)", "zh": "完整 attention（无窗口）"},
    "twins_agree": {"en": "The paged engine and its contiguous twin agree, token for token.",
                    "zh": "paged 引擎与 contiguous 孪生引擎逐个 token 一致。"},
    "twins_drift": {
        "en": ("A's paged tokens left the contiguous twin's at step {step}: its window read a block that had been "
               "freed and overwritten by B's prefill."),
        "zh": "A 的 paged token 在第 {step} 步偏离了 contiguous 孪生引擎：它的窗口读到一个已被释放、又被 B 的 prefill 覆盖的 block。",
    },
    "break_label": {"en": "free one block too early: the block the window still starts in",
                    "zh": "提前一个 block 释放：窗口仍从中开始的那个 block"},
    "break_help": {
        "en": ("The block manager also frees the block holding the window's first tokens, and the table still lists "
               "it. B's prefill takes it from the head of the free queue and writes its own K/V there."),
        "zh": ("block manager 把窗口最前面几个 token 所在的 block 也释放了，而 block table 仍然列着它。B 的 prefill 从空闲队列"
               "队首拿走它，并写入自己的 K/V。"),
    },
    "break_quiet": {
        "en": ("Broken, yet no drift here: this time the overwritten tokens did not change A's greedy choices. Try "
               "W = 6 with block_size 4 on the recall prompt."),
        "zh": "已弄坏，但这里没有偏离：这次被覆盖的 token 没有改变 A 的贪心选择。试试 recall prompt、W = 6、block_size 4。",
    },
    "quiz_none": {"en": "No question at this step: the next step is a prefill or A's last.",
                  "zh": "这一步没有问题：下一步是 prefill 或 A 的最后一步。"},
    "vllm_note": {
        "en": ("vLLM 0.32: SlidingWindowManager.remove_skipped_blocks frees the blocks before token n - W + 1 and "
               "writes its null block in their place; here a hole is -1 (docs/window.md)."),
        "zh": ("vLLM 0.32：SlidingWindowManager.remove_skipped_blocks 释放 token n - W + 1 之前的 block，并在原位置写入它的 "
               "null block；这里空洞记为 -1（docs/window.md）。"),
    },
}
