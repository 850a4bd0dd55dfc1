"""A guard that turns "this call scans up to a huge number" into a prompt failure instead of a hang: it counts the
Python function calls and executed lines (a `while` loop of C calls included) inside a block and raises once they
pass a budget. Counting work, not time, keeps the tests independent of how loaded the machine is."""

from __future__ import annotations

import sys
from contextlib import contextmanager


class TooMuchWork(AssertionError):
    """More Python calls than the budget allowed: the code under test scales with a value it should not."""


@contextmanager
def call_budget(max_calls: int):
    """Fail (TooMuchWork) as soon as the block runs more than `max_calls` Python-level calls + lines."""
    count = 0
    previous = sys.gettrace()

    def tracer(frame, event, arg):
        nonlocal count
        if event in ("call", "line"):
            count += 1
            if count > max_calls:
                sys.settrace(previous)
                raise TooMuchWork(f"more than {max_calls} Python calls and lines: the work is not bounded")
        return tracer

    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)
