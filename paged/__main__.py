"""`python -m paged …`: generate text through the paged engine, or run a benchmark.

    python -m paged generate "prompt" [--block-size 16 --num-blocks N --max-tokens 64
                                       --trace trace.json]
    python -m paged generate "prompt" --model path/to/local/hf-checkpoint
                                      # Llama, Mistral, Qwen2 or Qwen3
    python -m paged bench kernels|memory|engine|external|swap [...]
                                      # = python -m benchmarks ... (benchmarks/)
    python -m paged exercises init DIR | check DIR [--only NAME --json --hint]
                                      # (docs/exercises.md)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine.beam_group import BeamResult


def _int_arg(text: str) -> int:
    """argparse type for an integer flag: ASCII digits only (int() would read "٣" as 3).

    Raises: argparse.ArgumentTypeError if the text is not an integer (argparse names the flag).
    """
    from .checks import int_text

    try:
        return int_text(text, "the value")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def generate_main(argv: list[str]) -> int:
    """`python -m paged generate ...`: stream (or --json) the engine's text; returns the status.

    Bad input is printed as `error: ...` with status 2, never a traceback.
    """
    p = argparse.ArgumentParser(prog="python -m paged generate",
                                description="Generate with the mini vLLM engine on the shipped "
                                            "tiny Llama, or on a local Hugging Face Llama / "
                                            "Mistral / Qwen2 / Qwen3 checkpoint (--model).")
    p.add_argument("prompts", nargs="+", help="one or more prompts (the first one is streamed)")
    p.add_argument("--block-size", type=_int_arg, default=16)
    p.add_argument("--num-blocks", type=_int_arg, default=None,
                   help="default: derived from a 64 MiB KV budget")
    p.add_argument("--max-tokens", type=_int_arg, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=_int_arg, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=_int_arg, default=None)
    p.add_argument("--model", default=None,
                   help="local Hugging Face directory of a LlamaForCausalLM, MistralForCausalLM, "
                        "Qwen2ForCausalLM or Qwen3ForCausalLM "
                        "(config.json, *.safetensors, tokenizer.json); default: the shipped model")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                   help="compute dtype (default float32, whatever the checkpoint stores: "
                        "reduced-precision matmuls are slow on most CPUs)")
    p.add_argument("--kv-layout", choices=["paged", "contiguous"], default="paged")
    p.add_argument("--preemption", choices=["recompute", "swap"], default="recompute",
                   help="when the pool is full: free a victim's blocks and recompute it, "
                        "or swap them to a host pool")
    p.add_argument("--swap-space", type=_int_arg, default=None,
                   help="swap pool blocks (default: --num-blocks, else 256)")
    p.add_argument("--sliding-window", type=_int_arg, default=None, metavar="W",
                   help="attend to the last W tokens only and free the blocks behind the window "
                        "(paged/chapters/window.py); default: the checkpoint's own "
                        "(Mistral / Qwen2), else full attention")
    # registers the faster impls, so every registered one is a choice
    from . import kernels  # noqa: F401
    from .attention import DECODE_IMPLS

    p.add_argument("--impl", choices=list(DECODE_IMPLS), default=None,
                   help="paged decode attention impl (default: the fastest for the device); "
                        "every one gives the same text")
    p.add_argument("--speculative", default=None, metavar="ngram:K",
                   help="speculative decoding: prompt lookup guesses K tokens a step, checked in "
                        "one pass (greedy requests; the same text); --json adds num_proposed / "
                        "num_accepted per prompt")
    p.add_argument("--beam-width", type=_int_arg, default=None,
                   help="beam search with K beams (greedy, shared blocks)")
    p.add_argument("--length-penalty", type=float, default=1.0,
                   help="beam search: score = logprob / len ** this")
    p.add_argument("--trace", default=None, help="write every StepTrace as JSON to this file")
    p.add_argument("--quiet", action="store_true", help="no per-step summary lines")
    p.add_argument("--json", action="store_true",
                   help="print one JSON list on stdout, an object per prompt (prompt, token_ids, "
                        "text, finish_reason, num_preemptions, max_blocks_held), instead of "
                        "streaming text; implies --quiet")
    args = p.parse_args(argv)
    args.quiet = args.quiet or args.json

    import torch

    from .config import CacheConfig, SamplingParams, SchedulerConfig
    from .engine import LLMEngine
    from .engine.windowing import held_blocks, with_window
    from .model import load_model

    try:
        model, tokenizer = load_model(args.model, dtype=getattr(torch, args.dtype))
        model = model if args.sliding_window is None else with_window(model, args.sliding_window)
        if args.beam_width is not None:  # beam_main below: --json adds each prompt's "beams"
            return beam_main(args, model, tokenizer)
        params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature,
                                top_k=args.top_k, top_p=args.top_p, seed=args.seed)
        swap = SchedulerConfig(preemption_mode=args.preemption,
                               swap_space=0 if args.preemption == "recompute" else
                               args.num_blocks or 256 if args.swap_space is None else
                               args.swap_space,
                               speculative=args.speculative)
        engine = LLMEngine(model, tokenizer,
                           CacheConfig(block_size=args.block_size, num_blocks=args.num_blocks),
                           swap, kv_layout=args.kv_layout, attn_impl=args.impl)
        ids = [engine.add_request(prompt, params) for prompt in args.prompts]
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"kv_layout {args.kv_layout}, decode impl {engine.runner.attn_impl}, "
              f"{engine.num_blocks} blocks of {args.block_size}", file=sys.stderr)
    traces, held = [], {}  # held: seq id -> the most blocks it held at the end of a step
    streamed = 0
    decoder = tokenizer.incremental_decoder()
    while engine.has_unfinished():
        try:
            trace = engine.step()
        # e.g. impl="native" with no C compiler, "triton" without triton
        except RuntimeError as err:
            print(f"\nerror: {err}", file=sys.stderr)
            return 2
        traces.append(trace.to_dict())
        held.update({sid: max(n, held.get(sid, 0)) for sid, n in held_blocks(trace).items()})
        if not args.quiet:
            print(trace.summary(), file=sys.stderr)
        if args.json:
            continue
        out = engine.output(ids[0])
        for tok in out.token_ids[streamed:]:
            if tok != tokenizer.eos_token_id:
                sys.stdout.write(decoder.push(tok))
        streamed = len(out.token_ids)
        sys.stdout.flush()
    if args.json:
        print(json.dumps([{**json_record(engine, rid, prompt),
                            "max_blocks_held": held.get(rid, 0)}
                          for rid, prompt in zip(ids, args.prompts)], ensure_ascii=False))
    else:
        sys.stdout.write(decoder.flush() + "\n")
        for rid in ids[1:]:
            print(engine.output(rid).text)
    if args.trace:
        with open(args.trace, "w", encoding="utf-8") as f:
            json.dump(traces, f, ensure_ascii=False, indent=1)
        print(f"wrote {len(traces)} step traces to {args.trace}", file=sys.stderr)
    return 0


# --- --beam-width: beam search (paged/engine/beam.py) from the CLI --------------------------------
def beam_record(result: BeamResult, tokenizer, prompt: str, eos_ids: tuple[int, ...]) -> dict:
    """What --json prints for one prompt searched with beams.

    Its best beam as generate's fields, then every finished beam, best first.
    """
    best = result.beams[0]
    return {"prompt": prompt, "token_ids": list(best.token_ids),
            "text": tokenizer.decode(best.token_ids),
            "finish_reason": "eos" if best.token_ids[-1] in eos_ids else "length",
            "num_preemptions": result.preemptions,
            "beams": [{"token_ids": list(b.token_ids), "score": b.score} for b in result.beams]}


def beam_main(args, model, tokenizer) -> int:
    """Run the beam search the parsed `args` ask for; returns the exit status.

    Raises: ValueError if --temperature is not 0 or a flag does not combine with beams.
    """
    from .config import CacheConfig
    from .engine.beam import BeamSearch
    from .engine.beam_group import BeamParams

    if args.temperature != 0:
        raise ValueError(f"beam search is deterministic: --temperature must be 0 with "
                         f"--beam-width, got {args.temperature}")
    # --sliding-window (or a checkpoint's own window) is honoured: BeamSearch reads the window
    others = [flag for flag, on in (("--speculative", getattr(args, "speculative", None)),
                                    ("--preemption swap",
                                     getattr(args, "preemption", "recompute") == "swap"))
              if on]
    if others:
        raise ValueError(f"--beam-width does not combine with {', '.join(others)}: beam search "
                         "runs its own driver (paged/engine/beam.py), which preempts a beam group "
                         "by recompute only")
    params = BeamParams(beam_width=args.beam_width, length_penalty=args.length_penalty,
                        max_tokens=args.max_tokens)
    search = BeamSearch(model, tokenizer,
                        CacheConfig(block_size=args.block_size, num_blocks=args.num_blocks),
                        kv_layout=args.kv_layout, attn_impl=args.impl)
    results = search.run_all(args.prompts, params)
    if args.json:
        print(json.dumps([beam_record(r, tokenizer, p, search.eos_ids)
                          for r, p in zip(results, args.prompts)], ensure_ascii=False))
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


def json_record(engine, request_id: int, prompt: str) -> dict:
    """What --json prints for one prompt: its finished output as plain JSON values."""
    out = engine.output(request_id)
    from .engine.swapping import preemption_counts

    num_swaps, num_recomputes = preemption_counts(engine, request_id)
    return {"prompt": prompt, "token_ids": list(out.token_ids), "text": out.text,
            "finish_reason": out.finish_reason, "num_preemptions": out.num_preemptions,
            "num_swaps": num_swaps, "num_recomputes": num_recomputes,
            **({} if getattr(engine, "speculative", None) is None
               else _speculation_counts(engine, request_id))}


def _speculation_counts(engine, request_id: int) -> dict:
    """--speculative: the guesses made for this prompt and how many of them were kept."""
    stats = engine.speculative.request_stats(request_id)
    return {"num_proposed": stats["num_proposed"], "num_accepted": stats["num_accepted"]}


def forward_bench(argv: list[str]) -> int:
    """`python -m paged bench ...`: `python -m benchmarks ...` in a child; returns its status."""
    import importlib.util
    import subprocess

    if importlib.util.find_spec("benchmarks") is None:
        print("error: the benchmarks folder is not importable here: run `python -m benchmarks ...` "
              "from the repository root", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, "-m", "benchmarks", *argv])


def main(argv: list[str] | None = None) -> int:
    """`python -m paged COMMAND ...`: run generate / exercises / bench; returns the status."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] == "generate":
        return generate_main(argv[1:])
    if argv[0] == "exercises":
        from .exercises.check import main as exercises_main
        return exercises_main(argv[1:])
    # the benchmarks live outside the library (benchmarks/): forwarded, never imported
    if argv[0] == "bench":
        return forward_bench(argv[1:])
    print(f"unknown command {argv[0]!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
