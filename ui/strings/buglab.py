"""Page 5 · Bug lab. Each fault's card (title, what, where, symptom, caught_by) takes its English from
paged/faults.py, so there is one English source; the Chinese is here. Keys: "<field>_<fault value>"."""

from paged.faults import FAULTS, Fault

_ZH = {
    Fault.EARLY_INCREMENT: dict(
        title="cached_token_count 在写入 K/V 之前就加 1",
        what="最新 token 的 K/V 还没写入就被算作已缓存，于是 attention 读取它的 slot 时，里面还是旧数据。",
        where="写入 slot ↔ context_len（状态规则）",
        symptom="每个 decode step 都对垃圾数据（全零，或已释放 sequence 的残留）做 attention，而不是最新的 key。",
        caught_by="tests/paged/test_attention.py::test_early_increment_reads_unwritten_slot_and_is_caught，以及 engine 的 "
                  "paged == contiguous 一致性测试"),
    Fault.LATE_INCREMENT: dict(
        title="cached_token_count 加 1 太晚",
        what="最新 token 的 K/V 已经写入，但 context_len 仍然只计入之前的 token。",
        where="context_len",
        symptom="每个 decode step 都忽略了正在处理的 token：模型丢掉了最新的输入。",
        caught_by="engine 的 paged == contiguous 一致性测试（tests/paged/engine/test_engine.py）"),
    Fault.SLOT_OFF_BY_ONE: dict(
        title="slot_mapping 差一",
        what="每个 token 的 K/V 都被写到比它的地址所指位置靠后一个的 slot。",
        where="block_offset → slot（写入端）",
        symptom="读出的是前一个 token 的 K/V；写在 block 最后一个 slot 之后的数据会溢出到下一个 physical block，"
                "而那个 block 可能属于另一个 sequence。",
        caught_by="tests/paged/test_kv_cache.py::test_write_kv_lands_where_locate_reads 以及 engine 一致性测试"),
    Fault.BLOCK_SIZE_MISMATCH: dict(
        title="写入端和读取端的 block_size 不一致",
        what="写入端计算 slot 时用的 block size 只有读取端的一半。",
        where="logical_block_id / block_offset（写入端）",
        symptom="token 落在错误的 offset 和错误的 block 里；读回的历史是乱的。",
        caught_by="tests/paged/test_addressing.py::test_slot_mapping_equals_locate 以及 engine 一致性测试"),
    Fault.USE_AFTER_FREE: dict(
        title="释放后使用（use after free）：过期的 block table",
        what="当另一个 sequence 接手 batch 中的某一行时，runner 仍保留这一行旧的 block table；于是一个 sequence "
             "结束后，接替它的 sequence 会通过已结束 sequence 的、已经释放的 block 读取历史。",
        where="block_table（读取端）",
        symptom="任何 sequence 结束之后，其他 sequence 读到的是已结束 sequence（或 block 新主人）的 K/V。",
        caught_by="validate_block_table + engine 一致性测试；Block Manager 记录的 block 归属会显示出不一致"),
    Fault.POSITION_OFF_BY_ONE: dict(
        title="decode 位置差一",
        what="decode 时把最新 token 放在 position num_tokens，而不是 num_tokens - 1。",
        where="positions（RoPE）",
        symptom="cache 的寻址完全正确，但旋转位置编码（RoPE）看到了错误的位置：轻微的漂移。",
        caught_by="tests/paged/engine/test_engine.py::test_state_rule_and_decode_positions 以及 engine 一致性测试"),
    Fault.PAD_NOT_SKIPPED: dict(
        title="padding 的 slot −1 没有被跳过",
        what="batch 用 slot −1 填充（CUDA graph 就会这样做），而写入时没有跳过它：−1 绕回到 pool 的最后一个 slot。",
        where="slot_mapping（padding）",
        symptom="拥有 pool 最后一个 physical block 的 sequence，会在它的最后一个 slot 里发现别人的 key。",
        caught_by="tests/paged/test_kv_cache.py::test_write_kv_skips_padding_slots"),
    Fault.ALIASED_BLOCKS: dict(
        title="两个 logical block 指向同一个 physical block",
        what="logical block 1 被映射到与 logical block 0 相同的 physical block。",
        where="block_table",
        symptom="两个 logical block 的 token 互相覆盖；读第一个 block 的历史时，读到的是第二个 block 的内容。",
        caught_by="tests/paged/test_addressing.py 中的 validate_block_table（“appears twice”）"),
    Fault.STALE_SLOT_MAPPING: dict(
        title="重放了过期的 slot_mapping",
        what="写入端读取 slot 的缓冲区只在 token 数量变化时才刷新（就像重放 CUDA graph 时，它的静态输入必须手动刷新）："
             "batch 大小不变的 decode step 会写到上一步的 slot。",
        where="slot_mapping（写入端，跨 step）",
        symptom="从一个 batch 的第二个 decode step 开始，每个新 token 的 K/V 都覆盖了前一个 token 的 K/V，而最新的 slot "
                "里还是旧数据：每一步历史都丢掉一个 token。",
        caught_by="engine 的 paged == contiguous 一致性测试（tests/paged/engine/test_engine.py）"),
}

