"""Text from outside shown as text: the one escaping helper for every foreign string that reaches markdown.

Foreign text is anything the app did not write itself: what a learner typed, a link's values, and everything a
checkpoint directory says about itself (its config's `model_type`, its folder's name, a loader's error message
quoting them). Streamlit renders st.error / st.warning / st.info / st.markdown / st.spinner / st.subheader text as
markdown, so a `model_type` of "[Fix…](https://evil.example/x)" would become a link, "**" bold, "$x$" LaTeX,
":material/x:" an icon and "<b>" HTML. `shown(text)` makes such text literal:

    st.error(ctx.t("model.err_load", name=shown(name), detail=shown(message, paths=folders)))

- control characters are dropped and newlines become spaces (no list, heading or table can start);
- every ASCII punctuation character markdown gives a meaning to is backslash-escaped, "." and "@" included, so
  neither a link nor a bare URL / www. / e-mail autolink forms;
- with `paths`, a server path never shows: a known model folder's path becomes its folder name, and any other
  absolute path is cut to "…/" + its last part.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Iterable

CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # control characters (tab and newlines kept)
_NEWLINES = re.compile(r"[\r\n\t\u2028\u2029\x85]+")
_PUNCT = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:@&=^\"'])")
# An absolute path: "/" then at least one more part; not the "/" of "F32 / F16" or of "a/b" inside a word.
_ABS_PATH = re.compile(r"(?<![\w.~:<>/-])/(?:[^\s/'\"`,;()\[\]]+/)*([^\s/'\"`,;()\[\]]+)")


def hide_paths(text: str, folders: Iterable[Path | str] = ()) -> str:
    """`text` with each of `folders` (given and resolved forms, longest first) replaced by its folder name and any
    other absolute path replaced by "…/" + its last part."""
    names: dict[str, str] = {}
    for folder in folders:
        for form in {str(folder), str(Path(folder).resolve())}:
            if form not in ("", "/", "."):
                names[form.rstrip("/")] = Path(form).name or form
    for form in sorted(names, key=len, reverse=True):
        text = re.sub(re.escape(form) + r"(?=/|\b|$)", lambda m, n=names[form]: "\x00" + n, text)
    text = _ABS_PATH.sub(lambda m: "…/" + m.group(1), text)
    return text.replace("\x00", "")


def shown(text: object, max_chars: int | None = 400, paths: Iterable[Path | str] | None = None) -> str:
    """`text` as literal markdown: no control characters, one line, cut to `max_chars` (…), server paths hidden
    when `paths` is given (see hide_paths; pass [] to hide every absolute path), every markdown character
    escaped."""
    text = CONTROL_CHARS.sub("", str(text))
    text = _NEWLINES.sub(" ", text)
    if paths is not None:
        text = hide_paths(text, paths)
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars - 1] + "…"
    return _PUNCT.sub(r"\\\1", text)


_PUNCT_NOT_HTML = re.compile(r"([\\`*_{}\[\]()#+\-.!|~$:@=^])")  # the HTML-special & < > " ' go to html.escape


def shown_html(text: object) -> str:
    """`text` for markdown rendered with unsafe_allow_html (inside the page's own tags): markdown characters
    backslash-escaped, then & < > " ' as HTML entities; newlines and spaces kept (the caller's pre-wrap shows them)."""
    return html.escape(_PUNCT_NOT_HTML.sub(r"\\\1", CONTROL_CHARS.sub("", str(text))))


def unescaped(markdown: str) -> str:
    """What `shown` text reads as once rendered (backslash escapes removed): for tests and plain-text exports."""
    return re.sub(r"\\(.)", r"\1", markdown)
