"""No English left in 简体中文: every page, run in zh and stepped a few times, shows none of the English a learner
could meet there: no sentence of the English strings tables, and no English default of a viz builder's words (the
label dataclasses: viz.pool.PoolWords, viz.cells.SlotWords, …, and the builders' text parameters), which a page
that forgot to pass its own would show, e.g. "A (seq 0): running" or "step 3: 1.2e-07 ✔". A unit test first checks
that every such dataclass has its words, field by field, in both languages.

What a learner reads is collected from the element tree (text, labels, help, hovers and titles of the plotly charts
and of the HTML figures); source listings (st.code) and the keyboard component's script are not prose and are left
out. The terms the article writes in English (token, block, slot, physical block, block_table, …) are not English
sentences: a marker is only a piece of an English string that no Chinese string contains.
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import inspect
import json
import pkgutil
import re
import string

import pytest

import viz
from ui.strings import MODULES, strings, t

from .app_util import ROOT, app_test, page_files

# Each label dataclass of viz/ and the strings-table prefix its page reads it from (ui.viz_labels(ctx, cls, prefix)).
WORDS = {  # qualname -> its strings prefix: keys "<prefix>_<field>" ("<prefix><field>" after a ".")
    "viz.describe.AltWords": "a11y.",
    "viz.pool.PoolWords": "common.pool",
    "viz.cells.SlotWords": "engine.slots",
    "viz.cells.QueueWords": "engine.lane",
    "viz.cells.TwinWords": "engine.twin",
    "viz.attention.StripWords": "gather.strip",
    "viz.mapping.MappingLabels": "batch.map",
    "viz.sharing.RefcountWords": "sharing.ref",
    "viz.sharing.HitsLabels": "sharing.hits",
    "viz.buglab.BadCellWords": "buglab.w",
    "viz.swap.SwapWords": "swap.cell",
    "viz.swap.CostWords": "swap.cost",
    "viz.spec.SpecWords": "spec.cell",
    "viz.beam.TreeWords": "beam.tree",
    "viz.window.WindowWords": "window.w",
}


def word_key(qualname: str, field: str) -> str:
    """The strings key of a label class's field: "<prefix>_<field>", or "<prefix><field>" after a "."."""
    prefix = WORDS[qualname]
    return prefix + field if prefix.endswith(".") else f"{prefix}_{field}"


def label_classes() -> dict[str, type]:
    """Every frozen dataclass of viz/ whose fields are all strings with a default: a builder's words."""
    found = {}
    for info in pkgutil.iter_modules(viz.__path__):
        module = importlib.import_module(f"viz.{info.name}")
        for name, obj in vars(module).items():
            if (dataclasses.is_dataclass(obj) and isinstance(obj, type) and obj.__module__ == module.__name__
                    and all(isinstance(f.default, str) for f in dataclasses.fields(obj))):
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_viz_label_class_has_its_words_in_both_languages():
    """Each label dataclass is listed in WORDS (a new one without strings fails here), its English strings are its
    defaults word for word (what an English page shows is what the builder would), and every field's Chinese
    differs from the English (none left untranslated)."""
    classes = label_classes()
    assert set(classes) == set(WORDS), f"label classes without a strings prefix: {set(classes) - set(WORDS)}"
    for qualname, prefix in WORDS.items():
        for field in dataclasses.fields(classes[qualname]):
            key = word_key(qualname, field.name)
            assert t(key, "en") == field.default, (key, t(key, "en"), field.default)
            assert t(key, "zh") != field.default, f"{key} is English in 简体中文: {field.default!r}"


# --- markers: what English looks like ----------------------------------------------------------------------------
NUMBER_FIELDS = {"token", "position", "logical", "offset", "slot", "block", "step", "seq_id", "ref", "filled",
                 "block_size", "first", "last", "diff", "tolerance", "value"}
SAMPLE = {"seq": "B", "verdict": "✔"}  # a sequence label and a verdict; numbers are 7, other fields a Chinese word


def _field_pattern(name: str) -> str:
    if name == "seq":
        return r"(?:[A-Z]|S\d+)"  # viz.colors.seq_label
    if name in NUMBER_FIELDS:
        return r"[-+0-9.e]+"
    if name == "verdict":
        return "[✔✗]"
    return r"[^\n]{1,200}?"


def template_marker(template: str, lone_word_whole_text: bool = True) -> re.Pattern:
    """A regex matching `template` filled with any values (typed by field name), e.g. "{seq} (seq {seq_id})" ->
    "(?:[A-Z]|S\\d+) \\(seq [-+0-9.e]+\\)", as whole words. A field-less template of one word must be a whole text
    to match when `lone_word_whole_text` (a lane's "running" is English, "running max" may be a term)."""
    parts = []
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is not None:
            parts.append(_field_pattern(name))
    body = "".join(parts)
    if lone_word_whole_text and re.fullmatch(r"\w+", template):
        return re.compile(f"^{body}$")
    # whole words only: "tokens {tokens}" is not the end of max_num_batched_tokens
    return re.compile(("(?<!\\w)" if template[:1].isalpha() else "") + body
                      + ("(?!\\w)" if template[-1:].isalpha() else ""))


