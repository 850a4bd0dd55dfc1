"""Page 4 · Engine: "break a module" (a bug lab fault in the paged twin). Fault titles come from buglab.py."""

STRINGS = {
    "pick": {"en": "Break a module (a bug lab fault)", "zh": "弄坏一个模块（Bug 实验室的 bug）"},
    "pick_help": {"en": "Injects one classic bug into the paged engine only; its contiguous twin stays correct, so "
                        "every figure below shows where the broken link leads. The run restarts from step 0.",
                  "zh": "只给 paged 引擎注入一个经典 bug；它的 contiguous 孪生引擎保持正确，所以下面每张图都显示坏掉的环节把结果带到了"
                        "哪里。运行会从第 0 步重新开始。"},
    "needs_whole_prefill": {"en": "Not broken: a fault is injected only with whole-prompt prefill. Switch "
                                  "enable_chunked_prefill off to break a module.",
                            "zh": "未注入：只有整段 prompt prefill 时才能注入 bug。关闭 enable_chunked_prefill 后才能弄坏模块。"},
    "none": {"en": "nothing broken", "zh": "不弄坏任何模块"},
    "banner": {"en": "Broken on purpose: **{title}**. Module {module}, link: {link} (lit in the chain below).",
               "zh": "故意弄坏：**{title}**。模块 {module}，环节：{link}（下方链路中已标出）。"},
    "parted": {"en": "The twins part at **step {step}, sequence {seq}**: max |Δlogits| {diff} > {tol} (fp32 "
                     "rounding).",
               "zh": "两个孪生引擎在**第 {step} 步、序列 {seq}** 分道：max |Δlogits| {diff} > {tol}（fp32 舍入误差）。"},
    "token": {"en": " First different token: step {step}, sequence {seq}.",
              "zh": "第一个不同的 token：第 {step} 步，序列 {seq}。"},
    "same_tokens": {"en": " Every token so far is still the same: the drift is in the logits only.",
                    "zh": "到目前为止每个 token 仍然相同：偏差只在 logits 中。"},
    "not_yet": {"en": "The twins still agree after {steps} step(s). This bug shows when: {symptom}",
                "zh": "{steps} 步之后两个孪生引擎仍然一致。这个 bug 会在这种情况下显现：{symptom}"},
    "link_read_before_write": {"en": "the read runs before the write", "zh": "先读后写"},
    "link_pad_written": {"en": "padding slot −1 written", "zh": "写入了 padding 的 slot −1"},
    "link_slot_mapping": {"en": "slot_mapping", "zh": "slot_mapping"},
    "link_context_lens": {"en": "context_lens", "zh": "context_lens"},
    "link_block_tables": {"en": "block_tables", "zh": "block_tables"},
    "link_positions": {"en": "positions", "zh": "positions"},
    "broken_mark": {"en": "broken: {link}", "zh": "坏掉：{link}"},
    # --- the state rule as the broken link saw it ---
    "rule_header": {"en": "The state rule, as the broken link saw it", "zh": "坏掉的环节眼中的状态规则"},
    "rule_caption": {
        "en": ("Sequence {seq}, the paged twin's steps. The rule: after a step cached_token_count = n, so attention "
               "reads n tokens, all written before the read, token i fed at position i and written at "
               "table[i // block_size] · block_size + i % block_size. ≠ marks what the broken link did instead."),
        "zh": ("序列 {seq}，paged 孪生引擎的各步。规则：一步之后 cached_token_count = n，所以 attention 读取 n 个 token，"
               "读之前全部已写入；token i 在位置 i 喂入，写到 table[i // block_size] · block_size + i % block_size。"
               "≠ 标出坏掉的环节实际做了什么。")},
    "col_step": {"en": "step", "zh": "步"},
    "col_phase": {"en": "phase", "zh": "阶段"},
    "col_cached": {"en": "cached_token_count", "zh": "cached_token_count"},
    "col_read": {"en": "attention read (context_len)", "zh": "attention 读取（context_len）"},
    "col_written": {"en": "written when read", "zh": "读取时已写入"},
    "col_position": {"en": "position fed", "zh": "喂入的位置"},
    "col_slot": {"en": "slot written", "zh": "写入的 slot"},
    "wrong": {"en": "{got} ≠ (rule: {want})", "zh": "{got} ≠（规则：{want}）"},
    "rule_ok": {"en": "Every row keeps the rule: this bug breaks a link the table does not show ({link}); the twins' "
                      "verdict above says where it shows.",
                "zh": "每一行都符合规则：这个 bug 弄坏的环节不在这张表里（{link}）；上面两个孪生引擎的结论说明它在哪里显现。"},
}
