"""Each of the bug lab's nine faults, written as a learner's mistake in a workspace, fails the
exercise where it is made and names the link of the chain it breaks (paged/faults/catalogue.py's
`where`, in the seed's vocabulary)."""

from __future__ import annotations

import pytest

from paged.faults import Fault

from exercise_util import run, workspace

pytestmark = pytest.mark.exercises

# fault -> (file, [(solution text, the mistake)], the exercise that must fail, the link it must
# name)
MISTAKES = {
    Fault.EARLY_INCREMENT: (
        "sequence.py",
        [
            (
                "        self.cached_token_count += 1\n"
                "        self.generated_token_ids.append(int(next_token_id))",
                "        self.generated_token_ids.append(int(next_token_id))\n"
                "        self.cached_token_count = self.num_tokens  # counts the new token",
            )
        ],
        "state_rule",
        "cached_token_count",
    ),
    Fault.LATE_INCREMENT: (
        "attention.py",
        [
            (
                "gather_kv(key_cache, value_cache, tables[b], lens[b])",
                "gather_kv(key_cache, value_cache, tables[b], lens[b] - 1)",
            )
        ],
        "decode",
        "context_len",
    ),
    Fault.SLOT_OFF_BY_ONE: (
        "addressing.py",
        [
            (
                "slots = [locate(i, block_table, block_size).slot for i in range(start, end)]",
                "slots = [locate(i, block_table, block_size).slot + 1 for i in range(start, end)]",
            )
        ],
        "slot_mapping",
        "block_offset",
    ),
    Fault.BLOCK_SIZE_MISMATCH: (
        "addressing.py",
        [
            (
                "return token_index // block_size, token_index % block_size",
                "half = max(block_size // 2, 1)  # this function's idea of the block size\n"
                "    return token_index // half, token_index % half",
            )
        ],
        "locate",
        "logical_block_id",
    ),
    Fault.USE_AFTER_FREE: (
        "block_manager.py",
        [
            (
                "        self.free_block_ids.extend(freed)\n        seq.block_table = []",
                "        self.free_block_ids.extend(freed)",
            )
        ],
        "block_manager",
        "block_table",
    ),
    Fault.POSITION_OFF_BY_ONE: (
        "sequence.py",
        [
            (
                "        self.cached_token_count = len(self.prompt_token_ids)\n"
                "        self.generated_token_ids.append(int(first_token_id))",
                "        self.generated_token_ids.append(int(first_token_id))\n"
                "        self.cached_token_count = self.num_tokens  # next position: num_tokens",
            )
        ],
        "state_rule",
        "cached_token_count",
    ),
    Fault.PAD_NOT_SKIPPED: (
        "kv_cache.py",
        [("        if slot == -1:\n            continue\n", "")],
        "write_kv",
        "slot_mapping",
    ),
    Fault.ALIASED_BLOCKS: (
        "block_manager.py",
        [
            (
                "        seq.block_table = [self.free_block_ids.popleft() for _ in range(n)]",
                "        seq.block_table = [self.free_block_ids[0] for _ in range(n)]  # peeks",
            )
        ],
        "block_manager",
        "block_table",
    ),
    Fault.STALE_SLOT_MAPPING: (
        "block_manager.py",
        [
            (
                "        self.free_block_ids = deque(order)",
                "        self.free_block_ids = deque(order)\n        self.slots = {}",
            ),
            (
                "        token_index = seq.cached_token_count\n",
                "        token_index, bs = seq.cached_token_count, self.block_size\n",
            ),
            (
                "        return locate(token_index, seq.block_table, self.block_size).slot\n",
                "            self.slots[seq.seq_id] = locate(token_index, seq.block_table,"
                " bs).slot\n"
                "        first = locate(token_index, seq.block_table, bs).slot\n"
                "        self.slots.setdefault(seq.seq_id, first)\n"
                "        return self.slots[seq.seq_id]  # refreshed only when a block is taken\n",
            ),
        ],
        "block_manager",
        "slot_mapping",
    ),
}


def test_every_fault_of_the_catalogue_has_a_mistake():
    assert set(MISTAKES) == set(Fault)


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.value)
def test_a_seeded_mistake_fails_its_exercise_and_names_its_link(tmp_path, fault):
    """The exercises before the mistake pass, its exercise fails, and the link named is the one it
    breaks."""
    file, edits, exercise, link = MISTAKES[fault]
    records = run(workspace(tmp_path, {file: edits}))
    assert [r["ok"] for r in records[:-1]] == [True] * (len(records) - 1)
    failed = records[-1]
    assert (failed["exercise"], failed["ok"], failed["link"]) == (exercise, False, link), failed
    assert failed["traceback"] is None  # a wrong value, not a crash: the message says what came
    assert failed["expected"] is not None and failed["got"] is not None


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault",
    [
        Fault.EARLY_INCREMENT,
        Fault.LATE_INCREMENT,
        Fault.PAD_NOT_SKIPPED,
        Fault.STALE_SLOT_MAPPING,
        Fault.USE_AFTER_FREE,
    ],
    ids=lambda f: f.value,
)
def test_the_engine_exercise_alone_names_the_same_link(tmp_path, fault):
    """Run on its own (--only engine), the end-to-end exercise stops at the same link inside the
    model's loop."""
    file, edits, _, link = MISTAKES[fault]
    [record] = run(workspace(tmp_path, {file: edits}), ["engine"])
    assert (record["ok"], record["link"]) == (False, link), record
    assert record["input"].startswith("engine step")
