"""LLMEngine: the whole mini vLLM chain, one step at a time.

    Scheduler (who runs) → BlockManager (where KV goes)
    → ModelRunner (slot_mapping, block_tables, context_lens)
    → PagedAttention (write at the slot, read through the table)
    → Sampler → Sequence update → free finished blocks

With kv_layout="contiguous" the same scheduler and block accounting run, but K/V live in one
ContiguousKVCache per sequence: the reference twin. Both layouts make identical scheduling decisions
(preemptions included) unless prefix caching, which only the paged layout has, lets a prompt in
earlier; twins.py compares them token by token.

A request is checked when it is added (admission.py), what a step's logits become (tokens, each
sequence's update, stops, RequestOutput) is output_processor.py, and a step that raises is rolled
back (checkpoint.py).
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from ..attention import DECODE_IMPLS
from ..kernels import default_attn_impl
from ..checks import as_bool
from ..config import CacheConfig, SamplingParams, SchedulerConfig
from ..faults import Fault, as_fault
from ..sequence import Sequence, SequenceStatus
from .admission import check_fits, check_params, pool_num_blocks, prompt_token_ids
from .checkpoint import EngineStepError, SequenceFailure, StepCheckpoint, journal_ref_counts
from .output_processor import (RequestOutput, check_stop, request_output, sample_checked,
                               update_sequences)
from .recording import StepRecorder, block_tables, record_queues
from .windowing import block_manager_for, runner_for
from .sampler import make_generator, sample_one
from .scheduler import Scheduler, SchedulerOutput
from .swapping import attach_swapper
from .speculation import SpeculativeDecoder
from .trace import StepTrace


class LLMEngine:
    def __init__(self, model: torch.nn.Module, tokenizer, cache_config: CacheConfig | None = None,
                 scheduler_config: SchedulerConfig | None = None, kv_layout: str = "paged",
                 attn_impl: str | None = None, fault: Fault | str | None = None,
                 record: bool = True) -> None:
        """An engine over `model` (paged.model's Llama) and its tokenizer.

        kv_layout: "paged" (the block pool) or "contiguous" (the reference twin).
        attn_impl: a name in DECODE_IMPLS (default: default_attn_impl of the model's device).
        fault: one classic bug to act out (paged.faults; paged layout, whole-prompt prefill only).
        record: True (pages, --trace, the twins) keeps all a page replays in each StepTrace:
        per-sequence states, slot_mapping, tables, queues, last_logits. False (benchmarks): the
        scheduler's decisions and the free-block count only; the same tokens, less work a step.
        Raises: ValueError for a bad kv_layout, attn_impl, record, fault or pool size."""
        self.model, self.tokenizer = model.eval(), tokenizer
        self.record = as_bool(record, "record")  # "False" or 0 would otherwise record
        self.fault = as_fault(fault)  # off unless explicitly given; lives in this engine only
        self.cache_config = cache_config or CacheConfig()
        self.scheduler_config = scheduler_config or SchedulerConfig()
        cfg, cc = model.config, self.cache_config
        param = next(model.parameters())
        # checked before any allocation
        num_blocks = pool_num_blocks(cfg, cc, param.dtype, param.device)
        self.window = cfg.sliding_window  # None: full attention (no window parts are built)
        self.block_manager = block_manager_for(cfg, num_blocks, cc.block_size, cc.watermark,
                                               cc.seed,
                                               enable_prefix_caching=cc.enable_prefix_caching
                                               and kv_layout == "paged")
        journal_ref_counts(self.block_manager)  # a step's checkpoint journals them (checkpoint.py)
        self.scheduler = Scheduler(self.scheduler_config, self.block_manager)
        # window.py
        impl = attn_impl or ("gather" if cfg.sliding_window else default_attn_impl(param.device))
        if impl not in DECODE_IMPLS:
            raise ValueError(f"unknown attn_impl {impl!r}; choose one of {sorted(DECODE_IMPLS)}")
        if self.fault is not None and self.scheduler_config.enable_chunked_prefill:
            raise ValueError("faults are injected with whole-prompt prefill only; set "
                             "enable_chunked_prefill=False")
        self.runner = runner_for(model, num_blocks, cc.block_size, kv_layout, impl, self.fault)
        # swap mode's host pool (swapping.py), or None
        self.swapper = attach_swapper(self.scheduler, self.runner)
        # None unless scheduler_config.speculative
        self.speculative = SpeculativeDecoder.for_engine(self)
        self.kv_layout = kv_layout
        self.requests: dict[int, Sequence] = {}
        # request id -> its sequences (n > 1: parent + forked children)
        self.groups: dict[int, list[Sequence]] = {}
        self.sequences: dict[int, Sequence] = {}  # every seq id, children included
        self.step_count = 0
        # seq_id -> logits [vocab] of its latest step (parity checks), for unfinished sequences and
        # those the latest step scheduled; a finished one's entry goes at the next step
        # (record=False: always empty)
        self.last_logits: dict[int, torch.Tensor] = {}
        # (phase, seq ids) of the step running now
        self._in_flight: tuple[str, list[int]] | None = None
        self._next_id = 0

    @property
    def num_blocks(self) -> int:
        return self.block_manager.num_blocks

    # --- requests ---------------------------------------------------------------------------------
    def add_request(self, prompt: str | list[int], params: SamplingParams | None = None) -> int:
        """Queue a prompt (text, or a list of token ids); returns its request id.

        Nothing is queued on error; admission.py has the checks.
        Raises: ValueError for a bad prompt or params, or a request that could never run.
        """
        params = check_params(params)
        token_ids = prompt_token_ids(prompt, self.tokenizer, self.model.config.vocab_size)
        check_fits(len(token_ids), params, self.model.config, self.block_manager,
                   self.scheduler_config)
        seq = Sequence(self._next_id, token_ids, params=params, generator=make_generator(params),
                       n=params.n)
        self._next_id += 1
        self.requests[seq.seq_id] = seq
        self.groups[seq.seq_id] = [seq]
        self.sequences[seq.seq_id] = seq
        self.scheduler.add(seq)
        return seq.seq_id

    def _get(self, request_id: int) -> Sequence:
        if (isinstance(request_id, bool) or not isinstance(request_id, int)
                or request_id not in self.requests):
            raise ValueError(f"unknown request id {request_id!r}")
        return self.requests[request_id]

    def abort(self, request_id: int, sample: int | None = None) -> bool:
        """Stop a request (all its samples, or sample `sample`) and free its blocks.

        Shared blocks stay with the siblings that hold them. Returns False if none was running.
        Raises: ValueError for an unknown request id or sample index."""
        self._get(request_id)
        group = self.groups[request_id]
        if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int)
                                   or not 0 <= sample < len(group)):
            raise ValueError(f"request {request_id} has samples 0..{len(group) - 1}, "
                             f"not {sample!r}")
        return self._stop(group if sample is None else [group[sample]], "abort")

    def _stop(self, seqs: list[Sequence], reason: str) -> bool:
        """Finish the unfinished `seqs` with `reason`, free their blocks; True if any stopped."""
        stopped = False
        for seq in seqs:
            if not seq.is_finished:
                self.scheduler.finish(seq)
                seq.finish_reason = reason
                self.runner.release(seq.seq_id)
                stopped = True
        return stopped

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def output(self, request_id: int) -> RequestOutput:
        """The request's tokens and text so far, every parallel sample's included.

        Raises: ValueError for an unknown request id."""
        self._get(request_id)
        return request_output(self.groups[request_id], self.tokenizer.decode)

    def _fork_samples(self, parent: Sequence, logits_row: torch.Tensor) -> list[Sequence]:
        """Fork n - 1 children of a prefilled parent: they share its blocks and its logits [vocab].

        Each samples its own first token from those logits."""
        params: SamplingParams = parent.params
        children = []
        for i in range(1, params.n):
            child_params = (params if params.seed is None
                            else replace(params, seed=(params.seed + i) % 2**64))
            child = Sequence(self._next_id, list(parent.prompt_token_ids), request_id=parent.seq_id,
                             sample_index=i, params=child_params,
                             generator=make_generator(child_params))
            self._next_id += 1
            self.block_manager.fork(parent, child)
            self.runner.fork(parent.seq_id, child.seq_id)
            child.on_prefill_done(sample_one(parent, logits_row, child_params, child.generator))
            child.status = SequenceStatus.RUNNING
            self.scheduler.running.append(child)
            self.groups[parent.seq_id].append(child)
            self.sequences[child.seq_id] = child
            children.append(child)
        parent.n = 1  # forked once; a recompute after preemption must not fork again
        return children

    # --- one step ---------------------------------------------------------------------------------
    def stop_reason(self, seq: Sequence) -> str | None:
        """Why seq stops after its newest token ("eos", "stop", "length"), or None: check_stop."""
        return check_stop(seq, self.tokenizer)

    def step(self) -> StepTrace:
        """Run one step: schedule, run the model, sample, update, free finished blocks.

        If anything raises, the engine is rolled back to before the step (StepCheckpoint; a
        sequence the step preempted stays preempted). A request to blame (NaN / inf logits, or its
        sampling raised) is ended with finish_reason "error" and its blocks freed.
        Raises: EngineStepError (from the original error) naming the step and what went wrong.
        """
        checkpoint = StepCheckpoint(self)
        self._in_flight = None
        try:
            trace = self._step()
        except BaseException as err:
            kept_preempted = checkpoint.restore()
            # KeyboardInterrupt & co: rolled back, passed on untouched
            if not isinstance(err, Exception):
                raise
            raise self._step_error(err, kept_preempted) from err
        checkpoint.close()
        return trace

    def _step_error(self, err: Exception, kept_preempted: list[int]) -> "EngineStepError":
        """The error for a failed, rolled-back step; ends the request to blame, if any."""
        where = (f" during the {self._in_flight[0]} of seq(s) {self._in_flight[1]}"
                 if self._in_flight else " while scheduling")
        what = err.what if isinstance(err, SequenceFailure) else f"{type(err).__name__}: {err}"
        msg = (f"engine step {self.step_count} failed{where}: {what}. The engine was rolled back "
               "to before the step")
        if kept_preempted:
            msg += f" (seq(s) {kept_preempted}, preempted by it, stay preempted)"
        ended = None
        if isinstance(err, SequenceFailure):
            ended = err.seq.request_id
            self._stop(self.groups[ended], "error")
            msg += f"; request {ended} (seq {err.seq.seq_id}) was ended with finish_reason 'error'"
        else:
            msg += "; step again to retry, or abort the request to blame"
        return EngineStepError(msg, self.step_count, self._in_flight[1] if self._in_flight else [],
                               ended)

    def _step(self) -> StepTrace:
        """One step, as nano-vllm: schedule → prepare → run → sample → update → free."""
        t0 = time.perf_counter()
        sched, trace = self._schedule()
        # speculation.py ran it
        if self.speculative is not None and self.speculative.step(sched, trace):
            return self._end(trace, t0)
        if sched.phase != "idle":
            # mixed: the prefill path, a decode is a 1-token chunk
            is_prefill = sched.phase in ("prefill", "mixed")
            chunks = [sched.num_tokens[s.seq_id] for s in sched.seqs] if sched.num_tokens else None
            # input_ids, slot_mapping, block_tables
            batch = self.runner.prepare(sched.seqs, is_prefill, chunks)
            # [B, vocab]: write K/V at the slots, read through tables
            logits = self.runner.run(sched.seqs, batch)
            trace.attention, trace.kernel = self.runner.ran
            tokens = sample_checked(sched.seqs, logits, chunks)
            rows = update_sequences(sched.seqs, tokens, logits, batch.query_lens, trace,
                                    self._fork_samples, self.stop_reason)
            self.free_finished(trace)
            if self.window:  # free the blocks behind each sequence's window
                trace.window_freed = self.block_manager.slide(self.scheduler.running)
            if self.record:
                recorder = StepRecorder(trace, batch, logits, self.tokenizer.decode,
                                        self.last_logits, self.sequences)
                for row in rows:
                    recorder.add(*row)
        return self._end(trace, t0)

    def _schedule(self) -> tuple[SchedulerOutput, StepTrace]:
        """Pick this step's sequences and blocks; copy-on-write runs before anything is written."""
        bm = self.block_manager
        before = block_tables(self.scheduler.running) if self.record else {}
        sched = self.scheduler.schedule()
        self._in_flight = (sched.phase, [s.seq_id for s in sched.seqs])
        # swap-out / swap-in copies, first
        swaps = self.swapper.apply(self.runner) if self.swapper else {}
        copies, bm.pending_copies = bm.pending_copies, []
        self.runner.copy_blocks(copies)
        trace = StepTrace(step=self.step_count, phase=sched.phase, reason=sched.reason,
                          why=sched.why,
                          kv_layout=self.kv_layout, block_tables_before=before,
                          blocks_allocated=sched.allocated,
                          blocks_freed=dict(sched.freed), preempted=sched.preempted,
                          num_blocks=bm.num_blocks,
                          copies=copies, **swaps)
        for seq_id in sched.preempted:
            self.sequences[seq_id].preemptions += 1
            self.runner.release(seq_id)
        self.step_count += 1
        return sched, trace

    def free_finished(self, trace: StepTrace) -> None:
        """Free the blocks of every sequence that stopped this step (trace.blocks_freed)."""
        for seq_id in trace.finished:
            trace.blocks_freed[seq_id] = self.scheduler.finish(self.sequences[seq_id])
            self.runner.release(seq_id)

    def _end(self, trace: StepTrace, t0: float) -> StepTrace:
        trace.num_free_blocks = self.block_manager.num_free_blocks
        if self.record:
            record_queues(trace, self.scheduler.waiting, self.scheduler.running)
        trace.elapsed_ms = (time.perf_counter() - t0) * 1000
        return trace

    def generate(self, prompts: list[str | list[int]] | str, params: SamplingParams | None = None,
                 max_steps: int = 100_000) -> list[RequestOutput]:
        """Add every prompt, step until all finish, return their outputs in prompt order.

        Raises: ValueError as add_request does; RuntimeError past max_steps."""
        if isinstance(prompts, str):
            prompts = [prompts]
        ids = [self.add_request(p, params) for p in prompts]
        for _ in range(max_steps):
            if not self.has_unfinished():
                break
            self.step()
        else:
            raise RuntimeError(f"generate did not finish within {max_steps} steps")
        return [self.output(i) for i in ids]
