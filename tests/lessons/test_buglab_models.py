"""The bug lab's scenarios for a model other than the shipped byte model: recall only where the tokenizer has a SEP
token, and the pool sized from the prompts' lengths in that tokenizer's tokens (not their bytes), so each fault's
structure (a pool smaller than the whole batch for the padding write, room to spare otherwise) holds."""

from __future__ import annotations

import pytest

from lessons.buglab import DEFAULT, TASKS, model_scenario, tasks_for
from paged.addressing import blocks_needed
from paged.faults import Fault
from paged.model import ByteTokenizer


class TwoTokens:
    """A subword-like tokenizer without SEP: every text is two tokens (BOS and one more), whatever its bytes."""

    sep_token_id = None
    bos_token_id = 0

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        return [0, 7] if add_bos else [7]


def test_recall_needs_a_sep_token():
    """The byte tokenizer offers both tasks; one without SEP only "continue", and asking it for recall is a
    ValueError naming the way out."""
    assert tasks_for(ByteTokenizer()) == TASKS
    assert tasks_for(TwoTokens()) == ("continue",)
    with pytest.raises(ValueError, match="continue"):
        model_scenario(None, "recall", TwoTokens())


@pytest.mark.parametrize("block_size", [2, 4, 8])
def test_the_pool_is_sized_in_the_tokenizers_tokens(block_size):
    """Two tokens per prompt, 24 generated: each request needs blocks_needed(26) blocks. The padding-write pool holds
    any one request but not all three at once (its last block gets used); the others hold all three with room."""
    one = blocks_needed(2 + 24, block_size)
    need = one * len(DEFAULT.prompts)
    pad = model_scenario(Fault.PAD_NOT_SKIPPED, "continue", TwoTokens(), block_size)
    assert one <= pad.num_blocks < need
    roomy = model_scenario(Fault.SLOT_OFF_BY_ONE, "continue", TwoTokens(), block_size)
    assert need < roomy.num_blocks <= need + max(4, need // 4)
