"""Page 6 · Sharing (knob names, the request form, errors and buttons come from "engine.<key>")."""

STRINGS = {
    "title": {"en": "6 · Block sharing", "zh": "6 · Block 共享"},
    "intro": {
        "en": ("Because a block table is only a list of physical block ids, two sequences can point at the same "
               "block. Prefix caching hands a new prompt the cached full blocks of an equal prefix; parallel sampling "
               "(n > 1) forks one prompt into n sequences that share its blocks. A reference count per block says how "
               "many tables hold it, and a shared block is never written: the first write copies it (copy-on-write)."),
        "zh": ("block table 只是 physical block 编号的列表，所以两个 sequence 可以指向同一个 block。prefix caching 让新 prompt "
               "直接使用相同前缀已缓存的完整 block；并行采样（n > 1）把一个 prompt 分叉成 n 个共享 block 的 sequence。"
               "每个 block 的引用计数（ref count）记录有多少个 block table 持有它；共享的 block 从不被写入：第一次写入前先"
               "复制它（copy-on-write）。"),
    },
    "scenario_prefix": {"en": "Two prompts sharing a long prefix", "zh": "两个共享长前缀的 prompt"},
    "scenario_same": {"en": "The same prompt twice (full hit: the last block is still computed)",
                      "zh": "同一个 prompt 两次（完全命中：最后一个 block 仍要计算）"},
    "scenario_samples": {"en": "n = 3 samples of one prompt (fork + copy-on-write)",
                         "zh": "一个 prompt 采样 n = 3 次（fork + copy-on-write）"},
    "caching_on": {"en": "Prefix caching is on (enable_prefix_caching=True); watermark 0.",
                   "zh": "prefix caching 已开启（enable_prefix_caching=True）；watermark 为 0。"},
    "n": {"en": "n (parallel samples)", "zh": "n（并行采样数）"},
    "n_help": {"en": "A whole number from 1 to 4: how many samples fork from the prompt.",
               "zh": "1 到 4 之间的整数：从这个 prompt 分叉出多少个样本。"},
    "no_step_yet": {"en": "No step yet: press “Next step”. Requests added later arrive after the step shown above.",
                    "zh": "还没有运行任何一步：点击“下一步”。之后添加的请求会在上面显示的步数之后到达。"},
    "hits_msg": {
        "en": ("{seq}'s prompt: {hits} of its {blocks} logical blocks were prefix-cache hits (physical blocks "
               "{hit_blocks}, K/V reused, not recomputed); {computed} computed at this prefill."),
        "zh": ("{seq} 的 prompt：{blocks} 个 logical block 中有 {hits} 个命中 prefix cache（physical block {hit_blocks}，"
               "直接复用 K/V，不再计算）；{computed} 个在本次 prefill 中计算。"),
    },
    "miss_msg": {"en": "{seq}'s prompt: no prefix-cache hit, all {blocks} blocks computed at this prefill.",
                 "zh": "{seq} 的 prompt：没有命中 prefix cache，{blocks} 个 block 都在本次 prefill 中计算。"},
    "fork_msg": {
        "en": ("{seq} forked into {children} after its prefill: they share {seq}'s {blocks} blocks (ref count {ref}) "
               "and each sampled its own first token from the same logits."),
        "zh": ("{seq} 在 prefill 后分叉出 {children}：它们共享 {seq} 的 {blocks} 个 block（ref count {ref}），"
               "并各自从同一组 logits 中采样自己的第一个 token。"),
    },
    "cow_msg": {
        "en": ("Copy-on-write: {seq} was about to write into shared block {src}, so block {src}'s K/V were first "
               "copied to free block {dst} and {seq}'s table now points there (arrow in the pool)."),
        "zh": ("copy-on-write：{seq} 要写入共享的 block {src}，所以先把 block {src} 的 K/V 复制到空闲 block {dst}，"
               "{seq} 的 block table 改为指向它（见 pool 中的箭头）。"),
    },
    "metric_held": {"en": "blocks held (with sharing)", "zh": "占用的 block（共享）"},
    "metric_tables": {"en": "blocks in all tables (no sharing)", "zh": "所有表中的 block（不共享）"},
    "metric_saved": {"en": "blocks saved: num_shared_saved()", "zh": "节省的 block：num_shared_saved()"},
    "metric_shared": {"en": "shared blocks (ref count > 1)", "zh": "共享 block（ref count > 1）"},
    "pool_title": {"en": "Physical pool by block: ref count in each cell · {free} of {num_blocks} free",
                   "zh": "按 block 显示的 physical pool：格中为 ref count · {num_blocks} 个中 {free} 个空闲"},
    "pool_notice": {
        "en": ("The large number is the block's ref count: how many block tables hold it; the small one in the "
               "corner is its physical block id. A black outline around a block and coloured dots: a shared block and "
               "its holders. The recycling mark: free, but still hashed, so an equal prefix takes it back. A red "
               "outline and arrow: this step's copy-on-write. Pale: a last block still filling up."),
        "zh": ("大数字是该 block 的 ref count：有多少个 block table 持有它；角上的小数字是它的 physical block 编号。"
               "block 外的黑框和彩色圆点：共享的 block 及其持有者。回收标记：已空闲但仍保留 hash，相同前缀会直接取回它。"
               "红框和箭头：本步的 copy-on-write。浅色：还在写入的最后一个 block。"),
    },
    "hits_title": {"en": "Prefix-cache hits per logical block at allocation (newest first; physical block printed)",
                   "zh": "分配时每个 logical block 是否命中 prefix cache（最新在上；格中为 physical block）"},
    "hit": {"en": "hit (reused)", "zh": "命中（复用）"},
    "computed": {"en": "computed", "zh": "计算"},
    # the pool's hover (viz.sharing.RefcountWords, one key ref_<field> per field)
    "ref_held": {"en": "physical block {block}: ref count {ref} · held by {holders} · {filled}/{block_size} slots written",
                 "zh": "physical block {block}：ref count {ref} · 持有者 {holders} · 已写入 {filled}/{block_size} 个 slot"},
    "ref_holder": {"en": "{seq} (logical block {logical})", "zh": "{seq}（logical block {logical}）"},
    "ref_tokens": {"en": " · tokens {tokens}", "zh": " · token：{tokens}"},
    "ref_hashed": {"en": " · hashed: a prompt with this prefix reuses it",
                   "zh": " · 已计算 hash：前缀相同的 prompt 会直接复用它"},
    "ref_cached_free": {"en": ("physical block {block}: free (ref count 0), but it keeps its prefix-cache hash: a "
                               "prompt with this prefix takes it back without recomputing"),
                        "zh": ("physical block {block}：空闲（ref count 0），但保留了 prefix cache 的 hash："
                               "前缀相同的 prompt 无需重新计算即可取回它")},
    "ref_free": {"en": "physical block {block}: free (ref count 0)", "zh": "physical block {block}：空闲（ref count 0）"},
    # the hits rows' names and tooltips (viz.sharing.HitsLabels, one key hits_<field> per field)
    "hits_row": {"en": "{seq} · step {step}", "zh": "{seq} · 第 {step} 步"},
    "hits_entry": {"en": "{seq} logical block {logical} → physical block {block}: {verdict}",
                   "zh": "{seq} 的 logical block {logical} → physical block {block}：{verdict}"},
    "hits_hit": {"en": "prefix-cache hit, K/V reused", "zh": "命中 prefix cache，直接复用 K/V"},
    "hits_miss": {"en": "computed at prefill", "zh": "在 prefill 中计算"},
    "hits_notice": {
        "en": ("Only full blocks are hashed (a chained hash of the whole prefix, token ids checked). Even when the "
               "whole prompt is cached, the block holding its last token is computed: the model needs at least one "
               "token to run, and a shared block must never be written."),
        "zh": ("只有写满的 block 会被 hash（整个前缀的链式 hash，并核对 token id）。即使整个 prompt 都已缓存，含有最后一个 "
               "token 的 block 仍要计算：模型至少要运行一个 token，而且共享的 block 绝不能被写入。"),
    },
    "samples_header": {"en": "Parallel samples of {seq} (n = {n}), side by side",
                       "zh": "{seq} 的并行采样（n = {n}），并排显示"},
    "sample_title": {"en": "**{seq}** · sample {i}", "zh": "**{seq}** · 第 {i} 个样本"},
    "sample_caption": {"en": "block_table {table} · {status}", "zh": "block_table {table} · {status}"},
    "memory_title": {"en": "Blocks held with sharing vs without, per step", "zh": "每一步：共享与不共享时占用的 block"},
    "held_name": {"en": "held with sharing", "zh": "共享时占用"},
    "without_name": {"en": "sum of table lengths (no sharing)", "zh": "block table 长度之和（不共享）"},
    "axis_blocks": {"en": "blocks", "zh": "block 数"},
    "memory_notice": {
        "en": ("Without sharing every table would need its own copy of each block: the dotted line. The shaded gap "
               "is num_shared_saved() = references held − distinct blocks in use. It shrinks as copy-on-write and new "
               "blocks give the samples their own tails."),
        "zh": ("不共享时每个 block table 都需要自己的一份 block：即虚线。阴影部分就是 num_shared_saved() = 引用总数 − "
               "实际使用的不同 block 数。随着 copy-on-write 和新 block 让各个样本拥有各自的尾部，差距会缩小。"),
    },
    "col_request": {"en": "request", "zh": "请求"},
    "twins_line": {"en": "Paged engine with sharing vs contiguous twin without:",
                   "zh": "共享的 paged 引擎与不共享的连续 cache 孪生引擎："},
}
