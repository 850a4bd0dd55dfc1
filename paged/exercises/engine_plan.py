"""The end-to-end exercise's fixed requests and schedule, and its contiguous twin (the library
alone) run on them: what engine_check.py compares the learner's engine with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from paged import addressing as ref_addr
from paged.attention import attention as ref_attention
from paged.kv_cache import ContiguousKVCache

TEXTS = (
    "Paged KV cache.",
    "Logical block 3 lives in physical block 17.",
    "abcdefghijklm",
    "The quick brown fox.",
)
FIRST_MAX_TOKENS = (
    6  # the first request stops early: its blocks are freed while the others decode on
)
BLOCK_SIZE, SEED = 4, 5


@dataclass
class Plan:
    """The requests (prompt ids, max_tokens) and the pool: the same for the learner's run and the
    twin."""

    prompts: list[list[int]]
    max_tokens: list[int]
    num_blocks: int
    texts: tuple[str, ...] = TEXTS
    steps: list[dict] = field(
        default_factory=list
    )  # what each step of the learner's run did (the app draws it)


def make_plan(tokenizer) -> Plan:
    """Recall prompts (text, SEP: the shipped model copies the text), the first one cut short; a
    pool just big enough for the busiest moment, so the fourth request reuses freed blocks."""
    prompts = [tokenizer.encode(t) + [tokenizer.sep_token_id] for t in TEXTS]
    max_tokens = [len(tokenizer.encode(t, add_bos=False)) + 1 for t in TEXTS]
    max_tokens[0] = FIRST_MAX_TOKENS
    need = [ref_addr.blocks_needed(len(p) + n, BLOCK_SIZE) for p, n in zip(prompts, max_tokens)]
    return Plan(prompts, max_tokens, max(sum(need[:3]), sum(need[1:])))


def last_rows(lens: list[int]) -> torch.Tensor:
    """The row of each sequence's last token in a batch of sequences `lens` long: [len(lens)]."""
    return torch.tensor(lens).cumsum(0) - 1


def twin_tokens(model, plan: Plan) -> list[list[int]]:
    """The contiguous twin on the same schedule, the library alone: each request's tokens."""
    cfg = model.config
    caches: dict[int, ContiguousKVCache] = {}
    out: dict[int, list[int]] = {}
    for group, prefill in schedule(plan):
        pos = [
            torch.arange(len(plan.prompts[i]))
            if prefill
            else torch.tensor([len(plan.prompts[i]) + len(out[i]) - 1])
            for i in group
        ]
        ids = [
            torch.tensor(plan.prompts[i]) if prefill else torch.tensor(out[i][-1:]) for i in group
        ]
        for i in group:
            caches.setdefault(
                i, ContiguousKVCache(cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim)
            )

        def backend(layer, q, k, v, group=group, pos=pos):
            rows, at = [], 0
            for i, p in zip(group, pos):
                sl = slice(at, at + len(p))
                keys, values = caches[i].update(layer, p, k[sl], v[sl])
                rows.append(ref_attention(q[sl], keys, values, causal=True))
                at += len(p)
            return torch.cat(rows)

        lens = [len(p) for p in pos]
        logits = model(torch.cat(ids), torch.cat(pos), backend, rows=last_rows(lens))
        for i, tok in zip(group, logits.argmax(-1).tolist()):
            out.setdefault(i, []).append(tok)
    return [out[i] for i in range(len(plan.prompts))]


def schedule(plan: Plan):
    """(request indices, is_prefill) per step: 0-2 prefilled, decodes, 3 prefilled after 0 finished,
    decodes."""
    left = {i: plan.max_tokens[i] for i in range(len(plan.prompts))}
    running, waiting = [0, 1, 2], [3]
    yield list(running), True
    for i in running:
        left[i] -= 1
    while running or waiting:
        done = [i for i in running if left[i] == 0]
        running = [i for i in running if left[i] > 0]
        if done and waiting:
            group, waiting = waiting, []
            running += group
            yield group, True
        elif running:
            group = list(running)
            yield group, False
        else:
            continue
        for i in group:
            left[i] -= 1
