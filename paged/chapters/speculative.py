"""Speculative decoding: guess k tokens cheaply, check them in one forward pass, keep right ones.

A decode step normally feeds one token and gets one back. With speculation a proposer guesses the
next k tokens d_1 … d_k; the model is fed the last known token and the k guesses at once (k + 1
query positions, causal among themselves, the history read through the block table: a multi-query
decode, as paged_attention_prefill does for a prompt chunk). Its argmax at position i is what plain
greedy decoding would have sampled after d_1 … d_i, so greedy acceptance keeps guesses while they
agree:

    targets g_0 … g_k (the model's argmax at each fed position), accepted a = leading i with
    d_{i+1} == g_i; emitted d_1 … d_a, g_a  (a + 1 tokens per forward pass; g_a is never a guess)

and the output is exactly plain greedy decoding's. The K/V of all k + 1 fed tokens were written,
but only those of the last known token and d_1 … d_a are history: the state rule says
cached_token_count = num_tokens - 1 again, so it is rolled back by the k - a rejected guesses, whose
slots are left to be overwritten. (paged/engine/speculation.py does that in the engine; this module
holds the pure parts.)

The proposer needs no second model: prompt lookup (n-gram matching), vLLM 0.32's `NgramProposer`
policy: the longest n-gram, n in [prompt_lookup_min, prompt_lookup_max], that ends the sequence and
occurs earlier; its earliest occurrence wins; the proposal is the (at most k) tokens that followed
it, never past the model's length.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import as_int, int_text

METHODS = ("ngram",)
MAX_SPECULATIVE_TOKENS = 16  # guesses per step; more is refused (each costs a query position)
MAX_LOOKUP = 64  # longest n-gram matched


@dataclass(frozen=True)
class SpeculativeConfig:
    """Speculative decoding's settings (SchedulerConfig(speculative=...)).

    method: "ngram" (prompt lookup, no draft model). num_speculative_tokens: k, guesses per
    sequence and step, in [1, MAX_SPECULATIVE_TOKENS]. prompt_lookup_min / prompt_lookup_max: the
    n-gram lengths matched (vLLM's names). vLLM sets both to 5 when neither is given; our tokens are
    bytes, so a shorter match still says something: 2 and 5 (give 5, 5 for vLLM's default).
    Raises: ValueError for another method or a count out of range.
    """

    method: str = "ngram"
    num_speculative_tokens: int = 4
    prompt_lookup_min: int = 2
    prompt_lookup_max: int = 5

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"speculative method must be one of {METHODS}, got {self.method!r}")
        k = as_int(self.num_speculative_tokens, "num_speculative_tokens", 1,
                   MAX_SPECULATIVE_TOKENS)
        lo = as_int(self.prompt_lookup_min, "prompt_lookup_min", 1, MAX_LOOKUP)
        hi = as_int(self.prompt_lookup_max, "prompt_lookup_max", 1, MAX_LOOKUP)
        if lo > hi:
            raise ValueError(f"prompt_lookup_min ({lo}) must be <= prompt_lookup_max ({hi})")
        object.__setattr__(self, "num_speculative_tokens", k)
        object.__setattr__(self, "prompt_lookup_min", lo)
        object.__setattr__(self, "prompt_lookup_max", hi)

    @property
    def k(self) -> int:
        return self.num_speculative_tokens


def as_speculative(value) -> SpeculativeConfig | None:
    """None (off), a SpeculativeConfig, ("ngram", k) or "ngram:K" -> a SpeculativeConfig or None.
    Raises: ValueError naming the value for anything else (an unknown method, k outside [1, 16])."""
    if value is None or isinstance(value, SpeculativeConfig):
        return value
    if isinstance(value, str):
        method, sep, k = value.partition(":")
        try:  # K in ASCII digits only: int() reads "٣" as 3 and fails on "²" naming no setting
            return SpeculativeConfig(method.strip(), int_text(k, "K") if sep else None)
        except ValueError as err:
            raise ValueError(f"speculative must look like 'ngram:K' (K guesses per step, ASCII "
                             f"digits 0-9), got {value!r}: {err}") from None
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return SpeculativeConfig(value[0], value[1])
    raise ValueError(f"speculative must be None, ('ngram', k), 'ngram:K' or a SpeculativeConfig, "
                     f"got {value!r}")


def ngram_propose(token_ids: list[int], k: int, min_n: int, max_n: int,
                  max_model_len: int) -> list[int]:
    """Prompt lookup: up to k tokens that followed the earliest earlier occurrence of the longest
    n-gram (n in [min_n, max_n]) ending `token_ids`, never past max_model_len ([] if none).

    Same answers as vLLM 0.32's `_find_longest_matched_ngram_and_propose_tokens` (a KMP scan of
    the reversed tokens; here the plain loop, O(len * max_n)): an occurrence may overlap the suffix
    itself ("a a a" -> "a")."""
    total = len(token_ids)
    k = min(k, max_model_len - total)
    if total < min_n or k <= 0:
        return []
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        suffix = token_ids[total - n:]
        for start in range(total - n):  # earliest first; start + n <= total - 1: a token follows
            if token_ids[start:start + n] == suffix:
                follow = start + n
                return list(token_ids[follow:follow + k])
    return []


def accept_greedy(proposed: list[int], targets: list[int]) -> int:
    """How many guesses greedy acceptance keeps: the leading i with proposed[i] == targets[i];
    targets: the model's argmax at each fed position (len(proposed) + 1; the last is the bonus)."""
    assert len(targets) == len(proposed) + 1, \
        "one target per fed position: the last known token and each guess"
    accepted = 0
    while accepted < len(proposed) and proposed[accepted] == targets[accepted]:
        accepted += 1
    return accepted
