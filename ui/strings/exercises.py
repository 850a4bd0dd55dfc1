"""Page 13 · Your turn (only when the server was started with PAGED_EXERCISES=DIR)."""

STRINGS = {
    "nav": {"en": "13 · Your turn", "zh": "13 · 轮到你了"},
    "title": {"en": "13 · Your turn: your code, checked", "zh": "13 · 轮到你了：检查你的代码"},
    "intro": {
        "en": (
            "Your own addressing.py, kv_cache.py, attention.py, block_manager.py and sequence.py, "
            "from the folder "
            "this server was started with, run against the library. Save a file and rerun: the "
            "check runs again."
        ),
        "zh": (
            "来自启动本服务器时指定文件夹的你自己的 addressing.py、kv_cache.py、attention.py、block_manager.py 和 "
            "sequence.py，与库对比运行。保存文件后重新运行页面，检查就会再跑一遍。"
        ),
    },
    "off": {
        "en": (
            "This page shows a learner's own code. It is on only when the server is started with "
            "PAGED_EXERCISES=DIR (a folder written by `python -m paged exercises init DIR`); code "
            "never comes "
            "from the browser."
        ),
        "zh": (
            "这个页面展示学习者自己的代码。只有用 PAGED_EXERCISES=DIR 启动服务器时才会开启（DIR 由 "
            "`python -m paged exercises init DIR` 生成）；代码从不来自浏览器。"
        ),
    },
    "no_workspace": {"en": "No workspace to check: {error}", "zh": "没有可检查的工作区：{error}"},
    "folder": {"en": "Folder: `{path}`", "zh": "文件夹：`{path}`"},
    "recheck": {"en": "Check again", "zh": "重新检查"},
    "checking": {"en": "Running the exercises on your code…", "zh": "正在用你的代码运行练习……"},
    "verdicts": {"en": "Verdicts", "zh": "结果"},
    "col_exercise": {"en": "exercise", "zh": "练习"},
    "col_ok": {"en": "passed", "zh": "通过"},
    "col_link": {"en": "first broken link", "zh": "第一个出错的环节"},
    "col_seconds": {"en": "seconds", "zh": "秒"},
    "yes": {"en": "yes", "zh": "是"},
    "no": {"en": "no", "zh": "否"},
    "not_run": {"en": "not run", "zh": "未运行"},
    "all_green": {
        "en": "All {n} exercises pass: your code runs the shipped model token for token like the "
        "contiguous twin.",
        "zh": "全部 {n} 个练习通过：你的代码让自带模型的输出与连续孪生引擎逐 token 一致。",
    },
    "failed": {"en": "Exercise **{exercise}** fails.", "zh": "练习 **{exercise}** 未通过。"},
    "chain": {"en": "The chain", "zh": "地址链"},
    "chain_caption": {
        "en": "Red: the first link whose value differs from the reference. Green: shown right. "
        "Grey: not reached.",
        "zh": "红色：第一个与参考不同的环节。绿色：已确认正确。灰色：尚未检查到。",
    },
    "hint": {"en": "A hint (never the answer)", "zh": "提示（不是答案）"},
    "locate_title": {
        "en": "Your locate(), token {token}: block_table 7, 2, 9, block_size 4",
        "zh": "你的 locate()，token {token}：block_table 7, 2, 9，block_size 4",
    },
    "token": {"en": "token_index", "zh": "token_index"},
    "no_chain": {
        "en": "Your locate() has not passed yet: the chain is drawn once it does.",
        "zh": "你的 locate() 还没通过：通过后才画地址链。",
    },
    "engine": {
        "en": "The engine on your code, beside its contiguous twin",
        "zh": "用你的代码运行的引擎，与连续孪生引擎并排",
    },
    "no_engine": {
        "en": "The engine exercise has not run yet: it runs once exercises 1–9 pass.",
        "zh": "引擎练习还没运行：练习 1–9 通过后才会运行。",
    },
    "step": {"en": "engine step", "zh": "引擎步"},
    "pool_title": {
        "en": "The pool after step {step}, as your block manager laid it out",
        "zh": "第 {step} 步之后的池，由你的 Block Manager 分配",
    },
    "step_caption": {
        "en": "Step {step} ({phase}): sequences {seqs}, context_lens {lens}, "
        "slots {slots} written, tokens {tokens}.",
        "zh": "第 {step} 步（{phase}）：序列 {seqs}，context_lens {lens}，写入的 slot {slots}，token {tokens}。",
    },
    "prefill": {"en": "prefill", "zh": "prefill"},
    "decode": {"en": "decode", "zh": "decode"},
    "col_request": {"en": "request", "zh": "请求"},
    "col_yours": {"en": "your engine", "zh": "你的引擎"},
    "col_twin": {"en": "contiguous twin", "zh": "连续孪生引擎"},
    "col_same": {"en": "same", "zh": "相同"},
}
