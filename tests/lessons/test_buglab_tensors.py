"""Bug lab on random tensors: each fault's symptom appears with the fault and is gone without it."""

from functools import lru_cache

import pytest

from lessons.buglab_tensors import (DEFAULT_TENSOR, BadCell, FaultyPlayground, TensorScenario, run_tensor_fault,
                                    tensor_scenario_for)
from paged.addressing import slot_mapping
from paged.config import ModelConfig
from paged.engine.runner import ModelRunner
from paged.faults import Fault
from paged.model import TinyLlama
from paged.sequence import Sequence


@lru_cache(maxsize=None)
def run(fault, scenario):
    return run_tensor_fault(fault, scenario)


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.value)
def test_symptom_appears_with_fault_and_disappears_without(fault):
    """With the fault some decode step's rel err exceeds 1e-3 (a wrong position alone has no effect without a
    model: none); the same scenario and random draws without the fault stay below 1e-5."""
    scenario = tensor_scenario_for(fault)
    faulty, clean = run(fault, scenario), run(None, scenario)
    if fault is Fault.POSITION_OFF_BY_ONE:
        assert not faulty.applies and faulty.max_rel_err < 1e-5 and faulty.first_bad_step() is None
    else:
        assert faulty.applies and faulty.max_rel_err > 1e-3 and faulty.first_bad_step() is not None
    assert clean.max_rel_err < 1e-5 and clean.first_bad_step() is None
    assert not any(s.bad_writes or s.bad_reads for s in clean.steps)


def test_wrong_cells_point_at_the_broken_link():
    """Write-side faults record wrong writes, read-side faults wrong reads, each at the expected cells."""
    bs = DEFAULT_TENSOR.block_size
    off = run(Fault.SLOT_OFF_BY_ONE, DEFAULT_TENSOR)
    assert all(c.slot == c.meant + 1 for s in off.steps for c in s.bad_writes)
    assert BadCell("write", 0, 0, 7 * bs + 1, 7 * bs) in off.steps[0].bad_writes  # A token 0 lands in slot 29
    late = run(Fault.LATE_INCREMENT, DEFAULT_TENSOR)
    assert {c.kind for c in late.steps[1].bad_reads} == {"skipped"} and len(late.steps[1].bad_reads) == 3
    early = run(Fault.EARLY_INCREMENT, DEFAULT_TENSOR)
    assert all(c.slot == c.meant for c in early.steps[1].bad_reads)  # read the right slot, too early
    pad_scenario = tensor_scenario_for(Fault.PAD_NOT_SKIPPED)
    pad = run(Fault.PAD_NOT_SKIPPED, pad_scenario)
    last = pad_scenario.num_blocks * bs - 1
    assert all(c.slot == last and c.token_index == -1 for s in pad.steps for c in s.bad_writes)
    assert pad.first_bad_step(2) == 1 and pad.first_bad_step(0) is None  # only C owns the last block


def test_use_after_free_hits_the_successor_after_the_finish():
    """A finishes after step 3; from step 4 B (now in A's row) reads through A's freed table; C is unharmed."""
    uaf = run(Fault.USE_AFTER_FREE, DEFAULT_TENSOR)
    assert uaf.steps[3].finished == [0]
    assert uaf.first_bad_step() == 4 and uaf.first_bad_step(1) == 4 and uaf.first_bad_step(2) is None
    a_blocks = set(DEFAULT_TENSOR.tables[0])
    assert {c.slot // DEFAULT_TENSOR.block_size for c in uaf.steps[4].bad_reads} <= a_blocks


def test_steps_record_the_correct_state_and_export():
    """Step 0 is the prefill (no reads); tables and lengths are the block manager's; to_dict is plain data."""
    clean = run(None, DEFAULT_TENSOR)
    assert clean.steps[0].rel_err == {} and clean.steps[0].cached_token_counts == {0: 10, 1: 6, 2: 15}
    assert clean.steps[1].cached_token_counts == {0: 11, 1: 7, 2: 16} and clean.steps[1].tables[0] == [7, 2, 9]
    assert len(clean.steps) == DEFAULT_TENSOR.num_steps + 1 and 0 not in clean.steps[4].rel_err
    d = clean.to_dict()
    assert d["fault"] is None and d["steps"][1]["rel_err"].keys() == {"0", "1", "2"}


def test_bad_scenario_is_refused():
    with pytest.raises(ValueError, match="tables"):
        run_tensor_fault(None, TensorScenario(tables=((1,),), prompt_lens=(2, 3)))
    assert tensor_scenario_for("aliased_blocks", seed=3).seed == 3


WRITE_FAULTS = (Fault.SLOT_OFF_BY_ONE, Fault.BLOCK_SIZE_MISMATCH, Fault.ALIASED_BLOCKS)


@pytest.mark.parametrize("fault", [None, *Fault], ids=lambda f: f.value if f else "none")
def test_engine_and_playground_write_the_same_wrong_slots(fault):
    """Each fault is acted out once: for the same tables and token ranges, the engine's runner and the
    FaultyPlayground write at the very same slots (and padding slots), at prefill and at decode; for a write-side
    fault those slots differ from the address chain's."""
    s = TensorScenario(tables=((7, 2, 9, 12), (4, 1), (15, 3)))
    model = TinyLlama(ModelConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  num_key_value_heads=1, max_position_embeddings=64))
    runner = ModelRunner(model, s.num_blocks, s.block_size, fault=fault)
    playground = FaultyPlayground(s, fault)
    for cached in ((0, 0, 0), (10, 6, 5)):  # a prefill of 11, 7 and 6 tokens, then one decode token each
        seqs = []
        for i, (table, n) in enumerate(zip(s.tables, (11, 7, 6))):
            seq = Sequence(i, list(range(n)))
            seq.block_table, seq.cached_token_count = list(table), cached[i]
            seqs.append(seq)
        spans = [(seq, seq.cached_token_count, seq.num_tokens) for seq in seqs]
        engine = runner.prepare(seqs, is_prefill=cached[0] == 0).slot_mapping.tolist()
        assert engine == playground.writer_slots(spans)
        right = [x for seq, a, b in spans for x in slot_mapping(seq.block_table, a, b, s.block_size).tolist()]
        assert (engine != right) == (fault in WRITE_FAULTS)
    # without a fault the runner holds no hook (padding is skipped: no pad slots), as the playground's
    runner_pads = runner.hook.pad_slots().tolist() if runner.hook else []
    assert (runner.hook is None) == (fault is None)
    assert runner_pads == playground.hook.pad_slots().tolist()
