"""`python -m paged generate PROMPT... --beam-width K [--length-penalty X] [--json]`: beam search from the CLI.

The prompts are searched together on one pool (BeamSearch.run_all: a group is preempted as a whole when the pool
runs short). With --json, each prompt's object holds the usual
fields for its best beam plus "beams": [{"token_ids": [...], "score": ...}, ...], best first."""

from __future__ import annotations

import json
import sys

from .beam import BeamParams, BeamResult, BeamSearch
from .config import CacheConfig


def beam_record(result: BeamResult, tokenizer, prompt: str, eos_ids: tuple[int, ...]) -> dict:
    """What --json prints for one prompt searched with beams: its best beam as generate's fields, then every
    finished beam, best first."""
    best = result.beams[0]
    return {"prompt": prompt, "token_ids": list(best.token_ids), "text": tokenizer.decode(best.token_ids),
            "finish_reason": "eos" if best.token_ids[-1] in eos_ids else "length",
            "num_preemptions": result.preemptions,
            "beams": [{"token_ids": list(b.token_ids), "score": b.score} for b in result.beams]}


def beam_main(args, model, tokenizer) -> int:
    """Run the beam search the parsed `args` ask for; raises ValueError for a bad combination."""
    if args.temperature != 0:
        raise ValueError(f"beam search is deterministic: --temperature must be 0 with --beam-width, "
                         f"got {args.temperature}")
    others = [flag for flag, on in (("--speculative", getattr(args, "speculative", None)),
                                    ("--preemption swap", getattr(args, "preemption", "recompute") == "swap"))
              if on]  # --sliding-window (or a checkpoint's own window) is honoured: BeamSearch reads the window
    if others:
        raise ValueError(f"--beam-width does not combine with {', '.join(others)}: beam search runs its own "
                         "driver (paged/beam.py), which preempts a beam group by recompute only")
    params = BeamParams(beam_width=args.beam_width, length_penalty=args.length_penalty, max_tokens=args.max_tokens)
    search = BeamSearch(model, tokenizer, CacheConfig(block_size=args.block_size, num_blocks=args.num_blocks),
                        kv_layout=args.kv_layout, attn_impl=args.impl)
    results = search.run_all(args.prompts, params)
    if args.json:
        print(json.dumps([beam_record(r, tokenizer, p, search.eos_ids) for r, p in zip(results, args.prompts)],
                         ensure_ascii=False))
    else:
        for result in results:
            for beam in result.beams:
                print(f"{beam.score:9.4f}  {tokenizer.decode(beam.token_ids)}")
    if args.trace:
        traces = [t.to_dict() for r in results for t in r.traces]
        with open(args.trace, "w", encoding="utf-8") as f:
            json.dump(traces, f, ensure_ascii=False, indent=1)
        print(f"wrote {len(traces)} step traces to {args.trace}", file=sys.stderr)
    return 0
