"""Every text `check` prints, in English and 简体中文: labels, and one hint per exercise (a direction,
never the answer)."""

from __future__ import annotations

LANGS = ("en", "zh")

LABELS = {
    "en": dict(
        ok="ok",
        failed="FAILED",
        link="first broken link",
        no_link="no link named",
        input="input",
        expected="expected",
        got="got",
        hint="hint",
        not_run="not run",
        all_green="all {n} exercises pass",
        timeout="took longer than {s:g} s and was stopped: an infinite loop or a very slow one?",
        died="the check's process ended without a result (exit code {code}): a crash or out of "
             "memory in "
        "your code?",
        missing="{path} holds no workspace: run `python -m paged exercises init {path}`",
        unknown="unknown exercise {name!r}; choose one of {names}",
        traceback="traceback (your files)",
        start_timeout="the check's process did not start within {s:g} s",
    ),
    "zh": dict(
        ok="通过",
        failed="未通过",
        link="第一个出错的环节",
        no_link="无法指出环节",
        input="输入",
        expected="期望",
        got="实际",
        hint="提示",
        not_run="未运行",
        all_green="全部 {n} 个练习通过",
        timeout="运行超过 {s:g} 秒被终止：是死循环，还是太慢？",
        died="检查进程没有给出结果就结束了（退出码 {code}）：你的代码崩溃或内存不足？",
        missing="{path} 里没有练习工作区：先运行 `python -m paged exercises init {path}`",
        unknown="没有名为 {name!r} 的练习；可选：{names}",
        traceback="traceback（你的文件）",
        start_timeout="检查进程在 {s:g} 秒内没有启动",
    ),
}

HINTS = {
    "locate": (
        "Two of the links need no table at all: integer division and remainder by block_size. Only "
        "physical_block_id reads the block_table.",
        "有两环根本不需要 block table：对 block_size 做整除和取余。只有 physical_block_id 要查 block_table。",
    ),
    "slot_mapping": (
        "A slot counts token slots from the start of the pool, block by block: how many slots lie "
        "before the first slot of a physical block?",
        "slot 从池的开头按 block 逐个数 token 位置：一个 physical block 的第一个 slot 之前有多少个 slot？",
    ),
    "write_kv": (
        "The cache is indexed [block, offset]: split each slot back into the two. What should "
        "happen to a "
        "slot of -1?",
        "cache 的下标是 [block, offset]：把每个 slot 拆回这两个数。slot 为 -1 时应该怎样？",
    ),
    "gather_loop": (
        "Walk tokens 0 .. context_len - 1 in logical order; each token's K lives at the address "
        "the "
        "chain gives, not at the token index.",
        "按逻辑顺序遍历 token 0 .. context_len - 1；每个 token 的 K 在地址链给出的位置，而不是 token 下标处。",
    ),
    "gather": (
        "Viewed as [num_blocks * block_size, num_kv_heads, head_dim], the pool has one row per "
        "slot: one "
        "indexing with a tensor of slots reads them all.",
        "把池看成 [num_blocks * block_size, num_kv_heads, head_dim]，每个 slot 一行：用一个 slot 张量一次索引全部读出。",
    ),
    "attention": (
        "Grouped-query attention: neighbouring query heads share one kv head (a group of "
        "num_heads // num_kv_heads heads in a row per kv head). The default scale is "
        "1/sqrt(head_dim). With causal, the queries are the context's last q_len tokens.",
        "分组查询注意力：相邻的 query head 共用一个 kv head（每个 kv head 对应连续的 "
        "num_heads // num_kv_heads 个 head）。默认 scale 是 1/sqrt(head_dim)。"
        "causal 时，query 是上下文的最后 q_len 个 token。",
    ),
    "decode": (
        "Each row reads exactly its own context_lens[b] tokens, no more, no fewer, through its own "
        "table; entries past a row's blocks are -1 padding and must never be read.",
        "每一行经自己的表恰好读 context_lens[b] 个 token，不多不少；"
        "超出该行 block 的表项是 -1 padding，绝不能读。",
    ),
    "block_manager": (
        "A block belongs to one table at a time. append_slot takes a block only when the last one "
        "is "
        "full, and computes the slot afresh each call. After free, nothing may read through the "
        "table.",
        "一个 block 同一时间只属于一张表。append_slot 只在最后一块满时才拿新 block，每次都重新算 slot。free 之后不能再经这张表读取。",
    ),
    "state_rule": (
        "cached_token_count counts K/V that are written. The token just sampled has none yet: its "
        "K/V "
        "are written by the next decode step.",
        "cached_token_count 数的是已写入的 K/V。刚采样的 token 还没有 K/V：它的 K/V 在下一个 decode 步写入。",
    ),
    "engine": (
        "Everything before passed on its own: look at the step and layer the message names, and at "
        "what your "
        "functions get there (block tables grow, sequences finish, a freed block is reused).",
        "前面的练习单独都通过了：看消息指出的步和层，以及你的函数在那里收到了什么（表在增长、序列结束、释放的 block 被重用）。",
    ),
}

# block_manager's hint, one sentence per method: the one that failed comes first
METHOD_HINTS = {
    "allocate": (
        "allocate: a block belongs to one table at a time: take each block off the free list.",
        "allocate：一个 block 同一时间只属于一张表：每个 block 都要从空闲列表里取走。",
    ),
    "append_slot": (
        "append_slot: take a block only when the last one is full, and compute the slot afresh "
        "each call.",
        "append_slot：只在最后一块满时才拿新 block，每次都重新算 slot。",
    ),
    "free": (
        "free: give every block back, and after free nothing may read through the table.",
        "free：还回每个 block；free 之后不能再经这张表读取。",
    ),
}


def hint(record: dict, lang: str = "en") -> str:
    """The hint for a record's exercise in `lang`; block_manager's starts with the method that
    failed (record["method"]), then the other methods'.
    Raises: KeyError for an unknown exercise."""
    i, method = LANGS.index(lang), record.get("method")
    if record["exercise"] != "block_manager" or method not in METHOD_HINTS:
        return HINTS[record["exercise"]][i]
    order = [method] + [m for m in METHOD_HINTS if m != method]
    return " ".join(METHOD_HINTS[m][i] for m in order)
