"""paged/chapters/beam_select.py on hand-made logits: which continuations run on, which may finish, and their scores."""

from __future__ import annotations

import math

import pytest
import torch

from paged.chapters.beam_select import Finished, select

pytestmark = pytest.mark.chapters

PROBS = [0.5, 0.3, 0.15, 0.05]  # one beam's next-token probabilities (vocab 4)
LOGITS = torch.tensor([PROBS]).log()


def test_an_eos_outside_the_best_k_does_not_finish():
    """K = 2 keeps the best 4 continuations; EOS (token 3) ranks 4th, so nothing finishes; tokens 0, 1 run on."""
    fin = Finished(2)
    choices, entered = select(LOGITS, torch.zeros(1), [[]], fin, (3,), False, 1.0)
    assert [(c.parent, c.token) for c in choices] == [(0, 0), (0, 1)] and not entered and not fin.best()
    assert [round(c.score, 5) for c in choices] == [round(math.log(0.5), 5), round(math.log(0.3), 5)]


def test_an_eos_among_the_best_k_finishes_and_the_next_one_runs_on():
    """EOS = token 1 ranks 2nd: it enters the finished set (score log 0.3 / 3 ** 2 with 2 tokens before it and
    length_penalty 2) and token 2 takes its place among the running beams."""
    fin = Finished(2)
    choices, entered = select(LOGITS, torch.zeros(1), [[7, 7]], fin, (1,), False, 2.0)
    assert [c.token for c in choices] == [0, 2]
    assert [h.token_ids for _, h in entered] == [[7, 7, 1]]
    assert math.isclose(entered[0][1].score, math.log(0.3) / 9, rel_tol=1e-6)


def test_at_max_tokens_the_best_k_finish_and_a_full_set_takes_no_more():
    """last=True: the best two continuations finish, best first; a second call with the set full adds nothing."""
    fin = Finished(2)
    select(LOGITS, torch.zeros(1), [[]], fin, (3,), True, 1.0)
    assert [h.token_ids for h in fin.best()] == [[0], [1]] and fin.full
    _, entered = select(LOGITS, torch.zeros(1), [[]], fin, (0,), False, 1.0)
    assert not entered and [h.token_ids for h in fin.best()] == [[0], [1]]


def test_running_scores_add_across_beams():
    """Two beams: a continuation's score is its beam's score plus the token's log-prob, ranked over both beams."""
    logits = torch.tensor([PROBS, [0.05, 0.05, 0.05, 0.85]]).log()
    choices, _ = select(logits, torch.tensor([0.0, math.log(0.5)]), [[5], [6]], Finished(2), (9,), False, 1.0)
    assert [(c.parent, c.token) for c in choices] == [(0, 0), (1, 3)]
    assert math.isclose(choices[1].score, math.log(0.5) + math.log(0.85), rel_tol=1e-6)