def _sample(template: str) -> str:
    """`template` filled with SAMPLE values (both languages of one field get the same)."""
    names = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    return template.format(**{n: SAMPLE.get(n, "7" if n in NUMBER_FIELDS else "空闲") for n in names})


def zh_texts() -> list[str]:
    """Every Chinese string of the tables, lower-cased: where the terms kept in English are found."""
    return [texts["zh"].lower() for module in MODULES for texts in strings(module).values()]


def sentence_markers() -> set[str]:
    """Pieces of the English strings tables (between format fields and markup) of three words or more that no
    Chinese string contains: "not gathered yet" is one; "grouped-query attention", kept in Chinese, is not."""
    chinese = zh_texts()
    pieces = set()
    for module in MODULES:
        for texts in strings(module).values():
            if texts["en"] == texts["zh"]:
                continue
            for piece in re.split(r"\{[^}]*\}|[*`|()\[\]<>“”\"…;:·→←—–\n]|\.\s|:material/\w+:", texts["en"]):
                piece = piece.strip(" ,.!?'’-")
                if len(re.findall(r"[A-Za-z]{2,}", piece)) >= 3 and not re.search(r"[0-9_=/]", piece):
                    if not any(piece.lower() in zh for zh in chinese):
                        pieces.add(piece)
    return pieces


def label_markers() -> dict[str, re.Pattern]:
    """The English default of every field of every label dataclass, as a regex (template_marker)."""
    return {f"{qualname}.{f.name}": template_marker(f.default)
            for qualname, cls in label_classes().items() for f in dataclasses.fields(cls)
            if re.search(r"[A-Za-z]{2}", re.sub(r"\{\w+\}", "", f.default))}  # a word, not "{a}: {b}"


