"""Synthetic training data for the tiny model, and the recall evaluation. No downloads.

The main task is recall: `BOS text SEP text EOS` with random printable text, loss only on the
copy after SEP (and the EOS). Only attending back to the exact earlier token, i.e. reading the KV
history, solves it: that is what makes a wrong block table visible. A minority of examples are
simple structured continuations (counting, alphabets, repeated words) so free-form demo prompts
give sensible output.

An example is a token list plus a parallel list of "train on the prediction of this token" flags.
"""

from __future__ import annotations

import random
import string
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

from paged.model.tokenizer import BOS, EOS, SEP

# 95 printable ASCII characters
PRINTABLE = string.ascii_letters + string.digits + string.punctuation + " "
IGNORE = -100  # label value that cross_entropy skips
WORDS = ("cat", "dog", "block", "page", "cache", "token", "hello", "paged", "red", "blue", "sun",
         "tree", "小猫")


def random_text(rng: random.Random, min_len: int, max_len: int) -> str:
    """Random printable-ASCII text of a length drawn uniformly from [min_len, max_len]."""
    return "".join(rng.choices(PRINTABLE, k=rng.randint(min_len, max_len)))


def recall_prompt(text: str) -> list[int]:
    """BOS text SEP: what the model sees before it should reproduce `text`."""
    return [BOS, *text.encode("utf-8"), SEP]


def recall_example(rng: random.Random, min_len: int = 20,
                   max_len: int = 120) -> tuple[list[int], list[bool]]:
    """BOS text SEP text EOS; trained only on the copy and the EOS."""
    text = random_text(rng, min_len, max_len)
    prompt = recall_prompt(text)
    tokens = prompt + list(text.encode("utf-8")) + [EOS]
    return tokens, [False] * len(prompt) + [True] * (len(tokens) - len(prompt))


