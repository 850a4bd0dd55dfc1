"""Bug lab: every classic fault shows its symptom when injected, and the same run is exact without it."""

import re
from functools import lru_cache
from pathlib import Path

import pytest

from lessons.buglab import DEFAULT, RECALL_TEXTS, model_scenario, run_fault, scenario_for, summarize
from paged.config import CacheConfig
from paged.engine import LLMEngine
from paged.faults import FAULTS, Fault
from paged.model import SEP, ByteTokenizer

from helpers import prompt_logits_scale, scaled_atol, tiny_model

MODEL, TOK = tiny_model()


@lru_cache(maxsize=None)
def clean_run(scenario):
    """The fault-free run of a scenario (shared by every fault that uses it)."""
    return run_fault(MODEL, TOK, None, scenario)


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.value)
def test_symptom_appears_with_fault_and_disappears_without(fault):
    """With the fault the paged logits leave the contiguous twin's (> 1e-3); the same scenario without it is exact."""
    scenario = scenario_for(fault)
    faulty = run_fault(MODEL, TOK, fault, scenario)
    clean = clean_run(scenario)
    scale = prompt_logits_scale(MODEL, TOK, scenario.prompts)
    assert faulty.max_diff > scaled_atol(scale, 1e-3), f"{fault.value} left no trace"
    assert clean.max_diff < scaled_atol(scale, 1e-5) and clean.identical
    drifts = summarize(faulty, tol=1e-3)
    assert any(d.first_bad_step is not None for d in drifts)


def test_every_fault_is_documented_and_its_check_exists():
    """Each fault says what it is, where it sits in the chain, its symptom and which check catches it; every test
    its `caught_by` names exists (a renamed or moved test would leave the bug lab pointing at nothing)."""
    assert set(FAULTS) == set(Fault)
    assert len({info.title for info in FAULTS.values()}) == len(FAULTS)  # no two faults share a title
    root = Path(__file__).resolve().parents[2]
    named = 0
    for fault, info in FAULTS.items():
        assert all([info.title, info.what, info.where, info.symptom, info.caught_by]), fault
        for path, test in re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", info.caught_by):
            assert (root / path).is_file(), f"{fault.value}: {path} does not exist"
            if test:
                assert re.search(rf"^def {test}\(", (root / path).read_text(), re.M), f"{fault.value}: no {test}"
            named += 1
    assert named >= len(FAULTS) // 2  # most faults point at a concrete test


def test_faults_are_off_by_default_and_scoped_to_one_engine():
    """An engine has no fault unless given one; a faulty engine does not affect another engine built after it."""
    cache = CacheConfig(block_size=4, num_blocks=32)
    faulty = LLMEngine(MODEL, TOK, cache, fault="slot_off_by_one", attn_impl="gather")
    plain = LLMEngine(MODEL, TOK, cache, attn_impl="gather")
    assert faulty.fault is Fault.SLOT_OFF_BY_ONE and plain.fault is None and plain.runner.fault is None
    assert clean_run(DEFAULT).identical


def test_bad_fault_requests():
    """Unknown fault names and faults on the contiguous reference are refused."""
    with pytest.raises(ValueError, match="unknown fault"):
        LLMEngine(MODEL, TOK, CacheConfig(block_size=4, num_blocks=8), fault="cosmic_ray")
    with pytest.raises(ValueError, match="paged layout only"):
        LLMEngine(MODEL, TOK, CacheConfig(block_size=4, num_blocks=8), kv_layout="contiguous", fault="late_increment")


def test_model_scenarios_keep_each_faults_structure():
    """Recall prompts end with SEP and ask for the copy + EOS; USE_AFTER_FREE stops the first (longest) request
    early; PAD_NOT_SKIPPED gets a pool smaller than the batch needs (so its last block is used), the same in slots
    for any block_size; an unknown task is refused."""
    tok = ByteTokenizer()
    recall = model_scenario(None, "recall", tok)
    assert all(p[-1] == SEP for p in recall.prompts)
    assert recall.max_tokens == tuple(len(t) + 1 for t in RECALL_TEXTS)
    uaf = model_scenario(Fault.USE_AFTER_FREE, "recall", tok)
    assert uaf.max_tokens[0] < min(uaf.max_tokens[1:]) and len(uaf.prompts[0]) == max(map(len, uaf.prompts))

    def need(s):
        return sum(-(-(len(p) + n) // s.block_size) for p, n in zip(s.prompts, s.max_tokens))

    for bs in (2, 4, 8, 16):
        pad = model_scenario(Fault.PAD_NOT_SKIPPED, "recall", tok, block_size=bs)
        assert pad.block_size == bs and pad.num_blocks < need(pad)
        roomy = model_scenario(Fault.ALIASED_BLOCKS, "recall", tok, block_size=bs, seed=5)
        assert roomy.num_blocks >= need(roomy) and roomy.seed == 5
    assert model_scenario(Fault.USE_AFTER_FREE, "continue").prompts == scenario_for(Fault.USE_AFTER_FREE).prompts
    with pytest.raises(ValueError, match="unknown task"):
        model_scenario(None, "poetry", tok)
