"""This tree's engine against an earlier commit's, in alternating processes: tokens/s ratios you can trust.

    python scripts/compare_engine_commits.py                       # against 4873e11, 4,096 blocks, batch 1, 8, 32
    python scripts/compare_engine_commits.py --commit abc123 --num-blocks 32768 --reps 5 --clock cpu

The earlier commit is checked out once as a git worktree (default /tmp/paged-<commit>). Each repetition starts one
process per tree, alternating which goes first, each timing `LLMEngine.generate` on the shipped model (greedy, 64
new tokens, block 16, one thread, record=False) after a warm-up: so machine noise, caches and import state hit both
alike. Printed per batch: this tree / that commit as the median and the spread (min–max) of the per-repetition
ratios of tokens/s, and whether both produced the same tokens. Needs only the API both trees share (load_model,
CacheConfig, SchedulerConfig, SamplingParams, LLMEngine). Exit status 1 if any tokens differ.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def child(tree: str, batch: int, num_blocks: int, max_tokens: int, clock: str) -> None:
    """Run in a fresh process: time the engine of `tree` and print {"seconds", "tokens"} as one JSON line."""
    sys.path.insert(0, tree)
    import random
    import time

    import torch

    from paged.config import CacheConfig, SamplingParams, SchedulerConfig
    from paged.engine import LLMEngine
    from paged.model import load_model

    torch.set_num_threads(1)
    model, tokenizer = load_model()
    rng = random.Random(0)
    prompts = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz ", k=rng.randint(24, 48))) for _ in range(batch)]
    tick = {"wall": time.perf_counter, "cpu": time.process_time}[clock]

    def run(n: int, new: int) -> tuple[float, list[list[int]]]:
        engine = LLMEngine(model, tokenizer, CacheConfig(block_size=16, num_blocks=num_blocks, seed=0),
                           SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=max(32, n)), record=False)
        start = tick()
        outs = engine.generate(prompts[:n], SamplingParams(max_tokens=new, ignore_eos=True))
        return tick() - start, [o.token_ids for o in outs]

    run(1, 4)  # warm-up: kernels built or loaded, caches touched
    seconds, tokens = run(batch, max_tokens)
    print(json.dumps(dict(seconds=seconds, tokens=tokens)))


def worktree(commit: str, path: Path | None) -> Path:
    """The commit checked out (detached) as a worktree of this repository, made once."""
    path = path or Path("/tmp") / f"paged-{commit}"
    if not (path / "paged").is_dir():
        subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(path), commit], check=True,
                       capture_output=True)
    return path


def time_tree(tree: Path, batch: int, num_blocks: int, max_tokens: int, clock: str) -> dict:
    """One child process on `tree`: {"seconds", "tokens"}. Raises RuntimeError with its last lines if it fails."""
    done = subprocess.run([sys.executable, __file__, "--child", str(tree), "--batch", str(batch), "--num-blocks",
                           str(num_blocks), "--max-tokens", str(max_tokens), "--clock", clock],
                          capture_output=True, text=True, cwd=tree)
    if done.returncode:
        raise RuntimeError(f"{tree} failed:\n" + "\n".join((done.stdout + done.stderr).splitlines()[-15:]))
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commit", default="4873e11")
    p.add_argument("--tree", type=Path, default=None, help="where the commit's worktree goes (default /tmp/...)")
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--num-blocks", type=int, default=4096)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, args.batch, args.num_blocks, args.max_tokens, args.clock)
        return 0
    old = worktree(args.commit, args.tree)
    print(f"this tree / {args.commit}: {args.num_blocks} blocks, {args.max_tokens} new tokens, {args.clock} clock, "
          f"{args.reps} repetitions in alternating processes")
    print(f"{'batch':>5} {'this / earlier (min–max)':>26} {'same tokens':>12}")
    ok = True
    for batch in (int(b) for b in args.batches.split(",")):
        ratios, same = [], True
        for rep in range(args.reps):
            trees = (HERE, old) if rep % 2 == 0 else (old, HERE)
            done = {tree: time_tree(tree, batch, args.num_blocks, args.max_tokens, args.clock) for tree in trees}
            ratios.append(done[old]["seconds"] / done[HERE]["seconds"])  # our tok/s over theirs
            same = same and done[old]["tokens"] == done[HERE]["tokens"]
        ratios.sort()
        ok = ok and same
        spread = f"{ratios[len(ratios) // 2]:.2f}x ({ratios[0]:.2f}–{ratios[-1]:.2f})"
        print(f"{batch:>5} {spread:>26} {'✔' if same else '✗':>12}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
