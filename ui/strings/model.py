"""The model picker of the engine pages (ui/model_picker.py): the shipped model or an operator-allowed checkpoint."""

STRINGS = {
    "picker": {"en": "Model", "zh": "模型"},
    "picker_help": {
        "en": ("The shipped tiny byte-level Llama, or a local Hugging Face checkpoint the server's operator allowed "
               "(PAGED_MODEL_DIRS). Changing it replays this page's requests from step 0."),
        "zh": ("随附的小型字节级 Llama，或服务器管理员允许的本地 Hugging Face checkpoint（PAGED_MODEL_DIRS）。"
               "切换模型后，本页的请求会从第 0 步重新运行。"),
    },
    "shipped": {"en": "Shipped tiny Llama (bytes)", "zh": "随附的小型 Llama（字节）"},
    "plain_text": {
        "en": "Prompts are plain text in its own tokenizer (⟨SEP⟩ is the byte model's). ␣ space · ↵ newline · "
              "⟨0xNN⟩ one byte of a split character (or a control byte) · ⟨#id⟩ an id its tokenizer has no token for.",
        "zh": "prompt 是用它自己的分词器编码的普通文本（⟨SEP⟩ 只属于字节模型）。␣ 空格 · ↵ 换行 · "
              "⟨0xNN⟩ 被拆开字符的一个字节（或控制字节）· ⟨#id⟩ 分词器里没有对应 token 的 id。",
    },
    "loading": {"en": "Loading the model {name}…", "zh": "正在加载模型 {name}…"},
    "err_load": {"en": "The model {name} could not be loaded: {detail}", "zh": "无法加载模型 {name}：{detail}"},
    "fix_load": {
        "en": ("Pick another model in the sidebar. The directory needs config.json (Llama, Qwen2 or Qwen3), "
               "model.safetensors (or shards with their index) and tokenizer.json; check it with "
               "`python -m paged generate --model DIR`."),
        "zh": ("在侧边栏选择其他模型。该目录需要 config.json（Llama、Qwen2 或 Qwen3）、model.safetensors（或分片及其索引）"
               "和 tokenizer.json；可用 `python -m paged generate --model DIR` 检查。"),
    },
    "err_default": {"en": "PAGED_MODEL_DIR names a folder “{path}” that is not a model directory (no config.json "
                          "there); the shipped model is the default instead.",
                    "zh": "PAGED_MODEL_DIR 指向的文件夹“{path}”不是模型目录（其中没有 config.json）；改用随附模型作为默认模型。"},
    "fix_default": {"en": "Point PAGED_MODEL_DIR at a local checkpoint directory and restart the app.",
                    "zh": "把 PAGED_MODEL_DIR 指向本地 checkpoint 目录，然后重启应用。"},
    "err_engine": {"en": "The engine could not be built: {message}", "zh": "无法创建引擎：{message}"},
    "fix_engine": {"en": "Lower num_blocks or block_size in the sidebar, or pick a smaller model.",
                   "zh": "在侧边栏调低 num_blocks 或 block_size，或选择更小的模型。"},
}
