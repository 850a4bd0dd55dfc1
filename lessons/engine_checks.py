"""Why the engine demo refuses a request, in numbers a learner can act on.

The engine (paged.engine.LLMEngine.add_request) is the authority: it accepts a request or raises ValueError with an
English message. `refusal` runs only after such a refusal and names the limit that was hit (the code of a
RequestError) with the numbers its fix needs ("raise num_blocks to 12", "at most 40 tokens in all"), so the page
can say what to change instead of "do what the message says". A refusal it does not recognise keeps the code
"rejected" and the engine's message. `check_form` refuses form values outside their ranges before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from paged.addressing import blocks_needed
from .engine_requests import BOUNDS, RequestError, RequestSpec

FORM_FIELDS = ("max_tokens", "temperature", "seed", "n")  # what the "Add a request" forms let a learner type
ENGINE_CODES = ("positions", "pool", "samples", "batch_tokens", "rejected")  # refusals by a configuration


def check_form(spec: RequestSpec) -> None:
    """Raise RequestError "out_of_range" (field, value, lo, hi) for a form field outside its BOUNDS: the page says
    so rather than quietly using another number."""
    for name in FORM_FIELDS:
        lo, hi = BOUNDS[name]
        value = getattr(spec, name)
        if not lo <= value <= hi:  # NaN fails too
            raise RequestError("out_of_range", f"{name} = {value} is outside its range {lo}–{hi}", field=name,
                               value=value, lo=lo, hi=hi)


@dataclass(frozen=True)
class Limits:
    """What the engine checks a request against: the model's positions, the pool, the scheduler's budgets."""

    max_positions: int
    block_size: int
    num_blocks: int
    watermark: float          # the fraction of the pool kept free for decode slots
    watermark_blocks: int     # int(watermark * num_blocks), as the block manager holds it
    max_num_seqs: int
    max_num_batched_tokens: int

    @classmethod
    def of(cls, engine) -> "Limits":
        """The limits of a paged.engine.LLMEngine."""
        cache, num_blocks = engine.cache_config, engine.num_blocks
        return cls(engine.model.config.max_position_embeddings, cache.block_size, num_blocks, cache.watermark,
                   int(cache.watermark * num_blocks), engine.scheduler_config.max_num_seqs,
                   engine.scheduler_config.max_num_batched_tokens)

    @property
    def usable_blocks(self) -> int:
        return self.num_blocks - self.watermark_blocks


def blocks_for(need: int, num_blocks: int, watermark: float) -> int:
    """The smallest num_blocks (at least the current one) whose usable blocks (those the watermark, kept as
    int(watermark * num_blocks) blocks by the block manager, leaves) hold `need`."""
    size = num_blocks
    while size - int(watermark * size) < need:
        size += 1
    return size


def refusal(spec: RequestSpec, prompt_len: int, limits: Limits, message: str) -> RequestError:
    """The RequestError for a request the engine refused with `message`, checked in the engine's order:

    positions     prompt + max_tokens beyond the model's positions      detail: tokens, prompt, max_positions, fit
    pool          more blocks than the whole (usable) pool               detail: tokens, need, usable, min_blocks,
                                                                                 fit_tokens
    samples       n samples could never run together                     detail: n, n_fit, max_num_seqs
    batch_tokens  more tokens than one step may schedule                 detail: tokens, budget
    rejected      anything else (the engine's message is the detail)
    """
    tokens = prompt_len + spec.max_tokens
    if tokens > limits.max_positions:
        return RequestError("positions", message, tokens=tokens, prompt=prompt_len,
                            max_positions=limits.max_positions, fit=max(1, limits.max_positions - prompt_len))
    need = blocks_needed(tokens, limits.block_size)
    if need > limits.usable_blocks:
        return RequestError("pool", message, tokens=tokens, need=need, usable=limits.usable_blocks,
                            min_blocks=blocks_for(need, limits.num_blocks, limits.watermark),
                            fit_tokens=limits.usable_blocks * limits.block_size)
    if spec.n > 1:
        shared = prompt_len // limits.block_size  # full prompt blocks every sample shares
        own = blocks_needed(prompt_len % limits.block_size + spec.max_tokens, limits.block_size)
        fits = [k for k in range(1, spec.n) if k <= limits.max_num_seqs and shared + k * own <= limits.usable_blocks]
        if spec.n > limits.max_num_seqs or shared + spec.n * own > limits.usable_blocks:
            return RequestError("samples", message, n=spec.n, n_fit=max(fits, default=1),
                                max_num_seqs=limits.max_num_seqs)
    if tokens > limits.max_num_batched_tokens:
        return RequestError("batch_tokens", message, tokens=tokens, budget=limits.max_num_batched_tokens)
    return RequestError("rejected", message)
