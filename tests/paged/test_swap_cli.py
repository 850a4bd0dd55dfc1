"""`python -m paged generate --preemption swap|recompute --json`: token ids per prompt and the swap / recompute
counts of each, the same tokens in both modes as without pressure."""

import json

import pytest

from paged.__main__ import main

pytestmark = pytest.mark.cli

PROMPTS = ["Hello, paged world!", "1 2 3 4 5 6", "abcdefghij", "The block table maps logical blocks."]


def generate(capsys, *extra: str) -> list[dict]:
    assert main(["generate", *PROMPTS, "--block-size", "4", "--max-tokens", "20", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_generate_json_counts_swaps_and_recomputes(capsys):
    """Under pressure, swap mode with a small swap pool swaps one victim and recomputes the other (fallback);
    recompute mode recomputes both; every prompt's tokens equal the unpressured run's."""
    free = generate(capsys, "--num-blocks", "400")
    swap = generate(capsys, "--num-blocks", "18", "--preemption", "swap", "--swap-space", "8")
    recompute = generate(capsys, "--num-blocks", "18", "--preemption", "recompute")
    assert [r["token_ids"] for r in swap] == [r["token_ids"] for r in recompute] == [r["token_ids"] for r in free]
    assert sum(r["num_swaps"] for r in swap) >= 1 and sum(r["num_recomputes"] for r in swap) >= 1
    assert all(r["num_swaps"] + r["num_recomputes"] == r["num_preemptions"] for r in swap + recompute)
    assert sum(r["num_swaps"] for r in recompute) == 0 and sum(r["num_recomputes"] for r in recompute) >= 2
    assert all(r["num_preemptions"] == 0 for r in free)


def test_generate_refuses_a_swap_pool_of_zero(capsys):
    """--preemption swap --swap-space 0 exits with status 2 and names the rule."""
    assert main(["generate", "a", "--preemption", "swap", "--swap-space", "0", "--json"]) == 2
    assert "swap_space >= 1" in capsys.readouterr().err
