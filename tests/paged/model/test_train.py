"""Training data, the training loop (tiny sizes, a few steps), greedy evaluation, and the CLI."""

import json
import random

import pytest
import torch

from paged.config import ModelConfig
from paged.model import ByteTokenizer, TinyLlama, load_model
from paged.model.data import (IGNORE, PRINTABLE, batches, greedy_continue, make_batch, recall_accuracy,
                              recall_example)
from paged.model.tokenizer import BOS, EOS, SEP
from paged.model.train import lr_at, main, text_len_cap, train

pytestmark = pytest.mark.model

TINY = ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2)


def test_recall_example_trains_only_on_the_copy_and_eos():
    """BOS text SEP text EOS, with the loss flags on exactly the copy and the EOS."""
    tokens, train_flags = recall_example(random.Random(3), 20, 30)
    n = (len(tokens) - 3) // 2
    text = tokens[1:1 + n]
    assert tokens == [BOS, *text, SEP, *text, EOS]
    assert all(chr(b) in PRINTABLE for b in text) and 20 <= n <= 30
    assert train_flags == [False] * (n + 2) + [True] * (n + 1)


def test_batch_labels_are_next_tokens_with_padding_ignored():
    """labels[b, t] is input_ids[b, t + 1] where trained, IGNORE elsewhere (prompt and padding)."""
    input_ids, labels = make_batch(random.Random(0), 8, recall_fraction=1.0)
    for row, lab in zip(input_ids.tolist(), labels.tolist()):
        sep = row.index(SEP)
        n = sep - 1
        assert lab[:sep] == [IGNORE] * sep  # nothing is learned from the random text itself
        assert lab[sep:sep + n + 1] == row[1:sep] + [EOS]  # the copy, then EOS
        assert set(lab[sep + n + 1:]) <= {IGNORE}


def test_length_grouped_batches_are_reproducible_and_less_padded():
    """batches() is deterministic for a seed and pads less than random batching would."""
    first = [x for x, _ in (next(g) for g in [batches(random.Random(5), 16)] for _ in range(8))]
    again = [x for x, _ in (next(g) for g in [batches(random.Random(5), 16)] for _ in range(8))]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    padding = sum((x == EOS).sum().item() for x in first) / sum(x.numel() for x in first)
    random_padding = sum((x == EOS).sum().item() / x.numel()
                         for x, _ in (make_batch(random.Random(i), 16) for i in range(8))) / 8
    assert padding < random_padding


def test_curriculum_grows_the_recall_text_length():
    """Recall texts start at most 40 bytes and reach max_len after ramp_steps; batches() obeys the cap."""
    assert [text_len_cap(s, 500, 120) for s in (0, 250, 500, 5000)] == [40, 80, 120, 120]
    assert text_len_cap(0, 500, 24) == 24
    data = batches(random.Random(0), 8, max_len_at=lambda step: 30, recall_fraction=1.0)
    for _ in range(8):
        input_ids, _ = next(data)
        assert input_ids.shape[1] <= 2 * 30 + 2


def test_lr_schedule_warms_up_then_decays():
    """Linear warm-up to the peak, then linear decay to a tenth of it at the last step."""
    assert lr_at(0, 100, 1.0, 10) == pytest.approx(0.1)
    assert lr_at(9, 100, 1.0, 10) == pytest.approx(1.0)
    assert lr_at(99, 100, 1.0, 10) == pytest.approx(0.1, abs=0.02)
    assert lr_at(50, 100, 1.0, 10) > lr_at(80, 100, 1.0, 10)


def test_training_smoke_run_lowers_the_loss_reproducibly():
    """A few steps on a tiny config: finite loss that goes down, identical for the same seed."""
    kwargs = dict(steps=12, seed=1, batch_size=4, lr=3e-3, warmup=2, max_len=24, progress=False)
    model, losses = train(TINY, **kwargs)
    _, again = train(TINY, **kwargs)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3
    assert again == losses
    assert not model.training


@torch.no_grad()
def test_cached_greedy_matches_no_cache_greedy():
    """greedy_continue (batched, through its contiguous-cache backend) == re-running the full forward per token."""
    torch.manual_seed(0)
    model = TinyLlama(TINY).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.3)
    rng = random.Random(0)
    prompts = [[BOS, *rng.choices(range(256), k=rng.randint(1, 12))] for _ in range(5)]
    num_tokens = [7, 1, 9, 3, 5]
    expected = []
    for prompt, n in zip(prompts, num_tokens):
        row = list(prompt)
        for _ in range(n):
            row.append(model(torch.tensor([row]))[0, -1].argmax().item())
        expected.append(row[len(prompt):])
    assert greedy_continue(model, prompts, num_tokens) == expected


def test_recall_accuracy_scores_a_perfect_and_a_useless_model(monkeypatch):
    """recall_accuracy is 1.0 when the continuation is the text, 0.0 when it is all EOS."""

    def fake_greedy(model, prompts, num_tokens):  # prompts are BOS text SEP
        return [p[1:1 + n] if model == "copier" else [EOS] * n for p, n in zip(prompts, num_tokens)]

    monkeypatch.setattr("paged.model.data.greedy_continue", fake_greedy)
    assert recall_accuracy("copier", ByteTokenizer(), n=5, seed=0) == 1.0
    assert recall_accuracy("eos", ByteTokenizer(), n=5, seed=0) == 0.0


def test_cli_writes_a_loadable_directory(tmp_path, monkeypatch):
    """`python -m paged.model.train` (2 steps) writes config.json, weights and a training log that load back."""
    monkeypatch.setattr("paged.model.train.ModelConfig", lambda: TINY)
    main(["--steps", "2", "--batch-size", "2", "--out", str(tmp_path), "--threads", "1", "--eval-prompts", "2"])
    model, _ = load_model(tmp_path)
    log = json.loads((tmp_path / "training_log.json").read_text())
    assert model.config == TINY
    assert log["steps"] == 2 and log["seed"] == 0 and 0.0 <= log["recall_accuracy"] <= 1.0
