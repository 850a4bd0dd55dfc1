"""Accessibility: the words of each figure's text alternative (viz.describe.AltWords; read by a screen reader)."""

STRINGS = {
    "figure": {"en": "Figure", "zh": "图"},
    "pool": {"en": "pool: {free} of {num_blocks} blocks free", "zh": "pool：{num_blocks} 个 block 中 {free} 个空闲"},
    "holds": {"en": "{seq} holds {blocks}", "zh": "{seq} 占用 {blocks}"},
    "holds_none": {"en": "{seq} holds no block", "zh": "{seq} 未占用 block"},
    "shared": {"en": "shared by several sequences: {blocks}", "zh": "多个序列共享：{blocks}"},
    "series": {"en": "{name}: {n} points, {x} {x0} to {x1}, {y} from {lo} to {hi}, the last {last}",
               "zh": "{name}：{n} 个点，{x} 从 {x0} 到 {x1}，{y} 在 {lo} 到 {hi} 之间，最后一个为 {last}"},
    "values": {"en": "{name}: {items}", "zh": "{name}：{items}"},
    "grid": {"en": "{name}: {rows} × {cols} values from {lo} to {hi}",
             "zh": "{name}：{rows} × {cols} 个值，范围 {lo} 到 {hi}"},
    "more": {"en": "… and {n} more", "zh": "……另有 {n} 项"},
    "empty": {"en": "nothing drawn yet", "zh": "尚未绘制任何内容"},
    "sep": {"en": "; ", "zh": "；"},
    # the visually hidden label before each sentence
    "label": {"en": "Figure in words:", "zh": "图的文字说明："},
}
