"""The real vLLM's `LLM` on one of our HF-style model directories, greedy, in a process of its own.

vLLM's CPU backend needs a block size that is a multiple of 32, creates its engine only under
`if __name__ == "__main__":` (spawn), and takes our byte tokenizer as `skip_tokenizer_init=True` plus token-id
prompts. `VLLMProcess` starts `python -m benchmarks.vllm_llm` once (in-process inside that child:
VLLM_ENABLE_V1_MULTIPROCESSING=0), then hands it one batch at a time over stdin and reads the tokens and the time
back from stdout: the bench interleaves vLLM's repetitions with its own. Prefix caching is off (the repetitions
repeat the same prompts: a cache would serve them from the previous repetition). Needs vLLM
(requirements-vllm.txt); raises RuntimeError, with vLLM's own last lines, when the child fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MARK = "PAGED-VLLM-RESULT "  # the lines of the child's stdout that hold results (vLLM logs around them)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


class VLLMProcess:
    """vLLM's engine in a child process kept open between batches (one start, one warm-up). Use as a context
    manager, or call close(). Raises ValueError for a block size not a multiple of 32 or an unknown clock,
    RuntimeError (with the child's last lines) when vLLM fails to start or to run."""

    def __init__(self, model_dir: str | Path, block_size: int = 32, num_blocks: int | None = None,
                 max_num_seqs: int = 32, threads: int = 1, clock: str = "wall") -> None:
        if block_size % 32:
            raise ValueError(f"vLLM's CPU attention needs a block_size that is a multiple of 32, got {block_size}")
        if clock not in CLOCKS:
            raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
        header = dict(model=str(model_dir), block_size=block_size, num_blocks=num_blocks,
                      max_num_seqs=max_num_seqs, clock=clock)
        env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", OMP_NUM_THREADS=str(threads),
                   VLLM_CPU_OMP_THREADS_BIND="nobind", VLLM_LOGGING_LEVEL="WARNING", TOKENIZERS_PARALLELISM="false")
        self.log = tempfile.TemporaryFile(mode="w+")  # vLLM's stderr: a file, so a chatty child never blocks
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks.vllm_llm"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
                                     cwd=Path(__file__).resolve().parents[1])
        self.seen: list[str] = []
        self.version = self._ask(header)["version"]
        self.preemptions: int | None = None

    def _ask(self, job: dict) -> dict:
        """Send one JSON line, return the child's next result line. Raises RuntimeError if it died."""
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: its output below says why
        for line in self.proc.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
            self.seen = (self.seen + [line.rstrip()])[-25:]
        self.proc.wait()
        self.log.seek(0)
        tail = "\n".join((self.seen + self.log.read().splitlines())[-25:])
        raise RuntimeError(f"vLLM's run failed (exit {self.proc.returncode}):\n{tail}")

    def generate(self, prompts: list[list[int]], max_tokens: int) -> tuple[float, list[list[int]]]:
        """Greedy, EOS ignored: seconds of the child's clock around `LLM.generate`, and each prompt's new tokens."""
        done = self._ask(dict(prompts=[list(map(int, p)) for p in prompts], max_tokens=int(max_tokens)))
        return done["seconds"], done["tokens"]

    def close(self) -> None:
        """Stop the child (it reports how often vLLM preempted: `preemptions`, None if unknown)."""
        if self.proc.poll() is None:
            try:
                self.preemptions = self._ask(dict(quit=True)).get("preemptions")
            except RuntimeError:
                pass
            self.proc.wait(timeout=60)
        self.log.close()

    def __enter__(self) -> VLLMProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def vllm_greedy(model_dir: str | Path, prompts: list[list[int]], max_tokens: int, block_size: int = 32,
                num_blocks: int | None = None, max_num_seqs: int = 32, threads: int = 1) -> dict:
    """Greedy token ids from vLLM for each prompt (a list of token ids), ignoring EOS: {"tokens": [[...], ...],
    "seconds": generate's wall time, "version": vLLM's, "preemptions": how often its scheduler preempted}.
    num_blocks: its KV pool less the null block (None: vLLM sizes it); a small pool makes vLLM preempt as ours does.
    Raises ValueError for a block size not a multiple of 32."""
    done = vllm_runs(model_dir, [prompts], max_tokens, 1, block_size, num_blocks, max_num_seqs, threads)
    return dict(done, tokens=done["runs"][0]["tokens"], seconds=done["runs"][0]["seconds"][0])


def vllm_runs(model_dir: str | Path, batches: list[list[list[int]]], max_tokens: int, reps: int = 1,
              block_size: int = 32, num_blocks: int | None = None, max_num_seqs: int = 32,
              threads: int = 1) -> dict:
    """vllm_greedy for several batches on one vLLM start, each generated `reps` times (after one warm-up):
    {"runs": [{"tokens": [[...]], "seconds": [per rep]}, ...], "version", "preemptions"}."""
    runs = []
    with VLLMProcess(model_dir, block_size, num_blocks, max_num_seqs, threads) as llm:
        for batch in batches:
            seconds, tokens = [], []
            for _ in range(reps):
                secs, tokens = llm.generate(batch, max_tokens)
                seconds.append(secs)
            runs.append(dict(tokens=tokens, seconds=seconds))
    return dict(runs=runs, version=llm.version, preemptions=llm.preemptions)


def _main() -> None:
    """The child: a header line (the engine's settings), then one line per batch until {"quit": true} or EOF."""
    header = json.loads(sys.stdin.readline())
    import torch
    import vllm
    from vllm import LLM, SamplingParams, TokensPrompt

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    clock = CLOCKS[header["clock"]]
    extra = {} if header["num_blocks"] is None else dict(num_gpu_blocks_override=header["num_blocks"] + 1)  # + null
    llm = LLM(model=header["model"], dtype="float32", enforce_eager=True, block_size=header["block_size"],
              skip_tokenizer_init=True, max_num_seqs=header["max_num_seqs"], seed=0, enable_prefix_caching=False,
              gpu_memory_utilization=0.05, kv_cache_memory_bytes=64 << 20, **extra)  # CPU: host memory it may take
    preempted = _count_preemptions(llm)
    warm = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True, detokenize=False)
    llm.generate([TokensPrompt(prompt_token_ids=[1, 2, 3])], warm, use_tqdm=False)
    if preempted:
        preempted[0] = 0
    print(MARK + json.dumps(dict(version=vllm.__version__)), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        if job.get("quit"):
            break
        params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True, detokenize=False)
        prompts = [TokensPrompt(prompt_token_ids=p) for p in job["prompts"]]
        start = clock()
        outs = llm.generate(prompts, params, use_tqdm=False)
        seconds = clock() - start
        print(MARK + json.dumps(dict(tokens=[list(o.outputs[0].token_ids) for o in outs], seconds=seconds)),
              flush=True)
    print(MARK + json.dumps(dict(preemptions=preempted[0] if preempted else None)), flush=True)


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
