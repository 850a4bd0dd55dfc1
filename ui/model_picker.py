"""Which model an engine page runs: the shipped byte-level Llama, or a local checkpoint the operator allowed.

    model, tokenizer = engine_model(ctx, knobs)   # ui.engine_actions: picker in the sidebar, then the cached load

The choices are the shipped model plus ONLY the directories of the operator's allow-list: `PAGED_MODEL_DIRS`
(os.pathsep-separated) in the environment or in `.streamlit/secrets.toml`, plus `PAGED_MODEL_DIR`, the app's default
model. A learner never types a path: the sidebar offers the list, and a link's `?model=` naming anything else is
refused in the page's URL-notes box (the default is used). A folder is named by its folder name, in the picker, in
links and in error boxes, never by its server path. Weights are immutable, so each directory is loaded once per
process and version and shared by every session (ui.model_store); the engines stay per session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import streamlit as st

from paged.kv_cache import default_device
from paged.model import allowed_model_dirs, load_model
from paged.model.io import DEFAULT_DIR, MODEL_DIRS_ENV

from .model_store import model_store
from .page import PageContext
from .params import Knobs, read_param
from .parsers import one_of
from .safe_text import shown
from .widgets import show_error, stop_with_error

SHIPPED = "shipped"  # the picker's (and the URL's) name for the shipped byte-level model
DEFAULT_ENV = "PAGED_MODEL_DIR"  # the app's default model directory (operator-set, so allowed too)


def _secret_dirs() -> list[str]:
    """PAGED_MODEL_DIRS from .streamlit/secrets.toml (a string or a list of strings); [] when there is none."""
    try:
        value = st.secrets.get(MODEL_DIRS_ENV)
    except Exception:  # noqa: BLE001  (no secrets file, or one that does not parse: no allow-list from it)
        return []
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, (list, tuple)) else []


def folder_ids(dirs: list[Path]) -> dict[str, Path]:
    """The name each allowed folder goes by in the picker and in links: its folder name, never its server path; a
    second folder of the same name (or one named "shipped") gets "-2", "-3", … in the order listed."""
    ids: dict[str, Path] = {}
    for folder in dirs:
        base = folder.name or "model"
        name, k = base, 1
        while name in ids or name == SHIPPED:
            k += 1
            name = f"{base}-{k}"
        ids[name] = folder
    return ids


def model_choices(environ: Mapping[str, str] | None = None, secrets: list[str] | None = None
                  ) -> tuple[dict[str, Path], str, str | None]:
    """(folders, default, bad_default): every allowed directory by its id (folder_ids: folder names); the default
    is PAGED_MODEL_DIR's id when it is a model directory, else SHIPPED; bad_default is PAGED_MODEL_DIR's folder name
    when it is set but not usable (so the page can say so without showing the server's path), else None."""
    environ = os.environ if environ is None else environ
    secrets = _secret_dirs() if secrets is None else secrets
    default_text = environ.get(DEFAULT_ENV, "").strip()
    entries = [environ.get(MODEL_DIRS_ENV, ""), *secrets, default_text]
    folders = folder_ids(allowed_model_dirs({MODEL_DIRS_ENV: os.pathsep.join(e for e in entries if e)}))
    default, bad = SHIPPED, None
    if default_text:
        found = allowed_model_dirs({MODEL_DIRS_ENV: default_text})
        if found:
            default = next(name for name, folder in folders.items() if folder == found[0])
        else:
            bad = Path(default_text).name or default_text
    return folders, default, bad


def model_label(ctx: PageContext, choice: str) -> str:
    """How a choice is named on the page: the shipped model by its translated name, a folder by its id (its folder
    name). Plain text: pass it through ui.safe_text.shown before it reaches markdown."""
    return ctx.t("model.shipped") if choice == SHIPPED else choice


def _restart(prefix: str) -> None:
    """Picker callback: the page's requests replay from step 0 on the new model (lessons keep the same log)."""
    lesson = st.session_state.get(f"{prefix}.lesson")  # lessons.engine.EngineLesson
    if lesson is not None:
        lesson.reset()


def _accept_old_links(folders: dict[str, Path]) -> None:
    """A link made before folders were named by name holds the folder's full path: read it as that folder's id."""
    raw = st.query_params.get("model")
    if raw and raw not in folders:
        by_path = {str(folder): name for name, folder in folders.items()}
        if raw in by_path:
            st.query_params["model"] = by_path[raw]


def pick_model(ctx: PageContext, knobs: Knobs, prefix: str) -> str:
    """The sidebar picker (only when the operator allowed a directory), seeded from `?model=`; returns the choice
    (SHIPPED or an allowed folder's id). A `?model=` outside the list is named in the URL-notes box."""
    folders, default, bad = model_choices()
    if bad is not None:
        show_error(ctx, ctx.t("model.err_default", path=shown(bad)), ctx.t("model.fix_default"), where=st.sidebar)
    options = [SHIPPED, *folders]
    if not folders:  # nothing allowed: no picker, and the URL keeps no model=
        return read_param("model", one_of(options), default)
    _accept_old_links(folders)
    choice = knobs.select(ctx.t("model.picker"), "model", default, options, where=st.sidebar,
                          format_func=lambda o: model_label(ctx, o), help=ctx.t("model.picker_help"),
                          on_change=_restart, args=(prefix,))
    if choice != SHIPPED:
        st.sidebar.caption(ctx.t("model.plain_text"))
    return choice


def _folder(choice: str) -> Path | None:
    """The directory of a choice (None: the shipped model). Raises FileNotFoundError for an id no longer allowed."""
    if choice == SHIPPED:
        return None
    folders = model_choices()[0]
    if choice not in folders:
        raise FileNotFoundError(f"{choice}: not in the allow-list")
    return folders[choice]


def _load_from_disk(folder: Path):
    return load_model(None if folder == DEFAULT_DIR else folder, device=default_device())


def _load(choice: str):
    """(model, tokenizer) of one choice, read from disk once per process and folder version (ui.model_store):
    read-only, shared by every session; a failed load is remembered and raised again."""
    folder = _folder(choice)
    return model_store().get(DEFAULT_DIR if folder is None else folder, _load_from_disk)


LOAD_ERRORS = (FileNotFoundError, ValueError, OSError, RuntimeError, MemoryError)  # what a bad directory raises


def try_load(ctx: PageContext, choice: str):
    """(model, tokenizer) of `choice`, with a spinner while it loads. Raises what loading raises (LOAD_ERRORS), for
    a page that goes on without the model (the bug lab's random-tensor half) to show with `load_error`."""
    with st.spinner(ctx.t("model.loading", name=shown(model_label(ctx, choice)))):
        return _load(choice)


def error_detail(err: Exception) -> str:
    """A loader's (or an engine's) message for an error box: server paths shown as folder names, markdown escaped."""
    return shown(err, paths=[*model_choices()[0].values(), DEFAULT_DIR])


def load_error(ctx: PageContext, choice: str, err: Exception) -> tuple[str, str]:
    """(what, fix) for an error box about a directory that could not load: its name, the loader's words, the fix."""
    return (ctx.t("model.err_load", name=shown(model_label(ctx, choice)), detail=error_detail(err)),
            ctx.t("model.fix_load"))


def load_choice(ctx: PageContext, choice: str):
    """(model, tokenizer) of `choice`, with a spinner while it loads; an error box with the fix (and the page stops)
    when it cannot load: never a traceback."""
    try:
        return try_load(ctx, choice)
    except LOAD_ERRORS as err:
        if choice == SHIPPED:
            stop_with_error(ctx, ctx.t("engine.err_model", detail=error_detail(err)), ctx.t("engine.fix_model"))
        stop_with_error(ctx, *load_error(ctx, choice, err))
