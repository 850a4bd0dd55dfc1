"""Strings of page 8, the teacher's guide (its nav name and strings module are both "guide")."""

STRINGS = {
    "title": {"en": "Teacher's guide: a 45-minute lesson", "zh": "教师指南：45 分钟的一堂课"},
    "link": {"en": "Teacher's guide: a 45-minute lesson with a link for every step",
             "zh": "教师指南：45 分钟的一堂课，每一步都有对应链接"},
    "missing": {"en": "The guide file {path} is missing.", "zh": "缺少指南文件 {path}。"},
    "fix": {"en": "Restore docs/ from the repository.", "zh": "从仓库中恢复 docs/ 目录。"},
}