# What to notice, per fault: where to look on this page.
_NOTICE = {
    Fault.EARLY_INCREMENT: (
        "Every sequence is wrong from the first decode step on, and stays wrong: each step reads the newest "
        "token's slot (blue circle) before the write lands there. The slot holds zeros, or a freed sequence's "
        "leftovers.",
        "从第一个 decode step 开始，每个 sequence 都出错，而且一直错：每一步都在写入之前就读取了最新 token 的 "
        "slot（蓝色圆圈）。那个 slot 里是全零，或者已释放 sequence 的残留。"),
    Fault.LATE_INCREMENT: (
        "The K/V are written to the right place (no black squares): only the read is short. The blue circle is the "
        "newest token, left out of attention at every step.",
        "K/V 都写对了位置（没有黑色方框）：只是读得少了一个。蓝色圆圈是最新的 token，每一步都被排除在 attention "
        "之外。"),
    Fault.SLOT_OFF_BY_ONE: (
        "Almost every cell is outlined: every write lands one slot late. At a block's last offset the write spills "
        "into the next physical block, which may be another sequence's or a free one.",
        "几乎每个格子都有黑框：每次写入都晚了一个 slot。在 block 的最后一个 offset，写入会溢出到下一个 physical "
        "block，它可能属于另一个 sequence，也可能是空闲的。"),
    Fault.BLOCK_SIZE_MISMATCH: (
        "The writer packs tokens into blocks half the size the reader expects: almost every token lands at the "
        "wrong offset, often in the wrong block, and some overwrite each other. The output is wrong from the "
        "first read.",
        "写入端按读取端预期一半大小的 block 存放 token：几乎每个 token 都落在错误的 offset，经常还在错误的 block 里，"
        "有些还互相覆盖。从第一次读取开始输出就是错的。"),
    Fault.USE_AFTER_FREE: (
        "Nothing is wrong until a sequence finishes. Then its successor in the batch reads through the dead "
        "sequence's table: the blue circles sit in freed blocks.",
        "在某个 sequence 结束之前一切正常。结束之后，batch 中接替它的 sequence 通过已结束 sequence 的 table 读取："
        "蓝色圆圈落在已释放的 block 里。"),
    Fault.POSITION_OFF_BY_ONE: (
        "The cache itself is perfect: no cell is written or read wrongly, and random tensors show no error. Only "
        "the model, whose rotary embedding uses the position, notices.",
        "cache 本身完全正确：没有格子写错或读错，随机张量上也看不到误差。只有模型会察觉，因为它的旋转位置编码会用到 "
        "position。"),
    Fault.PAD_NOT_SKIPPED: (
        "Only the owner of the pool's last block is hurt, and only once its last slot is in its context. Every "
        "write step stamps a foreign key there.",
        "只有拥有 pool 最后一个 block 的 sequence 受害，而且要等它的最后一个 slot 进入上下文之后。每次写入都会在那里"
        "盖上一个别人的 key。"),
    Fault.ALIASED_BLOCKS: (
        "Logical blocks 0 and 1 share one physical block: tokens 4–7 overwrite tokens 0–3 at prefill, and every "
        "read of the first block returns the second's K/V.",
        "logical block 0 和 1 共用一个 physical block：prefill 时 token 4–7 覆盖了 token 0–3，之后每次读第一个 "
        "block 都得到第二个 block 的 K/V。"),
    Fault.STALE_SLOT_MAPPING: (
        "The first decode step is right; from the second on, every write lands in the cell the previous step wrote "
        "(black squares on each sequence's newest tokens), and the newest token's own slot is read while it still "
        "holds stale data.",
        "第一个 decode step 是对的；从第二步开始，每次写入都落在上一步写过的格子里（每个 sequence 最新的 token 上有黑色方框），"
        "而最新 token 自己的 slot 被读取时，里面还是旧数据。"),
}

