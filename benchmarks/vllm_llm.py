"""The real vLLM's `LLM` on one of our HF-style model directories, greedy, in a process of its own.

vLLM's CPU backend needs a block size that is a multiple of 32, creates its engine only under
`if __name__ == "__main__":` (spawn), and takes our byte tokenizer as `skip_tokenizer_init=True` plus token-id
prompts. `vllm_greedy` runs `python -m paged.bench.vllm_llm` with the job as JSON on stdin, in-process inside that
child (VLLM_ENABLE_V1_MULTIPROCESSING=0), and reads the tokens (and the timing) back from stdout. Needs vLLM
(requirements-vllm.txt); raises RuntimeError, with vLLM's own last lines, when the child fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

MARK = "PAGED-VLLM-RESULT "  # the line of the child's stdout that holds the result (vLLM logs around it)


def vllm_greedy(model_dir: str | Path, prompts: list[list[int]], max_tokens: int, block_size: int = 32,
                num_blocks: int | None = None, max_num_seqs: int = 32, threads: int = 1,
                timeout_s: float = 600) -> dict:
    """Greedy token ids from vLLM for each prompt (a list of token ids), ignoring EOS: {"tokens": [[...], ...],
    "seconds": generate's wall time, "version": vLLM's, "preemptions": how often its scheduler preempted}.
    num_blocks: its KV pool less the null block (None: vLLM sizes it); a small pool makes vLLM preempt as ours does.
    Raises ValueError for a block size not a multiple of 32."""
    done = vllm_runs(model_dir, [prompts], max_tokens, 1, block_size, num_blocks, max_num_seqs, threads, timeout_s)
    return dict(done, tokens=done["runs"][0]["tokens"], seconds=done["runs"][0]["seconds"][0])


def vllm_runs(model_dir: str | Path, batches: list[list[list[int]]], max_tokens: int, reps: int = 1,
              block_size: int = 32, num_blocks: int | None = None, max_num_seqs: int = 32, threads: int = 1,
              timeout_s: float = 900) -> dict:
    """vllm_greedy for several batches on one vLLM start, each generated `reps` times (after one warm-up):
    {"runs": [{"tokens": [[...]], "seconds": [per rep]}, ...], "version", "preemptions"}."""
    if block_size % 32:
        raise ValueError(f"vLLM's CPU attention needs a block_size that is a multiple of 32, got {block_size}")
    job = dict(model=str(model_dir), batches=[[list(map(int, p)) for p in b] for b in batches],
               max_tokens=int(max_tokens), reps=int(reps), block_size=block_size, num_blocks=num_blocks,
               max_num_seqs=max_num_seqs)
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", OMP_NUM_THREADS=str(threads),
               VLLM_CPU_OMP_THREADS_BIND="nobind", VLLM_LOGGING_LEVEL="WARNING", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run([sys.executable, "-m", "benchmarks.vllm_llm"], input=json.dumps(job), env=env,
                          capture_output=True, text=True, timeout=timeout_s,
                          cwd=Path(__file__).resolve().parents[1])
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
    raise RuntimeError(f"vLLM's run failed (exit {done.returncode}):\n{tail}")


def _main() -> None:
    job = json.loads(sys.stdin.read())
    import torch
    import vllm
    from vllm import LLM, SamplingParams, TokensPrompt

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    extra = {} if job["num_blocks"] is None else dict(num_gpu_blocks_override=job["num_blocks"] + 1)  # + null block
    llm = LLM(model=job["model"], dtype="float32", enforce_eager=True, block_size=job["block_size"],
              skip_tokenizer_init=True, max_num_seqs=job["max_num_seqs"], seed=0,
              gpu_memory_utilization=0.05, kv_cache_memory_bytes=64 << 20, **extra)  # CPU: host memory it may take
    params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True, detokenize=False)
    preempted = _count_preemptions(llm)
    llm.generate([TokensPrompt(prompt_token_ids=job["batches"][0][0])], params, use_tqdm=False)  # warm-up
    runs = []
    for batch in job["batches"]:
        prompts = [TokensPrompt(prompt_token_ids=p) for p in batch]
        seconds = []
        for _ in range(job["reps"]):
            start = time.perf_counter()
            outs = llm.generate(prompts, params, use_tqdm=False)
            seconds.append(time.perf_counter() - start)
        runs.append(dict(tokens=[list(o.outputs[0].token_ids) for o in outs], seconds=seconds))
    print(MARK + json.dumps(dict(runs=runs, version=vllm.__version__, preemptions=preempted[0] if preempted else None)),
          flush=True)


def _count_preemptions(llm) -> list[int] | None:
    """Count the preemptions of vLLM's in-process scheduler (a one-item list the wrapper increments); None when its
    internals are not where vLLM 0.32 keeps them."""
    try:
        scheduler = llm.llm_engine.engine_core.engine_core.scheduler
        preempt = scheduler._preempt_request
    except AttributeError:
        return None
    count = [0]

    def counting(*args, **kwargs):
        count[0] += 1
        return preempt(*args, **kwargs)

    scheduler._preempt_request = counting
    return count


if __name__ == "__main__":
    _main()
