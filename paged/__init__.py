"""paged: PagedAttention you can watch, poke and break, on real tensors.

UI-free (it never imports streamlit): the Streamlit app, the CLI (`python -m paged`), the tests
and the benchmarks (benchmarks/, beside this package) all call the same functions from here.

Reading order. First the article's five files, in the article's order (pages 1-4):
    addressing.py     the address chain: token -> logical block, offset -> physical block -> slot
    kv_cache.py       the pool [num_blocks, block_size, num_kv_heads, head_dim], write_kv,
                      the reference
    attention.py      gather_kv_loop, gather_kv, attention; paged_attention_decode / _prefill
    block_manager.py  free blocks, allocate / append_slot / free, ref counts, copy-on-write
    sequence.py       the state rule: cached_token_count vs generated_token_ids

Then every other module and folder, with the page it serves:
    config.py, checks.py, address_checks.py, attention_checks.py   configs and boundary
                      checks (every page)
    batch.py          BatchInput: one step's model inputs (built by the runner, rebuilt by a fault)
    prefix_cache.py   the free queue and the prefix-cache index, vLLM 0.32's policy (6 Sharing)
    __main__.py       `python -m paged generate ...`: the command line
    chapters/         the later chapters' data and math: beam_select (9 Beam search), window
                      (11 Sliding window), swap (10 Swap or recompute), speculative
                      (12 Speculative decoding), memory (7 Correct to fast), vllm_twin: vLLM's
                      own block manager beside ours (4 Engine, 6 Sharing)
    engine/           the mini vLLM engine: scheduler, runner, sampler, LLMEngine, StepTrace and
                      EngineView (4 Engine onwards); the chapters' engine parts (beam search:
                      beam.py drives, beam_group.py holds a prompt's beams; swapping,
                      windowing, window_blocks, speculation)
    faults/           the classic bugs, each defined once and applied through one hook (5 Bug lab)
    kernels/          fused, native C and Triton kernels behind the article's calls
                      (7 Correct to fast)
    model/            the tiny Llama, tokenizers, checkpoints, training (4 Engine onwards)
    exercises/        the learner's workspace and its checker (13 Your turn; docs/exercises.md)
"""

__version__ = "0.1.0"