def structured_text(rng: random.Random, max_len: int = 200) -> str:
    """One simple continuation: counting, an alphabet run, or a repeated word."""
    kind = rng.randrange(3)
    # "7 8 9 10 11 ..."; half of them from a small number, so "1 2 3" prompts continue too
    if kind == 0:
        start = rng.randint(0, 10) if rng.random() < 0.5 else rng.randint(0, 500)
        parts = [str(n) for n in range(start, start + 200)]
    elif kind == 1:  # "defghij..." (lower or upper case, wrapping around)
        letters = rng.choice((string.ascii_lowercase, string.ascii_uppercase))
        start = rng.randrange(26)
        parts = ["".join(letters[(start + i) % 26] for i in range(200))]
    else:  # "page page page ..."
        parts = [rng.choice(WORDS)] * 100
    text = " ".join(parts)
    cut = rng.randint(max_len // 4, max_len)
    return text.encode("utf-8")[:cut].decode("utf-8", errors="ignore")


def structured_example(rng: random.Random,
                       max_len: int = 200) -> tuple[list[int], list[bool]]:
    """BOS text (no EOS: these continue forever); trained on every token after BOS."""
    tokens = [BOS, *structured_text(rng, max_len).encode("utf-8")]
    return tokens, [False] + [True] * (len(tokens) - 1)


def random_example(rng: random.Random, recall_fraction: float = 0.9, min_len: int = 20,
                   max_len: int = 120) -> tuple[list[int], list[bool]]:
    """A recall example with probability recall_fraction, otherwise a structured one."""
    if rng.random() < recall_fraction:
        return recall_example(rng, min_len, max_len)
    return structured_example(rng, 2 * max_len)


def collate(examples: list[tuple[list[int], list[bool]]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Examples -> (input_ids [B, T], labels [B, T]); labels[b, t]: the target after [b, t].

    Rows are right-padded with EOS and IGNORE labels; attention is causal, so padding never affects
    real tokens.
    """
    width = max(len(tokens) for tokens, _ in examples) - 1
    input_ids = torch.full((len(examples), width), EOS, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    for row, (tokens, train) in enumerate(examples):
        n = len(tokens) - 1
        input_ids[row, :n] = torch.tensor(tokens[:-1])
        labels[row, :n] = torch.tensor([t if keep else IGNORE
                                        for t, keep in zip(tokens[1:], train[1:])])
    return input_ids, labels


def make_batch(rng: random.Random, batch_size: int,
               **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch of fresh random examples -> (input_ids [B, T], labels [B, T])."""
    return collate([random_example(rng, **kwargs) for _ in range(batch_size)])


def batches(rng: random.Random, batch_size: int,
            max_len_at: Callable[[int], int] = lambda step: 120, group: int = 8,
            **kwargs) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless training batches (input_ids [B, T], labels [B, T]), grouped by length.

    Draws group * batch_size examples (recall texts at most max_len_at(step) bytes), sorts them by
    length, cuts them into `group` batches and yields those in random order: the examples of
    `group` make_batch calls, each batch padded only to its own longest row.
    """
    step = 0
    while True:
        examples = sorted((random_example(rng, max_len=max_len_at(step), **kwargs)
                           for _ in range(group * batch_size)), key=lambda e: len(e[0]))
        chunks = [examples[i * batch_size:(i + 1) * batch_size] for i in range(group)]
        rng.shuffle(chunks)
        for chunk in chunks:
            yield collate(chunk)
            step += 1


class BatchCache:
    """A minimal contiguous-cache attention backend for greedy batch evaluation (not the engine's).

    Row b's keys/values live at positions 0..cached_token_counts[b]-1 of key_cache[layer, b]
    (tokens written before the step; a step reads those plus its own). Call
    `begin_step(step_lens)` before each forward (tokens per row, back to back in row order) and
    `end_step()` after it. A query at position p sees keys 0..p of its own row.
    """

    def __init__(self, config, batch_size: int, max_len: int, device=None,
                 dtype=torch.float32) -> None:
        shape = (config.num_hidden_layers, batch_size, config.num_key_value_heads, max_len,
                 config.head_dim)
        self.key_cache = torch.zeros(shape, device=device, dtype=dtype)  # [L, B, K, max_len, D]
        self.value_cache = torch.zeros(shape, device=device, dtype=dtype)  # [L, B, K, max_len, D]
        self.cached_token_counts = [0] * batch_size
        self.device = device

    def begin_step(self, step_lens: list[int]) -> None:
        """Prepare a step of step_lens[b] tokens per row b: rows, positions, mask [B, 1, Tq, Tk]."""
        lens = torch.tensor(step_lens, device=self.device)
        starts = torch.tensor(self.cached_token_counts, device=self.device)
        self._rows = torch.repeat_interleave(torch.arange(len(step_lens), device=self.device),
                                             lens)  # [N]
        # [N] index in step
        self._local = torch.cat([torch.arange(n, device=self.device) for n in step_lens])
        self._pos = starts[self._rows] + self._local  # [N] position in the row = slot in the cache
        self._width = max(step_lens)
        self._keys = max(c + n for c, n in zip(self.cached_token_counts, step_lens))
        q_pos = torch.zeros(len(step_lens), self._width, dtype=torch.long,
                            device=self.device)  # [B, Tq]
        # padded queries keep position 0: they see key 0 only
        q_pos[self._rows, self._local] = self._pos
        k_pos = torch.arange(self._keys, device=self.device)
        self._mask = (k_pos[None, None, :] <= q_pos[:, :, None])[:, None]  # [B, 1, Tq, Tk]
        self._step_lens = step_lens

    def end_step(self) -> None:
        """Count the step's tokens as cached."""
        self.cached_token_counts = [c + n for c, n in zip(self.cached_token_counts,
                                                           self._step_lens)]

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor,
                 v: torch.Tensor) -> torch.Tensor:
        """q [N, H, D], k/v [N, K, D] -> [N, H, D]."""
        self.key_cache[layer][self._rows, :, self._pos] = k
        self.value_cache[layer][self._rows, :, self._pos] = v
        q_pad = q.new_zeros(len(self._step_lens), self._width, *q.shape[1:])  # [B, Tq, H, D]
        q_pad[self._rows, self._local] = q
        out = F.scaled_dot_product_attention(
            q_pad.transpose(1, 2), self.key_cache[layer][:, :, :self._keys],
            self.value_cache[layer][:, :, :self._keys], attn_mask=self._mask,
            enable_gqa=True)  # [B, H, Tq, D]
        return out.transpose(1, 2)[self._rows, self._local]


@torch.no_grad()
def greedy_continue(model, prompts: list[list[int]], num_tokens: list[int]) -> list[list[int]]:
    """Greedy continuation of prompt i for num_tokens[i] tokens, batched through a BatchCache."""
    param = next(model.parameters())
    steps = max(num_tokens)
    cache = BatchCache(model.config, len(prompts), max(map(len, prompts)) + steps, param.device,
                       param.dtype)
    input_ids = torch.tensor([t for p in prompts for t in p], device=param.device)  # [N]
    positions = torch.cat([torch.arange(len(p)) for p in prompts]).to(param.device)  # [N]
    # each prompt's last token
    last = torch.tensor([len(p) for p in prompts], device=param.device).cumsum(0) - 1
    cache.begin_step([len(p) for p in prompts])
    next_ids = model(input_ids, positions, backend=cache)[last].argmax(-1)  # [B]
    cache.end_step()
    outputs = [next_ids]
    for _ in range(steps - 1):
        positions = torch.tensor(cache.cached_token_counts, device=param.device)
        cache.begin_step([1] * len(prompts))
        next_ids = model(next_ids, positions, backend=cache).argmax(-1)  # [B]
        cache.end_step()
        outputs.append(next_ids)
    generated = torch.stack(outputs, dim=1).tolist()  # [B, steps]
    return [row[:n] for row, n in zip(generated, num_tokens)]


def recall_accuracy(model, tokenizer, n: int, seed: int, min_len: int = 40,
                    max_len: int = 120) -> float:
    """Byte accuracy of greedy recall on n fresh random texts (BOS text SEP -> text), in [0, 1].

    Each text is continued for exactly len(text) tokens; a special token where a byte belongs
    counts as wrong.
    """
    rng = random.Random(seed)
    texts = [random_text(rng, min_len, max_len) for _ in range(n)]
    prompts = [tokenizer.encode(t) + [SEP] for t in texts]
    outputs = greedy_continue(model, prompts, [len(t) for t in texts])
    correct = sum(o == b for t, out in zip(texts, outputs)
                  for o, b in zip(out, t.encode("utf-8")))
    return correct / sum(len(t) for t in texts)
