"""Back on pages 4 and 6 from a checkpoint (lessons.rewind) instead of a replay from step 0.

An engine lesson's checkpoint at step s was taken at the end of step s (its arrivals included) under some request
log. It stands for the current log when its log is a prefix of it and every request given since arrives at step s
or later: a full replay of the current log would have held those requests back (pending) until then, so giving
them to the copy now (`_arrive`, as a replay's start does) and stepping on is the same replay. Anything else
(another config, model or tokenizer; a checkpoint past the target) is never used.
"""

from __future__ import annotations

from .rewind import Checkpoints, copied_bytes


def _shared(lesson) -> list:
    """What a checkpoint shares with its lesson instead of copying: the model and tokenizer (read-only, shared by
    every session), the config, and each recorded step, export made so far, snapshot, allocation and
    request (made once, never changed)."""
    out = [lesson.model, lesson.tokenizer, lesson.config]
    for items in (lesson.steps, lesson._exports, lesson.history, lesson.allocations, lesson.log,
                  lesson.requests):
        out.extend(items)
    return out


def engine_checkpoints() -> Checkpoints:
    """A fresh store for one EngineLesson (its Backs share it)."""
    return Checkpoints(shared=_shared)


def rewound(lesson, target: int):
    """A new lesson equal to a full replay of `lesson`'s requests to `target` steps, built from the newest fitting
    checkpoint (module docstring); None when none fits or a step fails (the caller replays from step 0, which
    reports the failure as it always has)."""
    log = list(lesson.log)

    def fits(copy, copy_log: tuple, at: int) -> bool:
        n = len(copy_log)
        return (copy.config == lesson.config and copy.model is lesson.model and copy.tokenizer is lesson.tokenizer
                and copy.attn_impl == lesson.attn_impl and n <= len(log) and tuple(log[:n]) == copy_log
                and all(spec.at_step >= at for spec in log[n:]))

    found = lesson._rewind.best(target, fits)
    if found is None:
        return None
    _, fresh = found
    for spec in log[len(fresh.log):]:
        fresh._arrive(spec)
    try:
        while len(fresh.steps) < target and fresh.step() is not None:
            pass
    except (RuntimeError, ValueError):
        return None
    fresh.news, fresh._load = dict(lesson.news), None
    return fresh


def forked(lesson):
    """A copy of `lesson` for another session: its own live state and checkpoint store (lessons.rewind.fork),
    sharing with `lesson` only what never changes (model, tokenizer, recorded steps, the kept copies)."""
    return forked_sized(lesson)[0]


def forked_sized(lesson) -> tuple:
    """(forked(lesson), the tensor bytes the copy holds): what the copy made (lessons.rewind.copied_bytes) and
    its checkpoints' copies; counted from the copy itself, not by walking everything it reaches."""
    import copy

    store = lesson._rewind
    shared = {id(o): o for o in _shared(lesson)}
    memo = dict(shared)
    memo[id(store)] = fork = store.fork()
    return copy.deepcopy(lesson, memo), copied_bytes(memo, shared) + fork.nbytes
