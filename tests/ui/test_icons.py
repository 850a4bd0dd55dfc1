"""Icons render on every machine: the app's files (app.py, app_pages/, ui/, ui/strings/) use Streamlit's Material
icons (":material/name:"), never emoji, which need a colour-emoji font many machines lack (they show as boxes)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Pictographs and symbols drawn from an emoji font: the emoji blocks, the dingbats and miscellaneous symbols
# (U+2600-U+27BF: ⚠ ✔ ✗ ♻ …), the arrows-and-stars block (⭐), the hourglass / stopwatch symbols, and the
# variation selector that asks for the emoji form.
EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u23E9-\u23FA\uFE0F]")


def app_files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py")), *sorted((ROOT / "ui").rglob("*.py"))]


def test_no_emoji_in_the_app():
    hits = [f"{p.relative_to(ROOT)}:{i}: {m.group()!r} (U+{ord(m.group()):04X})"
            for p in app_files() for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            for m in EMOJI.finditer(line)]
    assert not hits, "\n".join(hits)


def test_the_check_sees_an_emoji_icon():
    assert EMOJI.search('st.info(text, icon="👀")') and EMOJI.search("⚠️ careful") and EMOJI.search("✔ matches")
    assert not EMOJI.search('st.info(text, icon=":material/visibility:") → slot 9')
