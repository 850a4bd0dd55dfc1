"""The page a browser gets when the server already holds as many learners as it is set to (ui/capacity.py)."""

STRINGS = {
    "title": {"en": "The server is full", "zh": "服务器已满"},
    "text": {
        "en": ("This server is set to hold {max_sessions} learners at once, and all {max_sessions} places are taken, "
               "so every learner's clicks stay quick. Try again in a minute: a place frees up when someone closes "
               "their tab."),
        "zh": ("这台服务器最多同时容纳 {max_sessions} 位学习者，现在 {max_sessions} 个位置都已占用，"
               "这样每个人的点击都能保持流畅。请一分钟后再试：有人关闭标签页后就会空出位置。"),
    },
    "retry": {"en": "Try again", "zh": "重试"},
    "waiting": {
        "en": "Opening the page: {ahead} other new tab(s) are opening just before this one, so it takes a moment.",
        "zh": "正在打开页面：另有 {ahead} 个新标签页正在它之前打开，请稍候片刻。",
    },
    "operator": {
        "en": "For the operator: the limit is the environment variable PAGED_MAX_SESSIONS (default {default}).",
        "zh": "管理员请注意：上限由环境变量 PAGED_MAX_SESSIONS 设置（默认 {default}）。",
    },
}
