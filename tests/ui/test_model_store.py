"""ui.model_store.ModelStore: each folder is read once per version and held once, however many folders a class
switches between; a failed load is remembered until the folder changes (a lack of free memory is not); two
sessions asking at once share one load."""

from __future__ import annotations

import os
import threading
import time

import pytest

from paged.model.io import NotEnoughMemory
from ui.model_store import ModelStore


@pytest.fixture
def folders(tmp_path):
    out = []
    for name in "abcde":
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text("{}")
        out.append(folder)
    return out


class Loader:
    """Counts loads per folder; returns a fresh object per load (so two loads of one folder are two copies)."""

    def __init__(self, fail=None):
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, folder):
        self.calls.append(folder.name)
        if self.fail is not None:
            raise self.fail
        return object()


def test_switching_among_five_folders_loads_each_once_and_holds_one_copy(folders):
    """A, B, C, D, E, then A..E three more times: five loads in all, and each folder always the same object."""
    store, load = ModelStore(), Loader()
    first = {f.name: store.get(f, load) for f in folders}
    for _ in range(3):
        for f in folders:
            assert store.get(f, load) is first[f.name]
    assert sorted(load.calls) == sorted(f.name for f in folders)


def test_a_failed_load_is_remembered_until_the_folder_changes(folders):
    """The second visit raises the same error type and message without loading; touching config.json (a new
    version) loads again."""
    store, load = ModelStore(), Loader(fail=ValueError("a: model_type must be one of ..."))
    for _ in range(3):
        with pytest.raises(ValueError, match="model_type must be one of"):
            store.get(folders[0], load)
    assert load.calls == ["a"]
    stat = os.stat(folders[0] / "config.json")
    os.utime(folders[0] / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(ValueError):
        store.get(folders[0], load)
    assert load.calls == ["a", "a"]


def test_a_lack_of_free_memory_is_not_remembered(folders):
    """NotEnoughMemory may pass once memory is freed: each visit tries again."""
    store, load = ModelStore(), Loader(fail=NotEnoughMemory("a: loading needs 9 GiB"))
    for _ in range(2):
        with pytest.raises(NotEnoughMemory):
            store.get(folders[0], load)
    assert load.calls == ["a", "a"]


def test_two_sessions_asking_at_once_share_one_load(folders):
    """Four threads ask for one folder while its load is slow: one load, one object for all."""
    store, calls, results = ModelStore(), [], []

    def slow(folder):
        calls.append(folder.name)
        time.sleep(0.2)  # (not a timing assertion: only keeps the others waiting on the lock)
        return object()

    threads = [threading.Thread(target=lambda: results.append(store.get(folders[1], slow))) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert calls == ["b"] and len(results) == 4 and all(r is results[0] for r in results)
