"""Which model an engine page runs: the shipped byte-level Llama, or a local checkpoint the operator allowed.

    model, tokenizer = engine_model(ctx, knobs)   # ui.engine_actions: picker in the sidebar, then the cached load

The choices are the shipped model plus ONLY the directories of the operator's allow-list: `PAGED_MODEL_DIRS`
(os.pathsep-separated) in the environment or in `.streamlit/secrets.toml`, plus `PAGED_MODEL_DIR`, the app's default
model. A learner never types a path: the sidebar offers the list, and a link's `?model=` naming anything else is
refused in the page's URL-notes box (the default is used). Weights are immutable, so each directory is loaded once
per process (`st.cache_resource`) and shared by every session; the engines stay per session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import streamlit as st

from paged.kv_cache import default_device
from paged.model import allowed_model_dirs, load_model
from paged.model.io import MODEL_DIRS_ENV

from .page import PageContext
from .params import Knobs, one_of, read_param
from .widgets import show_error, stop_with_error

SHIPPED = "shipped"  # the picker's (and the URL's) name for the shipped byte-level model
DEFAULT_ENV = "PAGED_MODEL_DIR"  # the app's default model directory (operator-set, so allowed too)
MAX_CACHED_MODELS = 3  # model directories kept loaded in one process (a few hundred MB each for a 135M model)


def _secret_dirs() -> list[str]:
    """PAGED_MODEL_DIRS from .streamlit/secrets.toml (a string or a list of strings); [] when there is none."""
    try:
        value = st.secrets.get(MODEL_DIRS_ENV)
    except Exception:  # noqa: BLE001  (no secrets file, or one that does not parse: no allow-list from it)
        return []
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, (list, tuple)) else []


def model_choices(environ: Mapping[str, str] | None = None, secrets: list[str] | None = None
                  ) -> tuple[list[str], str, str | None]:
    """(options, default, bad_default): SHIPPED then every allowed directory (resolved, as text); the default is
    PAGED_MODEL_DIR when it is a model directory, else SHIPPED; bad_default is PAGED_MODEL_DIR's text when it is set
    but not usable (so the page can say so), else None."""
    environ = os.environ if environ is None else environ
    secrets = _secret_dirs() if secrets is None else secrets
    default_text = environ.get(DEFAULT_ENV, "").strip()
    entries = [environ.get(MODEL_DIRS_ENV, ""), *secrets, default_text]
    dirs = allowed_model_dirs({MODEL_DIRS_ENV: os.pathsep.join(e for e in entries if e)})
    options = [SHIPPED] + [str(d) for d in dirs]
    default, bad = SHIPPED, None
    if default_text:
        found = allowed_model_dirs({MODEL_DIRS_ENV: default_text})
        if found:
            default = str(found[0])
        else:
            bad = default_text
    return options, default, bad


def model_label(ctx: PageContext, choice: str) -> str:
    """How the picker shows a choice: the shipped model by name, a directory by its folder name."""
    return ctx.t("model.shipped") if choice == SHIPPED else Path(choice).name or choice


def _restart(prefix: str) -> None:
    """Picker callback: the page's requests replay from step 0 on the new model (lessons keep the same log)."""
    lesson = st.session_state.get(f"{prefix}.lesson")  # lessons.engine.EngineLesson
    if lesson is not None:
        lesson.reset()


def pick_model(ctx: PageContext, knobs: Knobs, prefix: str) -> str:
    """The sidebar picker (only when the operator allowed a directory), seeded from `?model=`; returns the choice
    (SHIPPED or an allowed directory). A `?model=` outside the list is named in the URL-notes box."""
    options, default, bad = model_choices()
    if bad is not None:
        show_error(ctx, ctx.t("model.err_default", path=bad), ctx.t("model.fix_default"), where=st.sidebar)
    if len(options) == 1:  # nothing allowed: no picker, and the URL keeps no model=
        return read_param("model", one_of(options), default)
    labels = {o: model_label(ctx, o) for o in options}
    if len(set(labels.values())) < len(labels):  # two folders of the same name: show whole paths
        labels = {o: o if o != SHIPPED else labels[o] for o in options}
    choice = knobs.select(ctx.t("model.picker"), "model", default, options, where=st.sidebar,
                          format_func=labels.get, help=ctx.t("model.picker_help"), on_change=_restart,
                          args=(prefix,))
    if choice != SHIPPED:
        st.sidebar.caption(ctx.t("model.plain_text"))
    return choice


@st.cache_resource(show_spinner=False, max_entries=MAX_CACHED_MODELS)
def _load(choice: str):
    """(model, tokenizer) of one choice, loaded once per process: read-only, shared by every session."""
    return load_model(None if choice == SHIPPED else choice, device=default_device())


LOAD_ERRORS = (FileNotFoundError, ValueError, OSError, RuntimeError, MemoryError)  # what a bad directory raises


def try_load(ctx: PageContext, choice: str):
    """(model, tokenizer) of `choice`, with a spinner while it loads. Raises what loading raises (LOAD_ERRORS), for
    a page that goes on without the model (the bug lab's random-tensor half) to show with `load_error`."""
    with st.spinner(ctx.t("model.loading", name=model_label(ctx, choice))):
        return _load(choice)


def load_error(ctx: PageContext, choice: str, err: Exception) -> tuple[str, str]:
    """(what, fix) for an error box about a directory that could not load: its name, the loader's words, the fix."""
    return (ctx.t("model.err_load", name=model_label(ctx, choice), detail=str(err)), ctx.t("model.fix_load"))


def load_choice(ctx: PageContext, choice: str):
    """(model, tokenizer) of `choice`, with a spinner while it loads; an error box with the fix (and the page stops)
    when it cannot load: never a traceback."""
    try:
        return try_load(ctx, choice)
    except LOAD_ERRORS as err:
        if choice == SHIPPED:
            stop_with_error(ctx, ctx.t("engine.err_model", detail=str(err)), ctx.t("engine.fix_model"))
        stop_with_error(ctx, *load_error(ctx, choice, err))
