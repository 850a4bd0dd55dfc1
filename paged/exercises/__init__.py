"""Your turn: the learner writes the article's code, and `check` finds the first broken link.

    python -m paged exercises init DIR [--solution]      a workspace the learner owns (workspace.py)
    python -m paged exercises check DIR [--only NAME] [--json] [--hint] [--lang zh]

The workspace holds one file per article file (addressing.py, kv_cache.py, attention.py,
block_manager.py, sequence.py) with the library's public names and signatures and bodies to fill in;
`solution/` is the reference they are cut from. `check` runs the exercises (exercises.py, in the
article's order, with bookkeeping_checks.py; the last one drives the shipped model end to end:
engine_check.py, its requests and contiguous twin in engine_plan.py) in a child
process (runner.py) that the parent kills at each exercise's time limit, and names the first link of
the address chain whose value differs from the reference (links.py).

"""

from .exercises import EXERCISES, LINKS

__all__ = ["EXERCISES", "LINKS"]