_FIELDS = ("title", "what", "where", "symptom", "caught_by")

STRINGS = {
    "title": {"en": "5 · Bug lab", "zh": "5 · Bug 实验室"},
    "intro": {
        "en": (f"{len(Fault)} classic paged-KV-cache bugs. None of them crashes: the output just drifts. Pick one, "
               "and the same prompts run twice, through a paged engine with the bug and through a correct "
               "contiguous twin, step by step. Then the same bug is acted out on random tensors, where you can see "
               "which cells of the pool it damages."),
        "zh": (f"{len(Fault)} 个经典的 paged KV cache bug。它们都不会让程序崩溃：输出只是悄悄地漂移。选择一个 bug，"
               "同样的 prompt 会运行两次：一次经过带这个 bug 的 paged engine，一次经过正确的连续 cache 孪生引擎，逐步比较。然后在随机"
               "张量上重演同一个 bug，看看它破坏了 pool 中的哪些格子。"),
    },
    "fault": {"en": "Fault", "zh": "Bug"},
    "fault_off": {"en": "Fault off (the fix)", "zh": "关闭 bug（修复后）"},
    "fault_off_help": {"en": "Run the very same scenario without the bug: everything should match again.",
                       "zh": "在完全相同的场景下不带 bug 运行：一切都应当重新一致。"},
    "scenario": {"en": "Model scenario", "zh": "模型场景"},
    "task_recall": {"en": "recall: repeat the text after SEP", "zh": "复述：在 SEP 之后重复文本"},
    "task_continue": {"en": "continue: plain text continuation", "zh": "续写：普通文本续写"},
    "recall_needs_sep": {
        "en": ("Recall is offered only on the shipped byte model: it was trained to repeat the text after its ⟨SEP⟩ "
               "token, which this model's tokenizer does not have. The bug shows just as well in a continuation."),
        "zh": ("复述任务只在随附的字节模型上提供：它被训练为重复 ⟨SEP⟩ 之后的文本，而这个模型的分词器没有 ⟨SEP⟩。"
               "在续写任务里，bug 同样会显现。"),
    },
    "seed": {"en": "seed (free-list shuffle, random K/V)", "zh": "seed（free list 打乱顺序、随机 K/V）"},
    "card_what": {"en": "What goes wrong", "zh": "出了什么错"},
    "card_where": {"en": "Where in the chain", "zh": "在地址链的哪一环"},
    "card_symptom": {"en": "Symptom", "zh": "症状"},
    "card_caught_by": {"en": "Caught by", "zh": "由谁发现"},
    "off_banner": {
        "en": "Fault off: the same scenario, the same random draws, no bug. Every check below should be green.",
        "zh": "bug 已关闭：同样的场景、同样的随机数，没有 bug。下面的每一项检查都应该是绿色的。",
    },
    # --- the model run ---
    "model_header": {"en": "The tiny model, with and without the bug", "zh": "小模型：有 bug 与没有 bug"},
    "model_header_picked": {"en": "The model {name}, with and without the bug", "zh": "模型 {name}：有 bug 与没有 bug"},
    "running": {"en": "Running the paged engine and its contiguous twin…",
                "zh": "正在运行 paged engine 和它的连续 cache 孪生引擎…"},
    "err_no_model": {"en": "The trained tiny model is missing: {detail}",
                     "zh": "找不到训练好的小模型：{detail}"},
    "fix_no_model": {"en": "Train it once (about 10 minutes on CPU): `python -m paged.model.train`, then reload.",
                     "zh": "先训练一次（CPU 上约 10 分钟）：`python -m paged.model.train`，然后刷新页面。"},
    "err_run": {"en": "The engine refused this scenario: {message}", "zh": "engine 拒绝了这个场景：{message}"},
    "fix_run": {"en": "Pick another block_size or model scenario in the sidebar.",
                "zh": "在侧栏中换一个 block_size 或模型场景。"},
    "status_identical": {"en": "All {total} requests produced exactly the reference text.",
                         "zh": "全部 {total} 个请求的输出都和参考文本完全一致。"},
    "status_drift": {"en": "{count} of {total} requests drifted away from the reference text.",
                     "zh": "{total} 个请求中有 {count} 个偏离了参考文本。"},
    "status_hidden": {
        "en": ("The logits differ (up to {diff}), but not enough to change any greedy token: the bug is there, "
               "the text hides it."),
        "zh": "logits 有差异（最大 {diff}），但还不足以改变贪心选出的 token：bug 存在，只是文本没有暴露它。",
    },
    "request": {"en": "Request {label}", "zh": "请求 {label}"},
    "prompt": {"en": "prompt", "zh": "提示词"},
    "reference": {"en": "contiguous (reference)", "zh": "连续 cache（参考）"},
    "faulty": {"en": "paged with the bug", "zh": "带 bug 的 paged"},
    "paged_clean": {"en": "paged, no bug", "zh": "paged，无 bug"},
    "same": {"en": "identical", "zh": "完全一致"},
    "drift_at": {"en": "first different token: #{index} of the output (engine step {step})",
                 "zh": "第一个不同的 token：输出中的第 {index} 个（engine 第 {step} 步）"},
    "marker_title": {"en": "first token that differs from the reference", "zh": "第一个与参考不同的 token"},
    "special": {"en": "⟨special token⟩", "zh": "⟨特殊 token⟩"},
    "logits_title": {"en": "max |paged − contiguous| of the logits, per engine step",
                     "zh": "每个 engine step 的 logits 最大差 |paged − contiguous|"},
    "logits_y": {"en": "max |Δ logits| (log)", "zh": "最大 |Δ logits|（对数）"},
    "engine_step": {"en": "engine step", "zh": "engine 步数"},
    "tolerance": {"en": "tolerance", "zh": "容差"},
    "first_drift": {"en": "first different token", "zh": "第一个不同的 token"},
    "first_bad": {"en": "first step over the tolerance", "zh": "第一次超出容差"},
    "logits_notice": {
        "en": ("Below the dashed line the two sides agree to float rounding. A bug shows as a jump of many orders of "
               "magnitude; the star marks the step whose sampled token first differs. After that the two sides feed "
               "different tokens, so their logits no longer compare like with like. A gap in a line: that request "
               "did not run in that step (waiting, or preempted because the pool was full)."),
        "zh": ("虚线以下，两边只差浮点舍入误差。bug 表现为跳升好几个数量级；星号标出采样 token 第一次不同的那一步。"
               "在那之后，两边输入的 token 已经不同，logits 也就不再是同一件事的比较。线上的空缺表示该请求在那一步没有"
               "运行（在等待，或者因为 pool 满了被抢占）。"),
    },
    # --- random tensors ---
    "tensor_header": {"en": "The same bug on random tensors (no model)", "zh": "同一个 bug，在随机张量上（没有模型）"},
    "tensor_intro": {
        "en": ("The article's batch (section 扩展到 batch): A, B and C, block tables [7, 2, 9], [4, 1], "
               "[8, 5, 3, 6]. They decode {steps} steps on random K/V in a pool of {num_blocks} blocks; A "
               "finishes after step 3. Each step, every sequence's paged decode output is compared with a "
               "contiguous cache that got the same K/V."),
        "zh": ("文章“扩展到 batch”一节中的 sequence A、B、C（block table 为 [7, 2, 9]、[4, 1]、[8, 5, 3, 6]）"
               "在一个有 {num_blocks} 个 block 的 pool 中，用随机 K/V decode {steps} 步；A 在第 3 步之后结束。每一步都把每个 sequence 的 "
               "paged decode 输出，与收到相同 K/V 的连续 cache 比较。"),
    },
    "tensor_intro_pad": {
        "en": "For this bug, C's last block is the pool's last block ({last}), so padding writes land in C's history.",
        "zh": "针对这个 bug，C 的最后一个 block 换成了 pool 的最后一个 block（{last}），这样 padding 的写入会落进 C 的历史。",
    },
    "no_symptom": {
        "en": ("No symptom here, by design: random K/V carry no position, so a wrong position changes nothing. This "
               "bug needs the model (its rotary embedding reads the position); see the model run above."),
        "zh": ("这里没有症状，这是预期的：随机 K/V 不带位置信息，错误的 position 不会改变任何东西。这个 bug 需要模型"
               "才能显现（模型的旋转位置编码会读取 position）；请看上面的模型运行结果。"),
    },
    "rel_title": {"en": "relative error of the paged decode output, per decode step",
                  "zh": "每个 decode step 的 paged decode 输出相对误差"},
    "rel_y": {"en": "relative error (log)", "zh": "相对误差（对数）"},
    "decode_step": {"en": "decode step", "zh": "decode 步数"},
    "pool_step_help": {"en": "Step 0 is the prefill (the prompts' writes).",
                       "zh": "第 0 步是 prefill（写入 prompt）。"},
    "pool_title": {"en": "Pool after step {step}: colours = where each token belongs",
                   "zh": "第 {step} 步之后的 pool：颜色表示每个 token 应在的位置"},
    "damage": {"en": "{writes} cell(s) written wrongly in steps 0–{step}, {reads} read wrongly in step {step}.",
               "zh": "第 0–{step} 步中有 {writes} 个格子被写错，第 {step} 步有 {reads} 个格子被读错。"},
    "finished_note": {"en": "{seqs} finished after step {step}: its blocks went back to the free list.",
                      "zh": "{seqs} 在第 {step} 步之后结束：它的 block 回到了 free list。"},
    "pool_notice": {
        "en": ("Cells are coloured by the correct address chain. A thick black square: a K/V written there "
               "wrongly (hover to see whose, and where it was meant to go). A blue circle: a slot read wrongly in "
               "this step. Fault off: no marks at all."),
        "zh": ("格子的颜色按正确的地址链标注。粗黑方框：有 K/V 被错误地写到了这里（悬停可看到是谁的、本该写到哪里）。"
               "蓝色圆圈：这一步被读错的 slot。关闭 bug 后：没有任何标记。"),
    },
    "w_write": {"en": "written at", "zh": "被写到"},
    "w_read": {"en": "read from", "zh": "读自"},
    "w_skipped": {"en": "not read at all", "zh": "完全没有被读取"},
    "w_early": {"en": "read before it was written", "zh": "在写入之前就被读取"},
    "w_written_wrongly": {"en": "written wrongly", "zh": "写错"},
    "w_read_wrongly": {"en": "read wrongly", "zh": "读错"},
    "w_meant": {"en": "meant", "zh": "本应是"},
    "w_nowhere": {"en": "nowhere (slot −1)", "zh": "不写入任何位置（slot −1）"},
    "w_padding": {"en": "padding row (a copy of {seq}'s row)", "zh": "padding 行（复制自 {seq} 的那一行）"},
    "w_token": {"en": "{seq} token {token}", "zh": "{seq} 的 token {token}"},
    "export_name": {"en": "bug lab run", "zh": "bug 实验室运行记录"},
}
for _fault, _info in FAULTS.items():
    for _field in _FIELDS:
        STRINGS[f"{_field}_{_fault.value}"] = {"en": getattr(_info, _field), "zh": _ZH[_fault][_field]}
    STRINGS[f"notice_{_fault.value}"] = {"en": _NOTICE[_fault][0], "zh": _NOTICE[_fault][1]}
