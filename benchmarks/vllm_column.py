"""`python -m benchmarks engine`'s vLLM column: the same greedy requests on the real vLLM, when it is installed.

vLLM (requirements-vllm.txt) runs the same prompts on the same weights with the same number of threads, in a child
process kept open for the whole bench (benchmarks.vllm_llm.VLLMProcess: vLLM's engine must start under a main
guard), its own KV cache at block size 32 (its CPU attention takes multiples of 32 only), prefix caching off.
bench_engine hands it each repetition in turn with its own layouts (interleaved: machine noise hits all alike) and
checks its tokens against the paged engine's; this module opens that child and prints the table.
"""

from __future__ import annotations

from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "paged" / "model" / "weights"


def open_vllm(model_dir: str | Path | None, max_num_seqs: int, threads: int, clock: str = "wall"):
    """(vLLM's child process, None) on `model_dir` (None: the shipped weights), or (None, why there is none) when
    vLLM is not installed. Raises RuntimeError (vLLM's last lines) when it is installed but fails to start."""
    from paged.chapters.vllm_twin import INSTALL_HINT, vllm_available
    from .vllm_llm import VLLMProcess

    if not vllm_available():
        return None, f"vLLM is not installed ({INSTALL_HINT})"
    return VLLMProcess(model_dir or SHIPPED, max_num_seqs=max_num_seqs, threads=threads, clock=clock), None


def spread(row: dict, key: str) -> str:
    """A ratio column as "median (min–max)" over the repetitions."""
    return f"{row[key]:.2f}x ({row[key + '_min']:.2f}–{row[key + '_max']:.2f})"


def format_vllm(rows: list[dict], version: str) -> str:
    """bench_engine's rows (with their vllm_* fields) as vLLM's table: tok/s, paged/vLLM as the median and the
    spread of the per-repetition ratios, and the sequences whose tokens equal the engine's."""
    head = f"{'batch':>5} {'vLLM tok/s':>11} {'paged/vLLM (min–max)':>22} {'same as vLLM':>13}"
    lines = [f"vLLM {version} (its own engine, block_size 32, prefix caching off, same threads, interleaved):",
             head, "-" * len(head)]
    for r in rows:
        same = f"{'✔' if r['vllm_same'] == r['batch'] else '✗'} {r['vllm_same']}/{r['batch']}"
        lines.append(f"{r['batch']:>5} {r['vllm_tok_s']:>11.0f} {spread(r, 'vs_vllm'):>22} {same:>13}")
    return "\n".join(lines)
