"""paged/chapters/beam_select.py's rules the mutation run showed unheld, worked by hand from transformers 5.19's beam search:
with n EOS ids it keeps max(2, 1 + n) * K candidates, and only the best K of them may finish."""

from __future__ import annotations

import math

import pytest
import torch

from paged.chapters.beam_select import Finished, select

pytestmark = pytest.mark.chapters


def test_two_eos_ids_keep_three_candidates_per_beam():
    """K = 1 and two EOS ids (tokens 0 and 1, ranked first and second): transformers keeps 3 * K candidates, so the
    third-best token (2) still runs on with its own log-prob; the best EOS finishes."""
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    fin = Finished(1)
    choices, entered = select(logits, torch.zeros(1), [[]], fin, (0, 1), False, 1.0)
    assert [(c.parent, c.token) for c in choices] == [(0, 2)]
    assert math.isclose(choices[0].score, math.log(0.15), rel_tol=1e-6)
    assert [h.token_ids for _, h in entered] == [[0]]


def test_an_eos_ranked_just_after_the_best_k_does_not_finish():
    """K = 1: the EOS ranked second (index K of the candidates) may not finish; the best token runs on."""
    logits = torch.tensor([[0.6, 0.3, 0.1]]).log()
    fin = Finished(1)
    choices, entered = select(logits, torch.zeros(1), [[]], fin, (1,), False, 1.0)
    assert [c.token for c in choices] == [0] and not entered and not fin.best()
