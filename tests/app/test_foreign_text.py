"""Text from outside is shown as text (AppTest): a checkpoint whose config.json's model_type is a markdown link, in
an allowed folder whose own name is markdown too, is refused in an error box whose rendered markdown (GFM, with
autolinks) holds no link and no server path, only the folder's name and the loader's words."""

from __future__ import annotations

import html
import json
import shutil

import pytest
from markdown_it import MarkdownIt

from .app_util import app_test, no_exception

ENGINE = "app_pages/4_Engine.py"
EVIL = "[Fix…](https://evil.example/x)"
GFM = MarkdownIt("gfm-like")


@pytest.fixture
def hostile_folder(checkpoint, tmp_path, monkeypatch):
    """A copy of the tiny checkpoint named "**x**_y_" whose model_type is a link, the only allowed folder."""
    folder = tmp_path / "srv-secret" / "**x**_y_"
    shutil.copytree(checkpoint, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": EVIL}))
    monkeypatch.setenv("PAGED_MODEL_DIRS", str(folder))
    monkeypatch.delenv("PAGED_MODEL_DIR", raising=False)
    return folder


def test_a_links_model_type_is_shown_as_text_without_server_paths(hostile_folder):
    """The error box renders the model_type as the literal text, the folder by its name, with no <a>, no <strong>
    and no part of the server's path."""
    at = app_test(ENGINE, params={"model": hostile_folder.name}).run()
    no_exception(at)
    assert at.error, "the hostile checkpoint was not refused"
    for box in at.error:
        rendered = GFM.render(box.value)
        assert "<a " not in rendered and "href" not in rendered, rendered
        text = html.unescape(rendered)
        assert "srv-secret" not in text and str(hostile_folder.parent) not in text, text
    rendered = html.unescape(GFM.render(" ".join(box.value for box in at.error)))
    assert EVIL in rendered and "The model **x**_y_ could not be loaded" in rendered, rendered


def test_a_failed_load_is_not_redone_on_each_visit(hostile_folder, monkeypatch):
    """Three visits of `?model=` naming the refused folder (three sessions) call the loader once: the failure is
    remembered for that folder's version, and each visit still shows the error box."""
    import ui.model_picker as picker

    calls = []
    real = picker.load_model

    def counting(path, **kw):
        calls.append(path)
        return real(path, **kw)
    monkeypatch.setattr(picker, "load_model", counting)
    for _ in range(3):
        at = app_test(ENGINE, params={"model": hostile_folder.name}).run()
        no_exception(at)
        assert any("could not be loaded" in box.value for box in at.error)
    assert calls == [hostile_folder]
