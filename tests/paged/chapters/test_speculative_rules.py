"""paged/chapters/speculative.py's rules the mutation run showed unheld: each setting named in its error and its bounds
met exactly, integer-like settings stored as ints, a malformed "ngram:K" string, a sequence already past the model's
length, and greedy acceptance's length check."""

from __future__ import annotations

import numpy as np
import pytest

from paged.config import SchedulerConfig
from paged.chapters.speculative import MAX_LOOKUP, MAX_SPECULATIVE_TOKENS, SpeculativeConfig, accept_greedy, \
    as_speculative, ngram_propose

pytestmark = pytest.mark.chapters


@pytest.mark.parametrize("kwargs,name", [
    (dict(num_speculative_tokens=0), "num_speculative_tokens"),
    (dict(num_speculative_tokens=MAX_SPECULATIVE_TOKENS + 1), "num_speculative_tokens"),
    (dict(prompt_lookup_min=0), "prompt_lookup_min"),
    (dict(prompt_lookup_min=MAX_LOOKUP + 1, prompt_lookup_max=MAX_LOOKUP + 1), "prompt_lookup_min"),
    (dict(prompt_lookup_max=0), "prompt_lookup_max"),
    (dict(prompt_lookup_max=MAX_LOOKUP + 1), "prompt_lookup_max"),
])
def test_each_setting_is_named_with_its_bounds(kwargs, name):
    """A setting outside its range is refused by its own name at the start of the message."""
    with pytest.raises(ValueError, match=f"^{name} must be an integer in \\["):
        SpeculativeConfig(**kwargs)


def test_the_bounds_themselves_are_allowed_and_stored_as_ints():
    """k = 1, lookups of 1 … 1 and equal min and max are allowed; numpy integers are stored as Python ints."""
    cfg = SpeculativeConfig("ngram", np.int64(1), np.int64(1), np.int64(1))
    assert (cfg.k, cfg.prompt_lookup_min, cfg.prompt_lookup_max) == (1, 1, 1)
    assert all(type(x) is int for x in (cfg.num_speculative_tokens, cfg.prompt_lookup_min, cfg.prompt_lookup_max))
    big = SpeculativeConfig("ngram", MAX_SPECULATIVE_TOKENS, MAX_LOOKUP, MAX_LOOKUP)
    assert (big.k, big.prompt_lookup_min) == (MAX_SPECULATIVE_TOKENS, MAX_LOOKUP)


def test_a_string_with_two_colons_is_refused_as_malformed():
    """"ngram:2:3" is not "ngram:K": refused with the form it must take (not read as method "ngram:2")."""
    with pytest.raises(ValueError, match="^speculative must look like 'ngram:K'"):
        as_speculative("ngram:2:3")


def test_no_guess_for_a_sequence_already_past_the_model_length():
    """A sequence longer than max_model_len gets no guess, though its n-gram matches (1 2 … 1 2 would propose 3 4)."""
    tokens = [1, 2, 3, 4, 5, 6, 1, 2]
    assert ngram_propose(tokens, 2, 2, 2, 10) == [3, 4]
    assert ngram_propose(tokens, 2, 2, 2, 3) == [] and ngram_propose(tokens, 2, 2, 2, 8) == []


def test_accept_greedy_needs_one_target_per_fed_position():
    """targets must hold len(proposed) + 1 entries: fewer is refused with the rule in the message."""
    with pytest.raises(AssertionError, match="^one target per fed position: the last known token and each guess$"):
        accept_greedy([1, 2], [1, 2])


@pytest.mark.parametrize("value", ["ngram:²", "ngram:٣", "ngram:３", "ngram:1_0"])
def test_k_in_other_digits_is_refused_by_name(value):
    """"ngram:²" (int() fails naming nothing) and "ngram:٣" / full-width "３" (int() reads 3) are
    refused by a ValueError naming `speculative` and the value: K is in ASCII digits only."""
    with pytest.raises(ValueError, match="^speculative must look like 'ngram:K'") as err:
        SchedulerConfig(speculative=value)
    assert repr(value) in str(err.value)
