"""Which beams live on: one beam-search step's selection rule, on logits alone (no blocks or model).

It follows transformers 5.19's `generate(num_beams=K, do_sample=False, early_stopping=True)` step by
step, so the paged driver (paged/engine/beam.py) can be checked against it token for token:

1. every running beam's log_softmax(logits) plus the beam's running score (the sum of its tokens'
   log-probs);
2. the best `keep = max(2, 1 + len(eos)) * K` continuations over all beams x vocab (torch.topk on
   the flattened [beams * vocab] scores, so ties break as transformers breaks them);
3. a continuation that ends with an EOS id, or reaches max_tokens, stops: if it is among the best K
   it may enter the K finished hypotheses, scored sum_logprobs / generated_len ** length_penalty;
4. the best K continuations that did not stop become the next running beams (each names its parent
   beam);
5. the search ends once K hypotheses are finished (early stopping) or max_tokens is reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

NEG = -1.0e9  # transformers' "never pick this" score


@dataclass
class Choice:
    """A running beam of the next step: its parent beam's row in this step's logits, its new token,
    its running score (sum of log-probs of every generated token)."""

    parent: int
    token: int
    score: float


@dataclass
class Hypothesis:
    """A finished beam: its generated token ids (with its ending EOS, if any), its final score."""

    token_ids: list[int]
    score: float


@dataclass
class Finished:
    """The K best finished hypotheses so far, best first (transformers keeps K slots scored NEG when
    empty; `scores` mirrors those slots so merges break ties the same way)."""

    beam_width: int
    hyps: list[Hypothesis | None] = field(default_factory=list)
    scores: torch.Tensor | None = None  # [K] float32

    def __post_init__(self) -> None:
        self.hyps = [None] * self.beam_width
        self.scores = torch.full((self.beam_width,), NEG, dtype=torch.float32)

    @property
    def full(self) -> bool:
        """All K slots hold a hypothesis (early stopping: the search is over)."""
        return all(h is not None for h in self.hyps)

    def best(self) -> list[Hypothesis]:
        """The finished hypotheses, best first."""
        return [h for h in self.hyps if h is not None]


def select(logits: torch.Tensor, scores: torch.Tensor, histories: list[list[int]],
           finished: Finished, eos_ids: tuple[int, ...], last: bool, length_penalty: float
           ) -> tuple[list[Choice], list[tuple[int, Hypothesis]]]:
    """One step's choice: logits [B, vocab] (a row per running beam, B = 1 after the prompt; any
    device, chosen on the CPU), scores [B] float32 (running scores), histories (each row's generated
    tokens); last: this token is the max_tokens-th. Updates `finished` in place; returns the next
    running beams (K, best first) and the hypotheses that entered `finished` (with parent rows)."""
    K = finished.beam_width
    vocab = logits.shape[-1]
    keep = max(2, 1 + len(eos_ids)) * K
    # [B * vocab], on the CPU
    acc = (torch.log_softmax(logits.float().cpu(), dim=-1) + scores[:, None]).reshape(-1)
    top_scores, top_idx = torch.topk(acc, k=keep)
    parents, tokens = (top_idx // vocab).tolist(), (top_idx % vocab).tolist()
    stops = torch.tensor([last or t in eos_ids for t in tokens])
    running_scores = top_scores + stops.to(torch.float32) * NEG
    nxt = torch.topk(running_scores, k=K).indices.tolist()
    choices = [Choice(parents[j], tokens[j], float(running_scores[j])) for j in nxt]
    gen_len = len(histories[0]) + 1
    final = top_scores / (gen_len ** length_penalty)
    eligible = stops & (torch.arange(keep) < K)  # only the best K continuations may finish
    if finished.full:  # early stopping: a full set takes nothing more
        eligible[:] = False
    final = final + (~eligible).to(torch.float32) * NEG
    merged = torch.cat((finished.scores, final))
    pick = torch.topk(merged, k=K).indices.tolist()
    entered, hyps = [], []
    for j in pick:
        if j < K:
            hyps.append(finished.hyps[j])
        elif eligible[j - K]:
            c = j - K
            hyp = Hypothesis(histories[parents[c]] + [tokens[c]], float(final[c]))
            hyps.append(hyp)
            entered.append((parents[c], hyp))
        else:
            hyps.append(None)
    finished.hyps, finished.scores = hyps, merged[pick]
    return choices, entered
