"""The messages a learner reads for three kinds of mistake the timed run found weak: attention that
differs somewhere past the first values (where, by how much, and which known wrong variant it is),
decode over one token too few or too many, a gather through a pool flattened offset-major; and the
block_manager hint, which starts with the method that failed."""

from __future__ import annotations

import pytest

from paged.exercises.check import json_records, report

from exercise_util import run, workspace

pytestmark = pytest.mark.exercises

INTERLEAVE = [
    (
        "k = keys.float().repeat_interleave(group, dim=1)",
        "k = keys.float().repeat(1, group, 1)",
    ),
    (
        "v = values.float().repeat_interleave(group, dim=1)",
        "v = values.float().repeat(1, group, 1)",
    ),
]


def _failed(tmp_path, file: str, edits: list[tuple[str, str]], exercise: str) -> dict:
    """The record of the first failing exercise, which must be `exercise` (all before it pass)."""
    records = run(workspace(tmp_path, {file: edits}))
    assert [r["ok"] for r in records[:-1]] == [True] * (len(records) - 1)
    assert (records[-1]["exercise"], records[-1]["ok"]) == (exercise, False), records[-1]
    return records[-1]


def test_attention_with_repeat_names_the_head_order_and_where_it_differs(tmp_path):
    """GQA through repeat: head 0 is right, head 1 reads kv head 1 instead of 0. The message names
    the first differing (query row, head, dim), the largest difference, and the variant."""
    failed = _failed(tmp_path, "attention.py", INTERLEAVE, "attention")
    assert failed["link"] == "attention"
    for text in ("query row 0, head 1, dim 0", "max |diff|", "repeat_interleave, not repeat"):
        assert text in failed["en"], failed["en"]
    assert "repeat_interleave" in failed["zh"] and "head 1" in failed["zh"]
    assert "head 1" in failed["expected"] and "head 1" in failed["got"]


def test_attention_off_by_a_factor_names_the_position_but_no_variant(tmp_path):
    """A mistake that is no known variant (a scale 10 % too big): the position and max |diff|, and
    no variant named."""
    edit = [("scale = head_dim ** -0.5 if", "scale = 1.1 * head_dim ** -0.5 if")]
    failed = _failed(tmp_path, "attention.py", edit, "attention")
    assert "query row 0, head 0, dim 0" in failed["en"] and "max |diff|" in failed["en"]
    assert "repeat" not in failed["en"] and "scale" not in failed["en"].split("V:")[-1]


SCORES = 'scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale'
VARIANT_MISTAKES = {
    "no scale": (SCORES, SCORES[: -len(" * scale")]),
    "scaled by sqrt(head_dim)": ("scale = head_dim ** -0.5 if", "scale = head_dim ** 0.5 if"),
    "a given scale must be used": (
        "scale = head_dim ** -0.5 if scale is None else scale",
        "scale = head_dim ** -0.5",
    ),
    "no causal mask": ("    if causal:\n", "    if False:\n"),
    "mask aligned to key 0": (
        "~causal_mask(q_len, keys.shape[0], q.device)",
        "~torch.ones(q_len, keys.shape[0], dtype=torch.bool).tril()",
    ),
}


@pytest.mark.parametrize("words", list(VARIANT_MISTAKES))
def test_attention_names_the_known_variant_it_equals(tmp_path, words):
    """The scale left out, multiplied by sqrt(head_dim) or ignored when given; the causal mask left
    out or aligned to key 0 instead of the context's end: the message names it."""
    failed = _failed(tmp_path, "attention.py", [VARIANT_MISTAKES[words]], "attention")
    assert failed["link"] == "attention"
    assert words in failed["en"] and "max |diff|" in failed["en"], failed["en"]
    assert "repeat" not in failed["en"]


@pytest.mark.parametrize("delta, words", [(-1, "- 1 = 10 tokens: one token short"),
                                          (1, "+ 1 = 12 tokens: one token too many")])
def test_decode_over_a_wrong_count_says_so(tmp_path, delta, words):
    """Decode over lens[b] - 1 (or + 1) tokens: row 0 (context_len 11) matches attention over 10
    (or 12) tokens, and the message says it."""
    edit = [(
        "gather_kv(key_cache, value_cache, tables[b], lens[b])",
        f"gather_kv(key_cache, value_cache, tables[b], lens[b] {'-' if delta < 0 else '+'} 1)",
    )]
    failed = _failed(tmp_path, "attention.py", edit, "decode")
    assert failed["link"] == "context_len"
    assert f"row 0 matches attention over context_len {words}" in failed["en"], failed["en"]
    assert "context_len" in failed["zh"] and ("10" if delta < 0 else "12") in failed["zh"]


def test_a_gather_through_an_offset_major_pool_names_the_row_order(tmp_path):
    """The pool flattened along the wrong axes (transpose first): the offsets are right, the rows
    are not block-major; the link is the gather, not block_offset."""
    edit = [(
        "return key_cache.flatten(0, 1)[slots], value_cache.flatten(0, 1)[slots]",
        "return key_cache.transpose(0, 1).flatten(0, 1)[slots], "
        "value_cache.transpose(0, 1).flatten(0, 1)[slots]",
    )]
    failed = _failed(tmp_path, "attention.py", edit, "gather")
    assert failed["link"] == "gather", failed
    assert "row = block * block_size + offset" in failed["en"], failed["en"]
    assert "block_size" in failed["zh"]


BLOCK_MANAGER = {
    "allocate": (
        "        seq.block_table = [self.free_block_ids.popleft() for _ in range(n)]",
        "        seq.block_table = [self.free_block_ids[0] for _ in range(n)]",
    ),
    "append_slot": (
        "        return locate(token_index, seq.block_table, self.block_size).slot\n",
        "        return locate(token_index, seq.block_table, self.block_size).slot + 1\n",
    ),
    "free": (
        "        self.free_block_ids.extend(freed)\n        seq.block_table = []",
        "        self.free_block_ids.extend(freed)",
    ),
}


@pytest.mark.parametrize("method", list(BLOCK_MANAGER))
def test_the_block_manager_hint_starts_with_the_method_that_failed(tmp_path, method):
    records = run(workspace(tmp_path, {"block_manager.py": [BLOCK_MANAGER[method]]}))
    assert (records[-1]["exercise"], records[-1]["ok"]) == ("block_manager", False)
    for lang in ("en", "zh"):
        label = "提示" if lang == "zh" else "hint"
        [line] = [ln.strip() for ln in report(records, lang, hint=True).splitlines()
                  if ln.strip().startswith(label + ":")]
        assert line.split(": ", 1)[1].startswith(method), line
        hint = json_records(records, lang, hint=True)[-1]["hint"]
        assert hint.startswith(method), hint
