"""Strings of the classroom machinery every page shares: page names in the navigation, presenter mode, the
playback bar (back, step, play / pause, speed) and the previous / next links."""

STRINGS = {
    # page names in the navigation (ui.nav.PAGES)
    "nav_home": {"en": "Home", "zh": "首页"},
    "nav_address": {"en": "1 · Address translation", "zh": "1 · 地址映射"},
    "nav_gather": {"en": "2 · Gather & attend", "zh": "2 · Gather 与 attention"},
    "nav_batch": {"en": "3 · Batch decode", "zh": "3 · 批量解码"},
    "nav_engine": {"en": "4 · Engine", "zh": "4 · 推理引擎"},
    "nav_buglab": {"en": "5 · Bug lab", "zh": "5 · Bug 实验室"},
    "nav_sharing": {"en": "6 · Sharing", "zh": "6 · 共享"},
    "nav_fast": {"en": "7 · Correct → fast", "zh": "7 · 从正确到快速"},
    "nav_beam": {"en": "9 · Beam search", "zh": "9 · 束搜索（beam search）"},
    "nav_swap": {"en": "10 · Swap or recompute", "zh": "10 · 换出还是重算"},
    "nav_window": {"en": "11 · Sliding window", "zh": "11 · 滑动窗口"},
    "nav_spec": {"en": "12 · Speculative decoding", "zh": "12 · 推测解码"},
    "nav_guide": {"en": "8 · Teacher's guide", "zh": "8 · 教师指南"},
    # the navigation's sections (ui.nav.SECTIONS): the core path first, then the rest in the listed order
    "section_start": {"en": "Start", "zh": "从这里开始"},
    "section_core": {"en": "The core path", "zh": "核心路线"},
    "section_further": {"en": "Going further", "zh": "更进一步"},
    "section_teaching": {"en": "Teaching", "zh": "教学"},
    "section_chapters": {"en": "The paper's and vLLM's chapters", "zh": "论文与 vLLM 的章节"},
    "section_yours": {"en": "Your turn", "zh": "轮到你了"},
    "previous": {"en": "Previous: {page}", "zh": "上一页：{page}"},
    "next": {"en": "Next: {page}", "zh": "下一页：{page}"},
    # the name printed on the play button's shortcut badge (ui.present.key_names_css)
    "key_space": {"en": "Space", "zh": "空格"},
    # presenter mode (ui.present)
    "present": {"en": "Presenter mode", "zh": "演示模式"},
    "present_help": {"en": "Large text and figures for a projector; the settings fold away. In the link: present=1.",
                     "zh": "为投影放大文字和图；设置栏自动收起。链接参数：present=1。"},
    # the playback bar (ui.playback)
    "back": {"en": "Back", "zh": "后退"},
    "back_help": {"en": "Undo the last step (shortcut: ←)", "zh": "撤销上一步（快捷键：←）"},
    "step": {"en": "Next step", "zh": "下一步"},  # the step button of every stepping page: one name
    "step_help": {"en": "One step (shortcut: →)", "zh": "前进一步（快捷键：→）"},
    "play": {"en": "Play", "zh": "播放"},
    "pause": {"en": "Pause", "zh": "暂停"},
    "play_help": {"en": "Step on its own at the chosen speed until there is nothing left (shortcut: space)",
                  "zh": "按所选速度自动前进，直到无事可做（快捷键：空格）"},
    "speed": {"en": "Speed", "zh": "速度"},
    "speed_value": {"en": "{speed} steps/s", "zh": "每秒 {speed} 步"},
    "speed_value_one": {"en": "{speed} step/s", "zh": "每秒 {speed} 步"},  # English: 1 step/s, 0.5 or 2 steps/s
    "step_counter": {"en": "Step {step}", "zh": "第 {step} 步"},
    "step_counter_of": {"en": "Step {step} / {total}", "zh": "第 {step} / {total} 步"},
}
