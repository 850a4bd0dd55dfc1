"""paged/chapters/speculative.py: the prompt-lookup proposer (vLLM 0.32's policy), greedy acceptance and the config's
boundary checks."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from paged.config import SchedulerConfig
from paged.chapters.speculative import SpeculativeConfig, accept_greedy, as_speculative, ngram_propose

from vllm_util import need_vllm

pytestmark = pytest.mark.chapters


@pytest.mark.parametrize("tokens, k, lo, hi, expected", [
    ([1, 2, 3, 1, 2], 4, 1, 3, [3, 1, 2]),  # "1 2" seen before: what followed it, up to the end
    ([1, 2, 3, 1, 2], 1, 1, 3, [3]),  # at most k
    ([5, 1, 2, 7, 1, 2, 9, 1, 2], 2, 2, 2, [7, 1]),  # the earliest occurrence wins
    ([2, 5, 1, 2, 8, 1, 2], 3, 1, 2, [8, 1, 2]),  # the longest n: "1 2" (n=2) beats "2" (n=1: 5 1 2)
    ([7, 7, 7], 5, 1, 3, [7]),  # an occurrence may overlap the suffix
    ([1, 2, 3, 4], 3, 1, 3, []),  # nothing ending the sequence occurs earlier
    ([1, 2, 1], 3, 2, 3, []),  # "2 1" never occurred before: n below min_n is not tried
    ([1], 3, 1, 1, []),  # too short to hold an earlier occurrence
])
def test_ngram_examples(tokens, k, lo, hi, expected):
    """Prompt lookup on hand-made sequences: the longest match, its earliest occurrence, at most k tokens."""
    assert ngram_propose(tokens, k, lo, hi, max_model_len=100) == expected


def test_ngram_stops_at_the_model_length():
    """Never a guess past max_model_len tokens: one slot left, one guess; none left, none."""
    tokens = [1, 2, 3, 1, 2]
    assert ngram_propose(tokens, 4, 1, 3, max_model_len=6) == [3]
    assert ngram_propose(tokens, 4, 1, 3, max_model_len=5) == []


def vllm_ngram():
    """vLLM 0.32's own `_find_longest_matched_ngram_and_propose_tokens`, read from its installed source and run as
    plain Python (its numba @jit decorator dropped): the same code without importing vLLM (seconds) or compiling."""
    import ast
    import importlib.util

    import numpy as np

    path = Path(importlib.util.find_spec("vllm").submodule_search_locations[0]) / "v1/spec_decode/ngram_proposer.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fn = next(n for n in tree.body
              if isinstance(n, ast.FunctionDef) and n.name == "_find_longest_matched_ngram_and_propose_tokens")
    fn.decorator_list = []
    namespace = {"np": np}
    exec(compile(ast.Module([fn], type_ignores=[]), str(path), "exec"), namespace)
    return lambda tokens, lo, hi, max_len, k: namespace[fn.name](np.array(tokens, dtype=np.int32), lo, hi, max_len,
                                                                 k).tolist()


def test_ngram_equals_vllm():
    """Ours gives vLLM 0.32's own n-gram function's answer on 300 random short sequences over a small alphabet (many
    repeats), for several k and n-gram ranges."""
    need_vllm()
    theirs = vllm_ngram()
    rng = random.Random(29)
    for _ in range(300):
        tokens = [rng.randrange(4) for _ in range(rng.randrange(1, 30))]
        lo = rng.randrange(1, 4)
        hi, k, max_len = lo + rng.randrange(0, 3), rng.randrange(1, 9), len(tokens) + rng.randrange(0, 6)
        assert ngram_propose(tokens, k, lo, hi, max_len) == theirs(tokens, lo, hi, max_len, k), (tokens, k, lo, hi)


@pytest.mark.parametrize("proposed, targets, accepted", [
    ([5, 6, 7], [5, 6, 7, 8], 3),  # all kept, 8 is the bonus
    ([5, 6, 7], [5, 9, 7, 8], 1),  # the first mismatch ends it, even if a later guess matches
    ([5, 6, 7], [4, 6, 7, 8], 0),
    ([], [3], 0),
])
def test_accept_greedy(proposed, targets, accepted):
    """Greedy acceptance keeps the guesses up to the first one the model's argmax disagrees with."""
    assert accept_greedy(proposed, targets) == accepted


def test_config_forms():
    """("ngram", k), "ngram:K" and a SpeculativeConfig all name the same settings; None is off."""
    assert SchedulerConfig(speculative=("ngram", 3)).speculative == SpeculativeConfig("ngram", 3)
    assert SchedulerConfig(speculative="ngram:3").speculative.num_speculative_tokens == 3
    assert as_speculative(None) is None and SchedulerConfig().speculative is None


@pytest.mark.parametrize("value, message", [
    (("draft", 2), "method"), (("ngram", 0), "num_speculative_tokens"), (("ngram", 17), "num_speculative_tokens"),
    ("ngram", "ngram:K"), ("ngram:x", "ngram:K"), (4, "speculative must be"), (("ngram", True), "bool"),
])
def test_config_refuses(value, message):
    """A bad speculative setting is refused where it is written, naming the value and the rule."""
    with pytest.raises(ValueError, match=message):
        SchedulerConfig(speculative=value)


def test_lookup_lengths_checked():
    """prompt_lookup_min above prompt_lookup_max is refused."""
    with pytest.raises(ValueError, match="prompt_lookup_min"):
        SpeculativeConfig(prompt_lookup_min=4, prompt_lookup_max=2)
