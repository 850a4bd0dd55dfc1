"""`python -m paged generate --json` with a sliding window: a Mistral directory (the window from its config.json) and
`--sliding-window W` on the shipped model give the same tokens, and "max_blocks_held" stays within the bound."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from paged.__main__ import main
from paged.model.io import DEFAULT_DIR

pytestmark = pytest.mark.cli

PROMPTS = ["blocks of KV behind the window", "abc"]


def generate(capsys, *args: str) -> list[dict]:
    assert main(["generate", *PROMPTS, "--json", "--max-tokens", "10", "--block-size", "4", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_window_directory_and_flag_agree_and_hold_few_blocks(tmp_path, capsys):
    """--model DIR (MistralForCausalLM, sliding_window 3, no tokenizer file) == --sliding-window 3 on the shipped
    weights, token for token; max_blocks_held <= ceil(3 / 4) + 1 for every prompt, while full attention holds
    the whole context (more than the bound for the 31-token prompt). The --trace file lists the blocks each step
    freed behind the window."""
    raw = json.loads((DEFAULT_DIR / "config.json").read_text())
    raw.update(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=3)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    shutil.copy(DEFAULT_DIR / "model.safetensors", tmp_path / "model.safetensors")
    from_dir = generate(capsys, "--model", str(tmp_path))
    from_flag = generate(capsys, "--sliding-window", "3", "--trace", str(tmp_path / "trace.json"))
    steps = json.loads((tmp_path / "trace.json").read_text())
    freed = [(s, sid) for s in steps for sid in s["window_freed"] if sid in s["block_tables_after"]]
    assert freed and all(s["block_tables_after"][sid][0] == -1 for s, sid in freed)  # holes at the front
    full = generate(capsys)
    assert [r["token_ids"] for r in from_dir] == [r["token_ids"] for r in from_flag]
    assert from_dir[0]["token_ids"] != full[0]["token_ids"]  # the window is really applied
    assert all(r["max_blocks_held"] <= math.ceil(3 / 4) + 1 for r in from_dir + from_flag)
    assert full[0]["max_blocks_held"] == math.ceil((31 + 9) / 4)  # BOS + 30 bytes + 9 decoded, all kept


def test_bad_window_and_windowless_impl_are_clear_errors(capsys):
    """--sliding-window 0 and --impl native with a window exit 2 with a one-line error naming the rule."""
    assert main(["generate", "hi", "--sliding-window", "0"]) == 2
    assert "sliding_window" in capsys.readouterr().err
    assert main(["generate", "hi", "--sliding-window", "4", "--impl", "native"]) == 2
    assert "has no sliding window" in capsys.readouterr().err
