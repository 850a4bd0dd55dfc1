"""The bug lab: run one prompt set with and without an injected fault, side by side, and locate the drift.

Each fault gets a scenario in which its symptom shows (a use-after-free needs a sequence to finish while others
run on; a padding write needs the pool's last block to be in use). The faulty side is a paged engine with the fault;
the reference is its fault-free contiguous twin, stepped in lockstep. The page picks its scenario with
`model_scenario`: the same per-fault structure, with a recall task and a block_size knob.
"""

from __future__ import annotations

from dataclasses import dataclass

from paged.addressing import blocks_needed
from paged.config import CacheConfig, SamplingParams
from paged.engine.twins import TwinRun, run_twins
from paged.faults import Fault, as_fault


@dataclass(frozen=True)
class Scenario:
    prompts: tuple[str, ...]
    max_tokens: tuple[int, ...]  # one per prompt: different lengths make sequences finish at different steps
    block_size: int = 4
    num_blocks: int = 48
    seed: int = 0  # free-list shuffle

    def params(self) -> list[SamplingParams]:
        return [SamplingParams(max_tokens=n, ignore_eos=True) for n in self.max_tokens]

    def cache_config(self) -> CacheConfig:
        return CacheConfig(block_size=self.block_size, num_blocks=self.num_blocks, seed=self.seed, watermark=0.0)


# Each prompt is one the shipped model continues right (a count, two alphabets), and every fault but the subtle
# position one changes some of them visibly (tests/lessons/test_shipped_prompts.py).
DEFAULT = Scenario(prompts=("0 1 2 3 4 5 6 7", "abcdefghijklm", "ABCDEFG"), max_tokens=(24, 24, 24))

SCENARIOS: dict[Fault, Scenario] = {
    # A sequence must finish while the others keep decoding, so a stale row gets reused.
    Fault.USE_AFTER_FREE: Scenario(DEFAULT.prompts, max_tokens=(8, 24, 24)),
    # Padding wraps to the pool's last slot: a small pool makes sure its last block belongs to someone.
    Fault.PAD_NOT_SKIPPED: Scenario(DEFAULT.prompts, max_tokens=(24, 24, 24), num_blocks=24),
}


def scenario_for(fault: Fault | str | None) -> Scenario:
    return SCENARIOS.get(as_fault(fault), DEFAULT)


# --- the bug lab page's scenarios: the per-fault ones above, with a recall task and a block_size knob ---------------
TASKS = ("recall", "continue")
# The shipped model copies each of these exactly (greedy), so the reference column is always the text itself: it
# copies random-looking text well but stumbles on repeated phrases ("block by block") and on runs like "0 1 2 … 10".
# tests/lessons/test_shipped_prompts.py holds it for every prompt the app, the guide and the CLI examples use.
RECALL_TEXTS = ("The quick brown fox jumps over the lazy dog.", "Paged KV cache: fixed-size blocks, no waste.",
                "Logical block 3 lives in physical block 17.")


def tasks_for(tokenizer) -> tuple[str, ...]:
    """The tasks a model's tokenizer can run: recall needs a SEP token (the shipped byte model's, which it was
    trained to copy after); a local checkpoint without one gets "continue" only."""
    return TASKS if getattr(tokenizer, "sep_token_id", None) is not None else tuple(t for t in TASKS if t != "recall")


def model_scenario(fault: Fault | str | None, task: str = "recall", tokenizer=None, block_size: int = 4,
                   seed: int = 0) -> Scenario:
    """The bug lab's scenario for `fault` with the model.

    task "continue": scenario_for(fault) (plain text continuations). task "recall": three texts, each
    followed by SEP, so the shipped model copies them (max_tokens = copy + EOS): a drift is a visible typo.
    Either way the fault's structure is kept: for USE_AFTER_FREE the first request (the longest) stops early while
    its block table is the widest, so its successor inherits a stale row; for PAD_NOT_SKIPPED the pool is smaller
    than the batch needs, so every block, the last one included, gets used. The pool is sized in slots, so a
    different block_size keeps the same pressure, and from the prompts' lengths in `tokenizer`'s tokens when one is
    given (a subword model's prompts are shorter than their bytes). Raises ValueError for an unknown task, or for
    recall with a tokenizer without SEP (see tasks_for).
    """
    fault = as_fault(fault)
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
    base = scenario_for(fault)
    if task == "continue":
        prompts, max_tokens = base.prompts, base.max_tokens
    else:
        if "recall" not in tasks_for(tokenizer):
            raise ValueError("the recall task needs a tokenizer with a SEP token (the shipped byte model's); "
                             "use task 'continue'")
        prompts = tuple(tuple(tokenizer.encode(t) + [tokenizer.sep_token_id]) for t in RECALL_TEXTS)
        max_tokens = tuple(len(tokenizer.encode(t, add_bos=False)) + 1 for t in RECALL_TEXTS)  # the copy + EOS
        if fault is Fault.USE_AFTER_FREE:
            max_tokens = (8,) + max_tokens[1:]

    def prompt_len(p: str | tuple[int, ...]) -> int:  # as fed: BOS + bytes for the byte model without a tokenizer
        if not isinstance(p, str):
            return len(p)
        return len(tokenizer.encode(p)) if tokenizer is not None else len(p.encode()) + 1

    lengths = [prompt_len(p) + n for p, n in zip(prompts, max_tokens)]
    need = sum(blocks_needed(n, block_size) for n in lengths)  # blocks if every request ran to the end at once
    if fault is Fault.PAD_NOT_SKIPPED:
        num_blocks = max(max(blocks_needed(n, block_size) for n in lengths), need * 3 // 4)
    else:
        num_blocks = need + max(4, need // 4)
    return Scenario(prompts, max_tokens, block_size=block_size, num_blocks=num_blocks, seed=seed)


def run_fault(model, tokenizer, fault: Fault | str | None, scenario: Scenario | None = None,
              attn_impl: str | None = "gather") -> TwinRun:
    """The scenario through a paged engine with `fault` (None: no fault) and its contiguous twin."""
    fault = as_fault(fault)
    scenario = scenario or scenario_for(fault)
    return run_twins(model, tokenizer, list(scenario.prompts), scenario.params(), scenario.cache_config(),
                     attn_impl=attn_impl, fault=fault)


@dataclass
class Drift:
    """Where one request's faulty output parted from the reference."""

    request_id: int
    first_divergence: int | None  # index into the generated tokens; None = identical
    faulty_text: str
    reference_text: str
    first_bad_step: int | None  # first engine step whose logits differ by more than the tolerance


def summarize(run: TwinRun, tol: float = 1e-4) -> list[Drift]:
    out = []
    for i, (p, c) in enumerate(zip(run.paged, run.contiguous)):
        bad = next((k for k, s in enumerate(run.steps) if s.logits_diff.get(p.request_id, 0.0) > tol), None)
        out.append(Drift(p.request_id, run.first_divergence(i), p.text, c.text, bad))
    return out
