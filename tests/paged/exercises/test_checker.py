"""The checker itself: stubs fail every exercise, the reference passes them all, a workspace that
raises, returns the wrong shape, does not parse or never returns gets a clear message (never a crash
of the checker), and the workspace keeps the library's public names and signatures."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from paged.exercises.check import main, passed
from paged.exercises.workspace import FILES, init_workspace, load_workspace, unload_workspace

from exercise_util import NAMES, run, workspace

pytestmark = pytest.mark.exercises

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", NAMES)
def test_the_stubs_fail_every_exercise(tmp_path, name):
    [record] = run(workspace(tmp_path, solution=False), [name])
    assert record["ok"] is False
    assert "NotImplementedError" in record["en"] and "NotImplementedError" in record["zh"]


def test_the_reference_passes_every_exercise(tmp_path):
    records = run(workspace(tmp_path))
    assert [(r["exercise"], r["ok"]) for r in records] == [(n, True) for n in NAMES]
    engine = records[-1]["data"]
    assert engine["got"] == engine["twin"]  # token for token with the contiguous twin
    assert (
        engine["got"][1] == engine["texts"][1]
    )  # and the shipped model copied the text: it really ran
    assert passed(records)


def test_an_exception_is_a_failed_exercise_with_the_learners_traceback(tmp_path):
    root = workspace(
        tmp_path,
        {
            "attention.py": [
                (
                    "    block_size = key_cache.shape[1]\n    keys, values = [], []",
                    "    block_size = key_cache.shape[1]\n    keys, values = [], []\n"
                    "    ratio = context_len / 0",
                )
            ]
        },
    )
    [*ok, record] = run(root)
    assert [r["ok"] for r in ok] == [True] * 3 and record["exercise"] == "gather_loop"
    assert "ZeroDivisionError" in record["en"] and record["link"] is None
    assert "attention.py" in record["traceback"] and "context_len / 0" in record["traceback"]
    assert "exercises.py" not in record["traceback"]  # the checker's own frames are cut


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            "return key_cache.flatten(0, 1)[slots][:, 0], value_cache.flatten(0, 1)[slots]",
            "has shape",
        ),
        (
            "return key_cache.flatten(0, 1)[slots][:-1], value_cache.flatten(0, 1)[slots]",
            "has shape",
        ),
        ("return None", "must return (keys, values)"),
        (
            "return key_cache.flatten(0, 1)[slots].tolist(), value_cache.flatten(0, 1)[slots]",
            "must be a torch.Tensor",
        ),
    ],
)
def test_a_wrong_shape_or_type_gets_a_clear_message(tmp_path, wrong, words):
    root = workspace(
        tmp_path,
        {
            "attention.py": [
                (
                    "    return key_cache.flatten(0, 1)[slots], value_cache.flatten(0, 1)[slots]",
                    "    " + wrong,
                )
            ]
        },
    )
    [record] = run(root, ["gather"])
    assert record["ok"] is False and words in record["en"]
    assert record["traceback"] is None
    if "[:-1]" in wrong:  # one token short: the rows are tokens, so the link is context_len
        assert record["link"] == "context_len"


def test_a_file_that_does_not_parse_fails_the_first_exercise(tmp_path):
    root = workspace(tmp_path, {"sequence.py": [("class Sequence:", "class Sequence")]})
    [record] = run(root)
    assert record["exercise"] == "locate" and record["ok"] is False
    assert "SyntaxError" in record["en"] and "sequence.py" in record["traceback"]


def test_each_check_imports_the_files_afresh(tmp_path):
    """An edit between two checks is picked up (fresh module objects each time)."""
    root = workspace(tmp_path)
    assert run(root, ["locate"])[0]["ok"]
    path = root / "addressing.py"
    path.write_text(
        path.read_text().replace(
            "return token_index // block_size, token_index % block_size",
            "return token_index % block_size, token_index // block_size",
        )
    )
    record = run(root, ["locate"])[0]
    assert (record["ok"], record["link"]) == (False, "logical_block_id")


def test_the_workspace_keeps_the_librarys_names_and_signatures(tmp_path):
    init_workspace(tmp_path)
    modules = load_workspace(tmp_path)
    try:
        for name, module in modules.items():
            library = importlib.import_module(f"paged.{name}")
            for attr, fn in vars(module).items():
                if attr.startswith("_") or getattr(fn, "__module__", None) != name:
                    continue
                assert hasattr(library, attr), f"paged.{name} has no {attr}"
                if inspect.isfunction(fn):
                    ours = list(inspect.signature(fn).parameters)
                    assert ours == list(inspect.signature(getattr(library, attr)).parameters), attr
                else:
                    for meth in (
                        "__init__",
                        "allocate",
                        "append_slot",
                        "free",
                        "on_prefill_done",
                        "on_decode_done",
                    ):
                        if hasattr(fn, meth) and inspect.isfunction(getattr(fn, meth)):
                            ours = list(inspect.signature(getattr(fn, meth)).parameters)
                            theirs = list(
                                inspect.signature(getattr(getattr(library, attr), meth)).parameters
                            )
                            assert ours == theirs[: len(ours)], (attr, meth)
    finally:
        unload_workspace(tmp_path)


def test_init_never_overwrites_a_learners_work(tmp_path):
    init_workspace(tmp_path)
    (tmp_path / "addressing.py").write_text("# mine\n")
    with pytest.raises(ValueError, match="already holds"):
        init_workspace(tmp_path, solution=True)
    assert (tmp_path / "addressing.py").read_text() == "# mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*FILES, "README.md", "README.zh.md"]
    )


def test_the_cli_refuses_a_folder_without_a_workspace(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 2
    assert "exercises init" in capsys.readouterr().err


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "paged", "exercises", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_check_json_of_the_reference_exits_zero_whatever_it_prints(tmp_path):
    """Through the child process: one JSON object per exercise, all ok, status 0; the learner's
    print() does not break the protocol."""
    root = workspace(
        tmp_path,
        {
            "addressing.py": [
                (
                    "    return token_index // block_size, token_index % block_size",
                    "    print('RESULT debugging', token_index)\n"
                    "    return token_index // block_size, token_index % block_size",
                )
            ]
        },
    )
    done = _cli("check", str(root), "--json", "--hint", "--lang", "zh")
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    assert [(r["exercise"], r["ok"], r["link"], r["message"]) for r in records] == [
        (n, True, None, None) for n in NAMES
    ]
    assert all(r["hint"] for r in records)


@pytest.mark.slow
def test_an_infinite_loop_is_stopped_at_the_time_limit(tmp_path):
    root = workspace(
        tmp_path,
        {
            "attention.py": [
                (
                    "    block_size = key_cache.shape[1]\n    keys, values = [], []",
                    "    block_size = key_cache.shape[1]\n    keys, values = [], []\n"
                    "    while True:\n        pass",
                )
            ]
        },
    )
    done = _cli("check", str(root), "--only", "gather_loop", "--json", "--time-scale", "0.3")
    assert done.returncode == 1
    [record] = json.loads(done.stdout)
    assert (record["exercise"], record["ok"], record["link"]) == ("gather_loop", False, None)
    assert "longer than 3 s" in record["message"]
