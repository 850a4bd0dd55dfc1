"""ui.heap: once enough modules were imported since the last freeze, the collector stops scanning what is loaded
(a full collection gets short), and a run that imported nothing freezes nothing."""

from __future__ import annotations

import gc
import sys
import types

import ui.heap as heap


def test_new_imports_leave_the_collectors_view_once(monkeypatch):
    """Five new modules with min_new=5: a freeze (a tracked object made now is frozen, the count grows by at least
    it); right after, nothing new was imported, so no second freeze."""
    heap._frozen.clear()
    heap.freeze_new_imports(min_new=1)  # from the current sys.modules on
    for i in range(5):
        monkeypatch.setitem(sys.modules, f"_paged_heap_test_{i}", types.ModuleType(f"_paged_heap_test_{i}"))
    made_now = [object() for _ in range(3)] + [{"a": [1]}]  # a tracked dict
    assert gc.is_tracked(made_now[-1])
    before = gc.get_freeze_count()
    assert heap.freeze_new_imports(min_new=6) is False  # five new is fewer than six
    assert heap.freeze_new_imports(min_new=5) is True
    assert gc.get_freeze_count() >= before + len(made_now)
    assert heap.freeze_new_imports(min_new=1) is False  # nothing imported since
    heap._frozen.clear()


def test_collect_departed_collects_once_a_session_is_gone(monkeypatch):
    """A full collection runs when a session held at an earlier look is gone, not when sessions only
    arrive; within COLLECT_EVERY_S of the last one the departed stay owed and are collected after."""
    import ui.heap as heap

    runs = []
    monkeypatch.setattr(heap.gc, "collect", lambda *a: runs.append(1) or 0)
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    heap._frozen().sessions, heap._frozen().collected = set(), -1e9
    assert not heap.collect_departed({"a", "b"}, now=0.0)  # arrivals only
    assert heap.collect_departed({"b"}, now=1.0) and runs == [1]  # "a" left
    assert not heap.collect_departed({"c"}, now=2.0)  # "b" left, but too soon: owed
    assert not heap.collect_departed({"c"}, now=3.0)
    assert heap.collect_departed({"c"}, now=1.0 + heap.COLLECT_EVERY_S) and runs == [1, 1]
    assert not heap.collect_departed({"c"}, now=100.0)  # nobody left since
