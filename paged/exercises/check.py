"""`python -m paged exercises init|check`: write a workspace, or check one.

    python -m paged exercises init DIR [--solution]
    python -m paged exercises check DIR [--only NAME] [--json] [--hint] [--lang en|zh]

A check runs the exercises in a child process (runner.py) and kills it when one overruns its time
limit, so a hang or a crash in the learner's code is a failed exercise, never a crash of the
checker. Exit status 0 only if every exercise run passes (and, without --only, all of them ran).

"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .exercises import EXERCISES
from .texts import LABELS, LANGS, hint as hint_for
from .workspace import FILES, init_workspace

ROOT = Path(__file__).resolve().parents[2]  # the folder holding the paged package
START_LIMIT = 180.0  # seconds for the child to import torch (slow on a busy machine)


def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _failed(name: str, key: str, **fmt) -> dict:
    en, zh = LABELS["en"][key].format(**fmt), LABELS["zh"][key].format(**fmt)
    return dict(
        exercise=name,
        ok=False,
        link=None,
        en=en,
        zh=zh,
        input=None,
        expected=None,
        got=None,
        traceback=None,
        seconds=None,
        data=None,
    )


def run_check(directory: str | Path, only: str | None = None, scale: float = 1.0) -> list[dict]:
    """Run the exercises (all in order, or `only` one) on the workspace in `directory`: one record
    per exercise run (runner.result's fields), stopping at the first failure. `scale` multiplies
    every time limit. Raises ValueError for an unknown exercise name or a folder without a
    workspace."""
    directory = Path(directory)
    if only is not None and only not in EXERCISES:
        raise ValueError(LABELS["en"]["unknown"].format(name=only, names=list(EXERCISES)))
    if not all((directory / f).is_file() for f in FILES):
        raise ValueError(LABELS["en"]["missing"].format(path=directory))
    names = [only] if only else list(EXERCISES)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    with tempfile.TemporaryFile() as err_log:
        child = subprocess.Popen(
            [sys.executable, "-m", "paged.exercises.runner", str(directory.resolve()), *names],
            stdout=subprocess.PIPE,
            stderr=err_log,
            stdin=subprocess.DEVNULL,
            cwd=str(ROOT),
            env=env,
            text=True,
            encoding="utf-8",
            start_new_session=True,
        )
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(child.stdout, lines), daemon=True).start()
        try:
            return _collect(child, lines, names, scale)
        finally:
            _stop(child)


def _collect(
    child: subprocess.Popen, lines: queue.Queue, names: list[str], scale: float
) -> list[dict]:
    """Read the child's protocol, enforcing each exercise's time limit from its START line."""
    records, current, deadline = [], None, time.monotonic() + START_LIMIT
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            name = current or names[0]
            key = "timeout" if current else "start_timeout"
            limit = EXERCISES[name][1] * scale if current else START_LIMIT
            records.append(_failed(name, key, s=limit))
            return records
        if line is None:  # the child ended
            if current is not None:
                records.append(_failed(current, "died", code=child.wait()))
            return records
        if line.startswith("START "):
            current = line[6:]
            deadline = time.monotonic() + EXERCISES[current][1] * scale
        elif line.startswith("RESULT "):
            records.append(json.loads(line[7:]))
            current, deadline = None, time.monotonic() + 30.0
            if not records[-1]["ok"]:
                return records


def _stop(child: subprocess.Popen) -> None:
    """Kill the child and its process group (an infinite loop never returns by itself)."""
    if child.poll() is None:
        try:
            os.killpg(child.pid, 9)
        except (ProcessLookupError, PermissionError):
            child.kill()
    child.wait()


def message(record: dict, lang: str = "en") -> str:
    """A failed record as the learner reads it: what went wrong, the input, what was expected and
    what came, the traceback (their frames) when their code raised."""
    lab = LABELS[lang]
    parts = [record[lang]]
    for key in ("input", "expected", "got"):
        if record.get(key) not in (None, "None"):
            parts.append(f"{lab[key]}: {record[key]}")
    if record.get("traceback"):
        parts.append(f"{lab['traceback']}:\n{record['traceback']}")
    return "\n".join(parts)


def json_records(records: list[dict], lang: str = "en", hint: bool = False) -> list[dict]:
    """--json: one object per exercise run: exercise, ok, link, message (and hint with --hint)."""
    out = []
    for r in records:
        item = dict(
            exercise=r["exercise"],
            ok=r["ok"],
            link=r["link"],
            message=None if r["ok"] else message(r, lang),
        )
        if hint:
            item["hint"] = hint_for(r, lang)
        out.append(item)
    return out


def report(
    records: list[dict], lang: str = "en", hint: bool = False, only: str | None = None
) -> str:
    """The human-readable report: one line per exercise, the failure in full, those not run."""
    lab, lines = LABELS[lang], []
    names = [only] if only else list(EXERCISES)
    for n, name in enumerate(names, 1):
        r = next((r for r in records if r["exercise"] == name), None)
        if r is None:
            lines.append(f"{n:2} {name:<14} {lab['not_run']}")
            continue
        if r["ok"]:
            lines.append(f"{n:2} {name:<14} {lab['ok']}")
            continue
        link = f"{lab['link']}: {r['link']}" if r["link"] else lab["no_link"]
        lines.append(f"{n:2} {name:<14} {lab['failed']} ({link})")
        lines += ["   " + ln for ln in message(r, lang).splitlines()]
        if hint:
            lines.append(f"   {lab['hint']}: {hint_for(r, lang)}")
    if passed(records, only):
        lines.append(lab["all_green"].format(n=len(names)))
    return "\n".join(lines)


def passed(records: list[dict], only: str | None = None) -> bool:
    """Every exercise run passed, and every one ran (or the one asked for)."""
    wanted = [only] if only else list(EXERCISES)
    return [r["exercise"] for r in records] == wanted and all(r["ok"] for r in records)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m paged exercises",
        description="Write the article's code yourself; check finds the first broken link.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser(
        "init", help="write a workspace (stubs to fill in, or the reference with --solution)"
    )
    i.add_argument("directory")
    i.add_argument(
        "--solution", action="store_true", help="write the reference solution instead of the stubs"
    )
    c = sub.add_parser("check", help="run the exercises in order, stop at the first that fails")
    c.add_argument("directory")
    c.add_argument("--only", choices=list(EXERCISES), default=None, help="run this exercise alone")
    c.add_argument(
        "--json", action="store_true", help="print a JSON list, one object per exercise run"
    )
    c.add_argument(
        "--hint",
        action="store_true",
        help="add a hint (never the answer) to each exercise reported",
    )
    c.add_argument("--lang", choices=LANGS, default="en")
    c.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply every time limit (a slow machine)"
    )
    args = p.parse_args(argv)
    try:
        if args.cmd == "init":
            for path in init_workspace(args.directory, solution=args.solution):
                print(path)
            return 0
        records = run_check(args.directory, args.only, args.time_scale)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(json_records(records, args.lang, args.hint), ensure_ascii=False, indent=1))
    else:
        print(report(records, args.lang, args.hint, args.only))
    return 0 if passed(records, args.only) else 1
