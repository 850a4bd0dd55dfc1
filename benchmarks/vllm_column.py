"""`python -m paged.bench engine`'s vLLM column: the same greedy requests on the real vLLM, when it is installed.

vLLM (requirements-vllm.txt) runs the same prompts on the same weights with the same number of threads, in a child
process (paged.bench.vllm_llm: vLLM's engine must start under a main guard), its own KV cache at block size 32 (its
CPU attention takes multiples of 32 only). Its tokens are checked against the paged engine's; tok/s counts the
tokens requested over generate's median wall time (one vLLM start for all batch sizes, a warm-up first).
"""

from __future__ import annotations

from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "paged" / "model" / "weights"


def vllm_column(rows: list[dict], token_ids: dict[int, list[list[int]]], model_dir: str | Path | None,
                max_tokens: int, reps: int, threads: int) -> list[dict]:
    """Per row of bench_engine (batch, paged_tok_s, tokens): vllm_tok_s, paged/vLLM and how many sequences equal
    vLLM's. token_ids: batch -> its prompts as token ids; model_dir: the HF directory (None: the shipped one)."""
    from .vllm_llm import vllm_runs

    batches = [r["batch"] for r in rows]
    done = vllm_runs(model_dir or SHIPPED, [token_ids[b] for b in batches], max_tokens, reps, threads=threads,
                     max_num_seqs=max(batches))
    out = []
    for row, run in zip(rows, done["runs"]):
        secs = sorted(run["seconds"])[len(run["seconds"]) // 2]
        tok_s = row["batch"] * max_tokens / secs
        same = sum(a == b for a, b in zip(row["tokens"], run["tokens"]))
        out.append(dict(batch=row["batch"], vllm_tok_s=tok_s, vs_vllm=row["paged_tok_s"] / tok_s, vllm_same=same,
                        vllm_version=done["version"]))
    return out


def format_vllm(rows: list[dict]) -> str:
    head = f"{'batch':>5} {'vLLM tok/s':>11} {'paged/vLLM':>11} {'same as vLLM':>13}"
    lines = [f"vLLM {rows[0]['vllm_version']} (its own engine, block_size 32, same threads):", head, "-" * len(head)]
    for r in rows:
        same = f"{'✔' if r['vllm_same'] == r['batch'] else '✗'} {r['vllm_same']}/{r['batch']}"
        lines.append(f"{r['batch']:>5} {r['vllm_tok_s']:>11.0f} {r['vs_vllm']:>10.2f}x {same:>13}")
    return "\n".join(lines)


def print_vllm_column(rows: list[dict], tokenizer, vocab_size: int, model_dir, max_tokens: int, reps: int,
                      threads: int, prompts_of) -> bool:
    """The bench's hook: print the vLLM table when vLLM is installed (one line saying how to get it otherwise).
    Returns whether every sequence equalled vLLM's (True when vLLM is absent)."""
    from paged.engine.admission import prompt_token_ids
    from paged.chapters.vllm_twin import INSTALL_HINT, vllm_available

    if not rows:
        return True
    if not vllm_available():
        print(f"vLLM column: vLLM is not installed ({INSTALL_HINT})")
        return True
    ids = {r["batch"]: [prompt_token_ids(p, tokenizer, vocab_size) for p in prompts_of(r["batch"])] for r in rows}
    try:
        cols = vllm_column(rows, ids, model_dir, max_tokens, reps, threads)
    except RuntimeError as err:
        print(f"vLLM column: {err}")
        return False
    print(format_vllm(cols))
    return all(c["vllm_same"] == c["batch"] for c in cols)
