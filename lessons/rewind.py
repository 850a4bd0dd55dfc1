"""Checkpoints, so Back costs what a few steps cost, at step 600 as at step 10.

A lesson is a replayable log (batch decode: its ops; the engine: its requests and steps), and Back means "the state
the page had one step ago". Replaying the whole log from the start gives exactly that state, at a cost that grows
with the log. A `Checkpoints` store keeps a copy of the lesson every `every` steps (deep copies: the pool's K/V, the
seeded generators, the engines' queues); Back starts from the newest copy at or before the target and replays only
the few operations after it. What it builds is the full replay's state bit for bit (tests/lessons/test_rewind.py
holds that for random Back / step / add sequences).

    store = Checkpoints(shared=lambda lesson: [...])   # what a copy shares with its lesson (never changes)
    store.save(position, lesson, log=lesson.ops)      # after a step: kept when position % every == 0
    position, copy = store.best(target, fits)         # newest copy <= target with fits(copy, log, position) true

A copy shares what never changes once made (the model, the tokenizer, each recorded step: `shared`) with the lesson
instead of copying it, so a checkpoint holds only the live state (for the engine page ~1.3 MB, mostly the two KV
caches). The copies are bounded by bytes: past `budget_bytes` the oldest are thinned first (the newest RECENT stay
`every` apart), so a session's checkpoints never outgrow the budget, at the price of more replayed steps for a Back
far into the past.
"""

from __future__ import annotations

import copy
from typing import Callable, Iterable

import torch

EVERY = 16                 # steps between two checkpoints (Back replays at most EVERY - 1 steps, until thinned)
BUDGET_BYTES = 24 << 20    # a session's checkpoints of one lesson hold at most about this many tensor bytes
RECENT = 12                # the newest copies, never thinned while older ones can be


def copied_bytes(memo: dict, shared: dict) -> int:
    """Bytes of the distinct tensor storages a `copy.deepcopy(…, memo)` made: the memo holds every
    object the copy made under its original's id, so its tensors not in `shared` (the memo it started
    with) are the new ones; a torch.Generator is copied through a tensor of its state, so a seeded
    generator's state counts too. Costs what the copy cost, not a walk of all the copy reaches."""
    storages, total = set(), 0
    for key, obj in memo.items():
        if isinstance(obj, torch.Tensor) and key not in shared:
            storage = obj.untyped_storage()
            if storage.data_ptr() not in storages:
                storages.add(storage.data_ptr())
                total += storage.nbytes()
    return total


class Checkpoints:
    """Copies of one lesson at some positions (see the module docstring). Positions are steps (or ops) taken."""

    def __init__(self, shared: Callable[[object], Iterable] = lambda lesson: (), every: int = EVERY,
                 budget_bytes: int = BUDGET_BYTES) -> None:
        if every < 1 or budget_bytes < 0:
            raise ValueError(f"every must be >= 1 and budget_bytes >= 0, got {every}, {budget_bytes}")
        self.shared, self.every, self.budget_bytes = shared, every, budget_bytes
        self._copies: dict[int, tuple[object, tuple, int]] = {}  # position -> (copy, its log, its tensor bytes)
        self._sources: tuple[Checkpoints, ...] = (self,)  # stores the kept copies point at (a fork's parent too)

    def fork(self) -> "Checkpoints":
        """A store of its own for another lesson, starting with this one's copies (shared: they are only ever
        copied from, never changed): what one store gains or drops later, the other does not see."""
        other = Checkpoints(self.shared, self.every, self.budget_bytes)
        other._copies = dict(self._copies)
        other._sources = self._sources + (other,)
        return other

    def __deepcopy__(self, memo):  # a lesson's copies share its store (never copy a store into itself)
        return self

    def __len__(self) -> int:
        return len(self._copies)

    @property
    def positions(self) -> list[int]:
        return sorted(self._copies)

    @property
    def nbytes(self) -> int:
        return sum(size for _, _, size in self._copies.values())

    def _memo(self, lesson) -> dict[int, object]:
        memo = {id(o): o for o in self.shared(lesson)}
        memo.update((id(source), self) for source in self._sources)  # a copy made from here belongs to this store
        return memo

    def save(self, position: int, lesson, log) -> bool:
        """Keep a copy of `lesson` at `position` when it is a multiple of the spacing and no copy of this same `log`
        is kept there already (a copy of another log there is replaced). Returns whether a copy was made."""
        if position <= 0 or position % self.every:
            return False
        log = tuple(log)
        kept = self._copies.get(position)
        if kept is not None and kept[1] == log:
            return False
        shared = self._memo(lesson)
        memo = dict(shared)
        snapshot = copy.deepcopy(lesson, memo)
        self._copies[position] = (snapshot, log, copied_bytes(memo, shared))
        self._thin()
        return True

    def _thin(self) -> None:
        """Past the budget, drop copies oldest first, sparsest-kept last: the newest RECENT stay EVERY apart (Back
        near the present, the usual case, replays at most every - 1 steps); older ones thin to every 4th, 16th, …
        position (a long way back replays more)."""
        while self._copies and self.nbytes > self.budget_bytes:
            positions = sorted(self._copies)
            older = positions[:-RECENT]
            drop = positions[0]
            stride = self.every * 4
            while older and stride <= older[-1]:
                sparse = [p for p in older if p % stride]
                if sparse:
                    drop = sparse[0]
                    break
                stride *= 4
            else:
                drop = older[0] if older else positions[0]
            del self._copies[drop]

    def best(self, target: int, fits: Callable[[object, tuple, int], bool]):
        """(position, a fresh copy) of the newest checkpoint at or before `target` for which
        fits(checkpoint, its log, its position) is true, or None. The kept checkpoint stays untouched."""
        for position in sorted((p for p in self._copies if p <= target), reverse=True):
            snapshot, log, _ = self._copies[position]
            if fits(snapshot, log, position):
                return position, copy.deepcopy(snapshot, self._memo(snapshot))
        return None

    def forget(self, keep: Callable[[tuple, int], bool]) -> None:
        """Drop every checkpoint for which keep(its log, its position) is false."""
        for position in [p for p, (_, log, _) in self._copies.items() if not keep(log, p)]:
            del self._copies[position]
