"""Page 9 · Beam search on shared blocks (the pool's hover words come from "sharing.ref_<field>")."""

STRINGS = {
    "title": {"en": "9 · Beam search on shared blocks", "zh": "9 · 共享 block 上的 beam search"},
    "intro": {
        "en": ("Beam search keeps the K best continuations of a prompt at every step. On a block pool the K beams "
               "form a tree: they share the prompt's blocks and every block of a common prefix through reference "
               "counts. A beam chosen twice is forked (its table copied, no K/V moved); a beam that writes into a "
               "shared, partly filled last block first gets its own copy (copy-on-write); a beam no continuation "
               "chose is pruned and frees its blocks at once. The PagedAttention paper (§4.4) saves 37.6–55.2% of KV "
               "memory this way."),
        "zh": ("beam search 在每一步保留 prompt 的 K 个最佳延续。在 block pool 上，K 个 beam 构成一棵树：它们通过引用计数"
               "共享 prompt 的 block 以及所有公共前缀的 block。被选中两次的 beam 会分叉（fork：复制 block table，不移动任何 "
               "K/V）；要往共享的、未写满的最后一个 block 写入的 beam，先得到它自己的副本（copy-on-write）；没有被任何延续选中"
               "的 beam 被剪枝（prune），它的 block 立即释放。PagedAttention 论文（§4.4）用这种方式节省了 37.6–55.2% 的 KV "
               "内存。"),
    },
    "prompt": {"en": "Prompt (the model copies it)", "zh": "prompt（模型会复述它）"},
    "beam_width": {"en": "beam_width (K)", "zh": "beam_width（K）"},
    "length_penalty": {"en": "length_penalty", "zh": "length_penalty"},
    "length_penalty_help": {
        "en": "A finished beam scores sum of log-probs / generated length ** length_penalty (as in transformers).",
        "zh": "一个结束的 beam 的得分 = log-prob 之和 / 生成长度 ** length_penalty（与 transformers 相同）。"},
    "skip_cow": {"en": "Skip the copy-on-write", "zh": "跳过 copy-on-write"},
    "skip_cow_help": {
        "en": "A beam writes its token into the shared last block instead of copying it first.",
        "zh": "beam 直接把 token 写进共享的最后一个 block，而不是先复制它。"},
    "at_start": {"en": "Nothing run yet: press “Next step” (→) to prefill the prompt.",
                 "zh": "还没有运行：点击“下一步”（→）来 prefill 这个 prompt。"},
    "said_prefill": {"en": "Step {step}: prefill of {tokens} prompt tokens into blocks {blocks}.",
                     "zh": "第 {step} 步：把 {tokens} 个 prompt token prefill 进 block {blocks}。"},
    "said_decode": {"en": "Step {step}: {beams} beams each wrote one token.",
                    "zh": "第 {step} 步：{beams} 个 beam 各写入一个 token。"},
    "fork_msg": {"en": "Beam {seq} was chosen {times} times: forked into {children}, sharing its {blocks} blocks.",
                 "zh": "beam {seq} 被选中 {times} 次：分叉出 {children}，共享它的 {blocks} 个 block。"},
    "cow_msg": {"en": "Copy-on-write: {copies} (shared block → its copy), before a beam wrote into it.",
                "zh": "copy-on-write：{copies}（共享 block → 它的副本），在 beam 写入之前完成。"},
    "prune_msg": {"en": "Beam {seq} pruned: no continuation chose it; freed blocks {blocks}.",
                  "zh": "beam {seq} 被剪枝：没有延续选中它；释放了 block {blocks}。"},
    "prune_none": {"en": "Beam {seq} pruned: its blocks are all still held by other beams, none freed.",
                   "zh": "beam {seq} 被剪枝：它的 block 仍被其他 beam 持有，没有释放任何 block。"},
    "hyp_msg": {"en": "Finished this step (text, score): {hyps}.", "zh": "本步结束的候选（文本，得分）：{hyps}。"},
    "end_msg": {"en": "The search ended: every block is free again.", "zh": "搜索结束：所有 block 都重新空闲。"},
    "skipped_msg": {
        "en": "Break-it: beams {seqs} wrote into shared block {blocks} (ref count > 1) without copying it.",
        "zh": "破坏实验：beam {seqs} 没有复制就写进了共享的 block {blocks}（ref count > 1）。"},
    "pool_title": {"en": "The pool after this step: {free} of {num_blocks} blocks free",
                   "zh": "这一步之后的 pool：{num_blocks} 个 block 中 {free} 个空闲"},
    "pool_notice": {
        "en": ("The number in a block is its ref count: how many beams' tables hold it. Outlined blocks are shared; "
               "a copy-on-write is drawn as an arrow from the shared block to its copy. A cross marks a block freed "
               "this step: a pruned beam's blocks go back to free at once."),
        "zh": ("block 中的数字是它的 ref count：有多少个 beam 的 block table 持有它。带粗边框的 block 是共享的；"
               "copy-on-write 画成从共享 block 指向副本的箭头。叉号标出这一步释放的 block：被剪枝的 beam 的 block "
               "立即变回空闲。")},
    "freed_hover": {"en": "physical block {block}: freed this step (beam {seq} let it go, no other beam held it)",
                    "zh": "physical block {block}：这一步被释放（beam {seq} 放弃了它，没有其他 beam 持有）"},
    "tree_title": {"en": "The beam tree (best beam on top)", "zh": "beam 树（最好的 beam 在最上面）"},
    "tree_notice": {
        "en": ("Each column is one generated token. A beam with two children was forked; a cross marks a pruned "
               "beam, a star a finished hypothesis (EOS or max_tokens), an open circle a beam still running when "
               "the search ended."),
        "zh": ("每一列是一个生成的 token。有两个子节点的 beam 被分叉过；叉号表示被剪枝的 beam，星号表示结束的候选（EOS 或 "
               "max_tokens），空心圆表示搜索结束时仍在运行的 beam。")},
    "tree_beam": {"en": "beam {seq} · token {token} · running score {score}",
                  "zh": "beam {seq} · token {token} · 累计得分 {score}"},
    "tree_pruned": {"en": "beam {seq} · token {token} · pruned: no continuation chose it, its blocks were freed",
                    "zh": "beam {seq} · token {token} · 被剪枝：没有延续选中它，它的 block 已释放"},
    "tree_ended": {"en": "beam {seq} · token {token} · still running when the search ended",
                   "zh": "beam {seq} · token {token} · 搜索结束时仍在运行"},
    "tree_finished": {"en": "finished hypothesis from beam {seq} · token {token} · score {score}",
                      "zh": "来自 beam {seq} 的结束候选 · token {token} · 得分 {score}"},
    "tree_root": {"en": "the prompt: every beam starts from its blocks", "zh": "prompt：每个 beam 都从它的 block 开始"},
    "tree_legend_beam": {"en": "running beam", "zh": "运行中的 beam"},
    "tree_legend_pruned": {"en": "pruned", "zh": "被剪枝"},
    "tree_legend_finished": {"en": "finished (EOS or max_tokens)", "zh": "结束（EOS 或 max_tokens）"},
    "tree_legend_ended": {"en": "still running at the end", "zh": "结束时仍在运行"},
    "tree_x_title": {"en": "tokens generated", "zh": "已生成的 token 数"},
    "memory_title": {"en": "KV blocks the beams read, with and without sharing",
                     "zh": "beam 读取的 KV block：共享与不共享"},
    "held_name": {"en": "with sharing (distinct blocks)", "zh": "共享（不同的 block 数）"},
    "without_name": {"en": "without sharing (every beam its own copy)", "zh": "不共享（每个 beam 各有一份）"},
    "axis_blocks": {"en": "blocks", "zh": "block 数"},
    "axis_step": {"en": "step", "zh": "步"},
    "memory_notice": {
        "en": "Over this search so far: {shared} block·steps with sharing, {unshared} without, {saving}% saved.",
        "zh": "到目前为止的这次搜索：共享 {shared} block·步，不共享 {unshared} block·步，节省 {saving}%。"},
    "savings_header": {"en": "Measured: memory saved by sharing (the paper's §4.4 comparison)",
                       "zh": "实测：共享节省的内存（论文 §4.4 的对比）"},
    "savings_title": {"en": "KV memory saved by sharing, per prompt and beam_width (block_size 4)",
                      "zh": "共享节省的 KV 内存，按 prompt 与 beam_width（block_size 4）"},
    "savings_y": {"en": "KV memory saved (%)", "zh": "节省的 KV 内存（%）"},
    "paper_name": {"en": "paper: 37.6–55.2% (Alpaca, OPT-13B, widths 2–6)",
                   "zh": "论文：37.6–55.2%（Alpaca，OPT-13B，宽度 2–6）"},
    "savings_notice": {
        "en": ("Measured here on the shipped tiny model with short recall prompts and 8 new tokens: saved = 1 − "
               "(block·steps with sharing) / (block·steps without). The band is the paper's measurement on its own "
               "model and prompts, shown as a reference, not a target."),
        "zh": ("在这里用内置的小模型、简短的复述 prompt 和 8 个新 token 实测：节省 = 1 −（共享的 block·步）/（不共享的 "
               "block·步）。色带是论文在它自己的模型和 prompt 上的测量结果，仅作参考，不是目标。")},
    "beams_header": {"en": "The K finished beams, best first", "zh": "K 个结束的 beam（最好的在前）"},
    "col_rank": {"en": "rank", "zh": "名次"},
    "col_text": {"en": "text", "zh": "文本"},
    "col_score": {"en": "score", "zh": "得分"},
    "col_twin": {"en": "contiguous twin", "zh": "contiguous 孪生引擎"},
    "not_yet": {"en": "Not finished yet: step to the end to see the K beams.",
                "zh": "还没结束：一直执行到最后就能看到 K 个 beam。"},
    "twin_ok": {"en": "Paged beams == the contiguous twin's, token for token and score for score.",
                "zh": "paged 的 beam 与 contiguous 孪生引擎逐 token、逐得分一致。"},
    "twin_bad": {
        "en": ("Paged beams differ from the contiguous twin's from step {step} on: two beams wrote into one shared "
               "block, so each read the other's K/V."),
        "zh": "从第 {step} 步起，paged 的 beam 与 contiguous 孪生引擎不同：两个 beam 写进了同一个共享 block，于是各自读到了对方的 K/V。"},
}
