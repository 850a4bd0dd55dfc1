"""What an engine-demo session is made of, small enough for a URL: its DemoConfig, its requests (RequestSpec, with
their compact URL form) and the scenarios a page offers in its menu. lessons.engine replays them into engines.

Tasks: "recall" feeds BOS text SEP (the shipped model then copies the text and stops), "continue" feeds BOS text
(counting, alphabets). A request refused before it reaches the engine raises `RequestError`.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import asdict, dataclass, field

from paged.config import CacheConfig, SamplingParams, SchedulerConfig
from paged.model.tokenizer import SEP

TASKS = ("recall", "continue")
MAX_PROMPT_CHARS = 200
MAX_REQUESTS = 8
MAX_STEPS = 600
BOUNDS = {"max_tokens": (1, 128), "temperature": (0.0, 2.0), "seed": (0, 9999), "n": (1, 4),
          "at_step": (0, MAX_STEPS)}


def visible(text: str) -> bool:
    """Whether `text` has a character a reader can see: not only spaces, line breaks, control characters
    (category Cc) or invisible format characters (Cf: zero-width space and joiner, direction marks)."""
    return any(not ch.isspace() and unicodedata.category(ch) not in ("Cc", "Cf") for ch in text)


class RequestError(ValueError):
    """A request refused before it reached the engine ("empty", "too_long") or by it ("rejected", message)."""

    def __init__(self, code: str, message: str, **detail) -> None:
        super().__init__(message)
        self.code, self.detail = code, detail


@dataclass(frozen=True)
class DemoConfig:
    block_size: int = 8
    num_blocks: int = 32
    watermark: float = 0.0
    max_num_batched_tokens: int = 512
    max_num_seqs: int = 8
    enable_prefix_caching: bool = False
    seed: int = 0  # shuffles the free list, so physical blocks come out scattered (deterministically)
    enable_chunked_prefill: bool = False  # vLLM v1: long prompts fed in chunks beside decodes (last: old links)
    fault: str | None = None  # a paged.faults name: page 4 breaks its paged twin on purpose (lessons.engine_fault)

    def cache_config(self) -> CacheConfig:
        return CacheConfig(block_size=self.block_size, num_blocks=self.num_blocks, watermark=self.watermark,
                           seed=self.seed, enable_prefix_caching=self.enable_prefix_caching)

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(self.max_num_batched_tokens, self.max_num_seqs, self.enable_chunked_prefill)


@dataclass(frozen=True)
class RequestSpec:
    prompt: str
    task: str = "recall"
    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    n: int = 1
    at_step: int = 0

    def check(self) -> None:
        """Raise RequestError for an empty (nothing visible) or too long prompt, or an unknown task."""
        if not visible(self.prompt):  # "   " or a zero-width space alone would run as a prompt nobody can see
            raise RequestError("empty", "the prompt is empty (spaces and invisible characters do not count)")
        if len(self.prompt) > MAX_PROMPT_CHARS:
            raise RequestError("too_long", f"the prompt has {len(self.prompt)} characters, at most "
                               f"{MAX_PROMPT_CHARS}", chars=len(self.prompt), max_chars=MAX_PROMPT_CHARS)
        if self.task not in TASKS:
            raise RequestError("rejected", f"task must be one of {TASKS}, got {self.task!r}")

    def token_ids(self, tokenizer) -> list[int]:
        """BOS text SEP (recall) or BOS text (continue); a tokenizer with no SEP (a local checkpoint's,
        sep_token_id None) gets the plain text for both tasks."""
        ids = tokenizer.encode(self.prompt)
        sep = getattr(tokenizer, "sep_token_id", SEP)
        return ids + [sep] if self.task == "recall" and sep is not None else ids

    def params(self) -> SamplingParams:
        return SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed, n=self.n)

    def shown(self) -> str:
        """The prompt as the model reads it, special tokens spelled out."""
        return f"{self.prompt} ⟨SEP⟩" if self.task == "recall" else self.prompt


# --- the URL form of a request list ---------------------------------------------------------------------------------
_SHORT = {"prompt": "p", "task": "k", "max_tokens": "m", "temperature": "T", "seed": "s", "n": "n", "at_step": "a"}


def encode_requests(specs: list[RequestSpec]) -> str:
    """Compact JSON for the URL."""
    return json.dumps([{_SHORT[k]: v for k, v in asdict(s).items()} for s in specs], ensure_ascii=False,
                      separators=(",", ":"))


MAX_URL_CHARS = 8000  # the longest request list a URL may carry (8 requests of 200 characters fit easily)
MAX_JSON_DEPTH = 3  # a request list is [ {…} ]: anything nested deeper is not one of ours


def json_depth(text: str) -> int:
    """The deepest nesting of [ and { in JSON text, brackets inside strings not counted (no parsing, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def decode_requests(text: str) -> list[RequestSpec] | None:
    """The inverse of encode_requests, from untrusted text: numbers clamped to their bounds, prompts cut to
    MAX_PROMPT_CHARS, malformed items skipped, at most MAX_REQUESTS. None when `text` is not a JSON list of at most
    MAX_URL_CHARS characters and MAX_JSON_DEPTH levels (checked before parsing, so no input can exhaust the stack)."""
    if not isinstance(text, str) or len(text) > MAX_URL_CHARS or json_depth(text) > MAX_JSON_DEPTH:
        return None
    try:
        raw = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(raw, list):
        return None
    specs = []
    for item in raw[:MAX_REQUESTS]:
        if not isinstance(item, dict) or not isinstance(item.get("p"), str) or "\x00" in item["p"]:
            continue
        values: dict = {"prompt": item["p"][:MAX_PROMPT_CHARS]}
        if item.get("k") in TASKS:
            values["task"] = item["k"]
        for name, (lo, hi) in BOUNDS.items():
            v = item.get(_SHORT[name])
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
                v = min(hi, max(lo, v))
                values[name] = float(v) if name == "temperature" else int(v)
        specs.append(RequestSpec(**values))
    return specs


# --- scenarios: a configuration and its requests, picked from a menu ------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    config: DemoConfig
    requests: tuple[RequestSpec, ...] = field(default_factory=tuple)


# name -> (task, text): each one the shipped model does right (tests/lessons/test_shipped_prompts.py)
PROMPT_PRESETS = {
    "recall_fox": ("recall", "The quick brown fox jumps over the lazy dog."),
    "recall_paged": ("recall", "PagedAttention stores KV in fixed-size physical blocks."),
    "recall_code": ("recall", "x = pool[table[i // 8] * 8 + i % 8]"),
    "count": ("continue", "1 2 3 4 5 6 7"),
    "alphabet": ("continue", "abcdefg"),
}

_FOX, _PAGED, _CODE = (PROMPT_PRESETS[k][1] for k in ("recall_fox", "recall_paged", "recall_code"))
ENGINE_SCENARIOS = {
    "three": Scenario(DemoConfig(), (RequestSpec(_FOX), RequestSpec("1 2 3 4 5 6 7", "continue", max_tokens=24),
                                     RequestSpec(_CODE))),
    # 3 prompts of ~6 blocks each fit at first; growing to ~11 blocks each, they cannot all stay
    "tiny_pool": Scenario(DemoConfig(block_size=8, num_blocks=20),
                          (RequestSpec(_FOX), RequestSpec(_PAGED), RequestSpec(_CODE))),
    # a 111-token count arrives while two short prompts decode: with 32 tokens a step it enters in 4 chunks, each
    # beside the 2 decodes
    "chunked": Scenario(DemoConfig(max_num_batched_tokens=32, enable_chunked_prefill=True),
                        (RequestSpec("abcdefg", "continue", max_tokens=24),
                         RequestSpec("1 2 3 4 5 6 7", "continue", max_tokens=24),
                         RequestSpec(" ".join(map(str, range(1, 41))), "continue", max_tokens=16, at_step=1))),
    "empty": Scenario(DemoConfig()),
}

SHARED_PREFIX = "Every request begins with this system prompt, cached once. "  # + "Q1" / "Q22": both copied exactly
SAME_PROMPT = "Prefix caching reuses full blocks of equal prompts"  # BOS + 50 chars + SEP = 52 = 13 blocks of 4
SHARING_SCENARIOS = {
    "prefix": Scenario(DemoConfig(block_size=8, num_blocks=64, enable_prefix_caching=True),
                       (RequestSpec(SHARED_PREFIX + "Q1"), RequestSpec(SHARED_PREFIX + "Q22", at_step=1))),
    "same": Scenario(DemoConfig(block_size=4, num_blocks=64, enable_prefix_caching=True),
                     (RequestSpec(SAME_PROMPT), RequestSpec(SAME_PROMPT, at_step=1))),
    "samples": Scenario(DemoConfig(block_size=8, num_blocks=64, enable_prefix_caching=True),
                        (RequestSpec("0 1 2 3 4 5 6 7 8", "continue", max_tokens=24, temperature=1.0, seed=0, n=3),)),
}
