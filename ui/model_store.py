"""The process's loaded checkpoints: each allowed folder read from disk once, held once, its failure remembered.

    store = model_store()                      # one per server process (st.cache_resource), shared read-only
    model, tokenizer = store.get(folder, load)  # load(folder) runs at most once per folder version

Weights are immutable, so every session shares one copy. A folder's version is its "stamp": the modification times
and sizes of the folder and of the files a load reads, so replacing a checkpoint in place loads the new one on the
next visit. Unlike an LRU cache of a few entries, a folder once loaded stays loaded while the process lives (the
operator's allow-list bounds how many there are), so switching between four or more models never reloads one and
never holds two copies of one (a per-folder lock makes a second session wait for the first's load instead of
starting its own). A load that fails is remembered with its folder's stamp, so a link's `?model=` does not redo a
slow failure on every visit, except a refusal for lack of free memory (NotEnoughMemory), which may pass later.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

import streamlit as st

from paged.model.io import NotEnoughMemory

STAMPED_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json",
                 "tokenizer_config.json", "generation_config.json")
MAX_FAILURES = 64  # remembered failures (oldest forgotten first): each is a short message


def folder_stamp(folder: Path) -> tuple:
    """(mtime_ns, size) of the folder and of each file a load reads first (absent: None): its version."""
    stamp = []
    for path in (folder, *(folder / name for name in STAMPED_FILES)):
        try:
            st_ = path.stat()
            stamp.append((st_.st_mtime_ns, st_.st_size))
        except OSError:
            stamp.append(None)
    return tuple(stamp)


def _rebuilt(kind: type, message: str) -> Exception:
    """A fresh exception like the remembered one (a ValueError when its type cannot be built from a message)."""
    try:
        return kind(message)
    except Exception:  # noqa: BLE001
        return ValueError(message)


class ModelStore:
    """folder -> (stamp, loaded value); (folder, stamp) -> the failure a load raised. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folder_locks: dict[str, threading.Lock] = {}
        self._loaded: dict[str, tuple[tuple, object]] = {}
        self._failed: dict[tuple[str, tuple], tuple[type, str]] = {}  # (exception type, message): no frames kept

    def get(self, folder: Path | str, load: Callable[[Path], object]):
        """load(folder)'s value, loaded once per folder version; raises (again) what a failed load raised."""
        key = str(folder)
        with self._lock:
            folder_lock = self._folder_locks.setdefault(key, threading.Lock())
        with folder_lock:  # a second session asking for the same folder waits for this load, then shares it
            stamp = folder_stamp(Path(folder))
            with self._lock:
                if key in self._loaded and self._loaded[key][0] == stamp:
                    return self._loaded[key][1]
                failure = self._failed.get((key, stamp))
            if failure is not None:
                raise _rebuilt(*failure)
            try:
                value = load(Path(folder))
            except NotEnoughMemory:
                raise
            except Exception as err:  # noqa: BLE001  (remembered, then raised as it was)
                with self._lock:
                    if len(self._failed) >= MAX_FAILURES:
                        self._failed.pop(next(iter(self._failed)))
                    self._failed[(key, stamp)] = (type(err), str(err))
                raise
            with self._lock:
                self._loaded[key] = (stamp, value)  # a folder's older version is dropped here (sessions may keep it)
            return value

    def loaded(self) -> list[str]:
        """The folders held now."""
        with self._lock:
            return list(self._loaded)


@st.cache_resource(show_spinner=False)
def model_store() -> ModelStore:
    """The process's one ModelStore (shared by every session: it holds only immutable weights and messages)."""
    return ModelStore()
