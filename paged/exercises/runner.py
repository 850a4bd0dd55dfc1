"""The child process of a check: `python -m paged.exercises.runner DIR NAME...` imports the
workspace afresh and runs the named exercises in order, stopping at the first failure. It speaks one
line per event on its original stdout (the learner's prints go to stderr): READY, then per exercise
START <name> and RESULT <json>. The parent (check.py) kills it when an exercise overruns its time
limit.

"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable


def learner_traceback(err: BaseException, directory: Path) -> str:
    """The traceback cut to the frames in the learner's files (the last three frames if none is
    theirs)."""
    frames = traceback.extract_tb(err.__traceback__)
    root = str(directory.resolve())
    theirs = [f for f in frames if f.filename.startswith(root)] or frames[-3:]
    lines = traceback.format_list(theirs) + traceback.format_exception_only(type(err), err)
    return "".join(lines).rstrip()


def result(
    name: str, err: BaseException | None, directory: Path, seconds: float, data: dict | None
) -> dict:
    """One exercise's record: ok, or the Failure's fields, or an exception with its traceback."""
    from .links import Failure, short

    out = dict(
        exercise=name,
        ok=err is None,
        link=None,
        en="",
        zh="",
        input=None,
        expected=None,
        got=None,
        traceback=None,
        method=getattr(err, "method", None),  # the block manager's method that failed, if known
        seconds=round(seconds, 3),
        data=data,
    )
    if isinstance(err, Failure):
        out.update(
            link=err.link,
            en=err.en,
            zh=err.zh,
            input=err.input,
            expected=short(err.expected, 400),
            got=short(err.got, 400),
            data=getattr(err, "data", None),
        )
    elif isinstance(err, NotImplementedError):
        where = traceback.extract_tb(err.__traceback__)[-1]
        out.update(
            en=f"not written yet: {where.name} in {Path(where.filename).name} raises "
            "NotImplementedError",
            zh=f"还没写：{Path(where.filename).name} 里的 {where.name} 抛出 NotImplementedError",
        )
    elif err is not None:
        out.update(
            en=f"your code raised {type(err).__name__}: {err}",
            zh=f"你的代码抛出了 {type(err).__name__}：{err}",
            traceback=learner_traceback(err, directory),
        )
    return out


def run_exercises(
    directory: Path, names: list[str], on_start: Callable[[str], object] = lambda name: None
):
    """Import the workspace afresh and run `names` in order, yielding each one's record (result());
    stops after the first failure. An import error in the learner's files fails the first exercise.
    on_start(name) is called before each (the child's START line)."""
    from .exercises import EXERCISES
    from .workspace import load_workspace

    ws, load_error = None, None
    try:
        ws = load_workspace(directory)
    except Exception as err:  # a SyntaxError or an import-time exception in the learner's files
        load_error = err
    for name in names:
        on_start(name)
        start, err, data = time.perf_counter(), load_error, None
        if err is None:
            try:
                data = EXERCISES[name][0](ws)
            except Exception as caught:
                err = caught
        yield result(name, err, directory, time.perf_counter() - start, data)
        if err is not None:
            return


def main(argv: list[str]) -> int:
    directory, names = Path(argv[0]), argv[1:]
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # print() in the learner's code goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    import torch

    torch.set_num_threads(
        1
    )  # tiny tensors: threads only add overhead (and contend on a shared machine)
    protocol.write("READY\n")
    for record in run_exercises(directory, names, lambda name: protocol.write(f"START {name}\n")):
        protocol.write("RESULT " + json.dumps(record, ensure_ascii=False, default=str) + "\n")
    protocol.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