def parameter_markers() -> dict[str, re.Pattern]:
    """The English default of every text parameter of a viz builder (a hover word, a legend name, an axis title:
    weights_figure's weight="weight", cache_rule_html's tip="{seq} step {step}: …") that a page passes in its own
    language, as a regex (template_marker). Left out: a default that a Chinese string contains too (a term such as
    "step" or "token_index") and a formula (max |Δ|, (block_size - 1) / 2)."""
    chinese = zh_texts()
    markers = {}
    for info in pkgutil.iter_modules(viz.__path__):
        module = importlib.import_module(f"viz.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__:
                continue
            for param in inspect.signature(function).parameters.values():
                text = param.default
                if not isinstance(text, str) or not text.strip() or text.startswith("#"):
                    continue
                if "{" not in text and (re.search(r"[|_/%=]", text) or any(text.lower() in zh for zh in chinese)):
                    continue
                markers[f"{module.__name__}.{name}({param.name})"] = template_marker(text.strip(" ·"), False)
    return markers


def test_the_markers_tell_english_from_chinese():
    """The check below can fail and is not fooled: each English default's marker matches that default filled with
    values, and does not match the Chinese words of the same field filled with the same values; the sentence
    markers include the hovers' own sentences and leave out the terms kept in English."""
    classes = label_classes()
    for name, marker in label_markers().items():
        qualname, field = name.rsplit(".", 1)
        default = next(f.default for f in dataclasses.fields(classes[qualname]) if f.name == field)
        zh = t(word_key(qualname, field), "zh")
        assert marker.search(_sample(default)), (name, marker.pattern)
        assert not marker.search(_sample(zh)), (name, marker.pattern, _sample(zh))
    params = parameter_markers()
    assert params["viz.engine.cache_rule_html(tip)"].search("A step 3: cached_token_count = 0")
    assert not params["viz.engine.cache_rule_html(tip)"].search("A 第 3 步：cached_token_count = 0")
    assert params["viz.attention.weights_figure(weight)"].search("%{y}, token %{x}: weight %{z:.4f}")
    assert "viz.attention.weights_figure(x_title)" not in params  # token_index: the article's name
    queue = label_markers()["viz.cells.QueueWords.cell"]
    assert queue.search("A (seq 0): 已完成") and not queue.search("A（seq_id 0）：已完成")
    markers = sentence_markers()
    assert "not gathered yet" in markers and "not written yet" in markers
    assert not any("grouped-query attention" in m.lower() or m.lower() == "use after free" for m in markers)


# --- what a learner reads ----------------------------------------------------------------------------------------
SKIPPED_ELEMENTS = ("code", "bidi_component")  # source listings; the keyboard ledger's script
NOT_TEXT = {"id", "form_id", "key", "icon", "element_id", "url", "data_id", "css_class", "type", "theme"}


def _html_texts(body: str) -> list[str]:
    """An HTML figure's titles (its tooltips), alt texts and text nodes, without its <style> and <script>."""
    body = re.sub(r"<style.*?</style>|<script.*?</script>", " ", body, flags=re.S)
    texts = re.findall(r'(?:title|alt|aria-label)="([^"]*)"', body) + re.split(r"<[^>]+>", body)
    return [html.unescape(x) for x in texts]


def _plotly_texts(value, names: bool = True) -> list[str]:
    """A chart's strings: titles, hovers, texts, and a trace's name where a legend shows it (`names`)."""
    if isinstance(value, dict):
        if "layout" in value:  # the whole figure: no legend, no names
            names = value["layout"].get("showlegend") is not False
        hidden = not names or value.get("showlegend") is False
        return [s for k, v in value.items() if k not in ("template", "colorscale") and not (k == "name" and hidden)
                for s in _plotly_texts(v, names)]
    if isinstance(value, list):
        return [s for v in value for s in _plotly_texts(v, names)]
    return [value] if isinstance(value, str) else []


def _proto_texts(name: str, value) -> list[str]:
    if isinstance(value, str):
        if name in NOT_TEXT:
            return []
        if name == "spec":
            return _plotly_texts(json.loads(value))
        return _html_texts(value) if name == "body" and "<" in value else [value]
    if hasattr(value, "ListFields"):
        return [s for field, v in value.ListFields() for s in _proto_texts(field.name, v)]
    if isinstance(value, (bytes, int, float, bool)):
        return []
    try:
        return [s for v in value for s in _proto_texts(name, v)]
    except TypeError:
        return []


def shown_texts(at) -> list[str]:
    """Every text of the page's element tree, one line (a hover line, a title, a paragraph line) per entry."""
    lines = []

    def walk(node) -> None:
        if getattr(node, "type", None) in SKIPPED_ELEMENTS:
            return
        proto = getattr(node, "proto", None)
        if proto is not None and not getattr(node, "children", None):
            for text in _proto_texts("", proto):
                lines.extend(part.strip() for part in re.split(r"<br>|\n", text) if part.strip())
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return lines


def english_in(lines: list[str]) -> list[tuple[str, str]]:
    """(marker, line) for each line that holds a sentence marker or a label default's marker."""
    sentences, labels = sentence_markers(), {**label_markers(), **parameter_markers()}
    found = []
    for line in lines:
        found += [(m, line) for m in sentences if m in line]
        found += [(name, line) for name, marker in labels.items() if marker.search(line)]
    return found


# Each page and the buttons that step it a few times (the pool, the queues, the twins and the cells drawn).
STEPS = {
    "2_Gather_and_attend": ["gather.next", "gather.all"],  # the strip, then attention's figures
    "3_Batch_decode": ["batch.decode", "batch.decode"],
    "4_Engine": ["engine.step", "engine.step"],
    "5_Bug_lab": ["buglab.next"],
    "6_Sharing": ["sharing.step", "sharing.step"],
    "7_Correct_to_fast": ["fast.run"],  # the ladder, its sweeps and its table, at tiny sizes
    "10_Swap_or_recompute": ["swap.step_btn", "swap.measure"],  # the first swap-out, then the cost figure
}
PARAMS = {"10_Swap_or_recompute": {"step": 9},
          "5_Bug_lab": {"fault": "slot_off_by_one"},  # every write lands one slot late: a hover line per token
          "9_Beam_search": {"step": 4},  # forks, a copy, a prune: the pool's and the tree's hovers
          "7_Correct_to_fast": dict(batch=1, context_len=32, num_heads=2, num_kv_heads=1, head_dim=32, block_size=4,
                                    requests=40)}


@pytest.mark.slow
@pytest.mark.parametrize("path", page_files(), ids=lambda p: p.stem)
def test_no_english_on_a_page_in_chinese(path):
    """The page in 简体中文, after a few steps: no English sentence and no builder's English default anywhere."""
    at = app_test(path, "zh", PARAMS.get(path.stem)).run()
    for key in STEPS.get(path.stem, []):
        at.button(key=key).click().run()
    assert not at.exception, [e.value for e in at.exception]
    lines = shown_texts(at)
    # page 13 without PAGED_EXERCISES says only how to turn it on (test_exercises_page checks it filled, in zh)
    assert len(lines) > (5 if path.stem == "13_Your_turn" else 20), "the page's texts were not collected"
    found = english_in(lines)
    assert not found, found[:5]


def test_twin_has_one_chinese_word_in_the_strings_and_the_guide():
    """Issue 38: the contiguous twin is 孪生引擎 wherever it is named: every zh string whose English says "twin"
    says 孪生引擎, and no zh string nor the zh guide calls it anything else (参照, 对照组, 孪生体, a bare 孪生, or
    the English word)."""
    others = re.compile(r"参照|对照组|孪生体|孪生(?!引擎)|contiguous 对照|\btwin")
    guide = (ROOT / "docs" / "teaching.zh.md").read_text(encoding="utf-8")
    assert "孪生引擎" in guide and not others.search(guide), others.search(guide)
    named = 0
    for module in MODULES:
        for key, text in strings(module).items():
            zh = text.get("zh", "") if isinstance(text, dict) else ""
            assert not others.search(zh), (module, key, zh)
            if isinstance(text, dict) and re.search(r"\btwins?\b", text.get("en", "")):
                assert "孪生引擎" in zh, (module, key, zh)
                named += 1
    assert named >= 20
