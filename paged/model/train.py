"""Train the tiny model from scratch on synthetic data and write it as an HF-style directory.

    python -m paged.model.train [--steps 1800] [--seed 0] [--out paged/model/weights]
                                [--batch-size 32]

Seeded and reproducible for a given thread count: torch.manual_seed for the weights,
random.Random(seed) for the data. The recall "clicks" (an induction head forms) after several
hundred steps; before that the loss plateaus.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from paged.config import ModelConfig
from paged.model.data import IGNORE, batches, recall_accuracy
from paged.model.io import DEFAULT_DIR, save_model
from paged.model.llama import TinyLlama
from paged.model.tokenizer import ByteTokenizer

EVAL_SEED_OFFSET = 10_000  # eval texts come from seed + offset, never from the training stream


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up to lr, then linear decay to lr / 10 at the last step."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (1.0 - 0.9 * progress)


def _progress(step: int, steps: int, loss: float, started: float) -> None:
    """Redraw the progress bar on stderr: step of steps, mean recent loss, seconds per step."""
    done = int(30 * step / steps)
    per_step = (time.perf_counter() - started) / max(1, step)
    sys.stderr.write(f"\r[{'#' * done}{'.' * (30 - done)}] step {step}/{steps}  "
                     f"loss {loss:.4f}  {per_step:.2f} s/step")
    sys.stderr.flush()


def text_len_cap(step: int, ramp_steps: int, max_len: int, start: int = 40) -> int:
    """Curriculum: the longest recall text grows linearly from `start` to max_len over ramp_steps.

    Short texts first make the copy "click" (an induction head forms) much earlier. In our runs:
    ~650 steps with this ramp; without it, still no click by step 750 (same settings otherwise).
    """
    start = min(start, max_len)
    return int(min(max_len, start + (max_len - start) * step / max(1, ramp_steps)))


def train(config: ModelConfig, steps: int, seed: int = 0, batch_size: int = 32,
          lr: float = 2e-3, warmup: int = 100, max_len: int = 120, ramp_steps: int = 500,
          progress: bool = True) -> tuple[TinyLlama, list[float]]:
    """Train a fresh TinyLlama for `steps` AdamW steps -> (model in eval mode, loss per step).

    Raises: ValueError if steps or batch_size < 1; RuntimeError if the loss turns non-finite.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1, got {steps} and {batch_size}")
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = TinyLlama(config).train()
    # Weight decay on matrices only; norm gains stay free (as in nanoGPT).
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr)
    data = batches(rng, batch_size,
                   max_len_at=lambda step: text_len_cap(step, ramp_steps, max_len))
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, min(warmup, steps))
        input_ids, labels = next(data)
        logits = model(input_ids)  # [B, T, V]
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if not math.isfinite(losses[-1]):
            raise RuntimeError(f"loss became {losses[-1]} at step {step}")
        if progress and (step % 10 == 0 or step == steps - 1):
            _progress(step + 1, steps, sum(losses[-10:]) / len(losses[-10:]), started)
    if progress:
        sys.stderr.write("\n")
    return model.eval(), losses


def main(argv: list[str] | None = None) -> None:
    """`python -m paged.model.train ...`: train, evaluate recall, write the model and its log."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1800)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--ramp-steps", type=int, default=500,
                        help="curriculum length (see text_len_cap)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-prompts", type=int, default=64)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    config = ModelConfig()
    started, cpu_started = time.perf_counter(), time.process_time()
    model, losses = train(config, args.steps, seed=args.seed, batch_size=args.batch_size,
                          lr=args.lr, ramp_steps=args.ramp_steps)
    train_seconds = time.perf_counter() - started
    # all threads; wall time also counts other users' load
    train_cpu_seconds = time.process_time() - cpu_started
    tokenizer = ByteTokenizer()
    eval_seed = args.seed + EVAL_SEED_OFFSET
    accuracy = recall_accuracy(model, tokenizer, args.eval_prompts, seed=eval_seed)
    save_model(model, args.out, tokenizer)
    log = {
        "seed": args.seed, "steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
        "ramp_steps": args.ramp_steps,
        "threads": args.threads, "num_parameters": model.num_parameters(),
        "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 5),
        "loss_every_100_steps": [round(x, 4) for x in losses[::100]],
        "train_seconds": round(train_seconds, 1), "train_cpu_seconds": round(train_cpu_seconds, 1),
        "recall_accuracy": round(accuracy, 5),
        "recall_eval": {"prompts": args.eval_prompts, "seed": eval_seed,
                        "min_len": 40, "max_len": 120},
    }
    (args.out / "training_log.json").write_text(json.dumps(log, indent=2) + "\n")
    print(f"wrote {args.out}: final loss {log['final_loss']}, "
          f"recall accuracy {accuracy:.2%}, {train_seconds:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
