"""ui.safe_text.shown, the one escaping helper: foreign text rendered by a GFM renderer (markdown-it with linkify,
like Streamlit's remark-gfm) reads exactly as given, with no link, autolink, emphasis, HTML or line structure made
of it; server paths become folder names."""

from __future__ import annotations

import html

import pytest
from markdown_it import MarkdownIt

from ui.parsers import quoted
from ui.safe_text import hide_paths, shown, shown_html, unescaped

GFM = MarkdownIt("gfm-like")  # tables, strikethrough, linkify (bare URLs, www., e-mail)

HOSTILE = [
    "[Fix…](https://evil.example/x)",
    "https://evil.example/x",
    "www.evil.example",
    "mail me: a@evil.example",
    "<b>bold</b><script>alert(1)</script>",
    "**bold** _it_ ~~gone~~ `code`",
    "$x^2$ :material/home: :smile:",
    "# heading\n- item\n1. one\n> quote",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "![img](https://evil.example/i.png)",
    "&lt;b&gt; &amp; &#x41;",
    "a\\*b\\",
]


def rendered_text(markdown: str) -> str:
    """The text a reader sees: the rendered HTML's single paragraph, tags refused (asserted), entities decoded."""
    out = GFM.render(markdown).strip()
    assert out.startswith("<p>") and out.endswith("</p>"), out
    inner = out[3:-4]
    assert "<" not in inner, f"markup was made of foreign text: {out}"
    return html.unescape(inner)


@pytest.mark.parametrize("text", HOSTILE)
def test_foreign_text_renders_as_itself(text):
    """shown(text) renders to one paragraph holding the text itself (newlines as spaces), no tag at all."""
    expected = " ".join(text.split("\n"))
    assert rendered_text(shown(text)) == expected
    assert unescaped(shown(text)) == expected


def test_quoted_is_the_same_helper_cut_short():
    """ui.parsers.quoted (typed text in messages) is shown, cut to its length."""
    assert quoted("[a](b)" * 20) == shown("[a](b)" * 20, 30)
    assert rendered_text(quoted("[a](https://x.example)")) == "[a](https://x.example)"


def test_server_paths_become_folder_names():
    """A known folder's path (given or resolved) becomes its name; any other absolute path is cut to …/last; a
    slash between words or around spaces is kept."""
    text = ("/srv/models/smollm2/config.json: model_type must be 'llama'; /srv/models/smollm2: 'x' resolves to "
            "/etc/passwd, outside the model directory; F32 / F16, a/b")
    out = hide_paths(text, ["/srv/models/smollm2"])
    assert out == ("smollm2/config.json: model_type must be 'llama'; smollm2: 'x' resolves to …/passwd, outside "
                   "the model directory; F32 / F16, a/b")
    assert "/srv" not in shown(text, paths=[]) and "/etc" not in shown(text, paths=[])


def test_control_characters_are_dropped_and_long_text_cut():
    """No control character survives; text past max_chars ends in …."""
    assert unescaped(shown("a\x00b\x1bc")) == "abc"
    assert unescaped(shown("x" * 50, max_chars=10)) == "x" * 9 + "…"


@pytest.mark.parametrize("text", HOSTILE[:8])
def test_foreign_text_inside_the_pages_own_html_renders_as_itself(text):
    """shown_html(text) inside a page's <span> (st.markdown with unsafe_allow_html): no tag but the span, the text
    itself once rendered."""
    text = text.replace("\n", " ")
    out = GFM.render(f"<span class='x'>{shown_html(text)}</span>").strip()
    inner = out.removeprefix("<p><span class='x'>").removesuffix("</span></p>")
    assert "<" not in inner, out
    assert html.unescape(inner) == text
