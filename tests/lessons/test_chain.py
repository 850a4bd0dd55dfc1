"""The chain, live (lessons.chain) and the state rule table (lessons.state_rule), checked against what the engine
really did: the model runner's own inputs captured at each step, the engine's output token ids, and inspect."""

from __future__ import annotations

import inspect
import textwrap

import pytest
import torch

import paged.engine.runner as runner_module
from lessons.chain import SOURCES, STAGES, Stage, attention_tables, chain_stages, stage_sources
from lessons.state_rule import state_rows, tail
from paged.config import CacheConfig, ModelConfig, SamplingParams, SchedulerConfig
from paged.engine.engine import LLMEngine
from paged.engine.scheduler import Scheduler
from paged.model import ByteTokenizer, TinyLlama
from ui.chain_live import arrow_label
from ui.page import PageContext
from ui.strings import translator
from viz.chain_live import chain_labels, chain_live_html
from viz.colors import seq_label


def run_recorded(engine: LLMEngine, monkeypatch, max_steps: int = 200):
    """Step `engine` to the end; returns [(trace, the paged BatchInput prepare_inputs built for it, or None)]."""
    seen = []
    real = runner_module.prepare_inputs

    def spy(*args, **kwargs):
        batch = real(*args, **kwargs)
        seen.append(batch)
        return batch

    monkeypatch.setattr(runner_module, "prepare_inputs", spy)
    out = []
    for _ in range(max_steps):
        if not engine.has_unfinished():
            break
        before = len(seen)
        trace = engine.step()
        out.append((trace, seen[before] if len(seen) > before else None))
    assert not engine.has_unfinished()
    return out


CHUNK_BUDGET = 16


def make_engine(tiny, num_blocks: int, block_size: int = 4, prefix: bool = False, chunked: bool = False):
    model, tok = tiny
    return LLMEngine(model, tok, CacheConfig(block_size=block_size, num_blocks=num_blocks, watermark=0.0, seed=3,
                                             enable_prefix_caching=prefix),
                     SchedulerConfig(max_num_batched_tokens=CHUNK_BUDGET if chunked else 256, max_num_seqs=4,
                                     enable_chunked_prefill=chunked), attn_impl="gather")


SCENES = {
    # three prompts, one finishing early: prefill, decodes with and without new blocks, a finish mid-run
    "plain": (40, False, [("hello paged world", SamplingParams(max_tokens=9, ignore_eos=True)),
                          ("abc", SamplingParams(max_tokens=3, ignore_eos=True)),
                          ("a longer prompt here", SamplingParams(max_tokens=6, ignore_eos=True))]),
    # a pool too small for all three at full length: preemption by recompute
    "tiny_pool": (12, False, [("0123456789", SamplingParams(max_tokens=14, ignore_eos=True)),
                              ("abcdefghij", SamplingParams(max_tokens=14, ignore_eos=True)),
                              ("ABCDEFGHIJ", SamplingParams(max_tokens=14, ignore_eos=True))]),
    # parallel samples (fork, copy-on-write) and a repeated prompt (prefix-cache hits)
    "sharing": (40, True, [("shared prefix text", SamplingParams(max_tokens=6, n=3, temperature=1.0, seed=1,
                                                                ignore_eos=True)),
                           ("shared prefix text", SamplingParams(max_tokens=5, ignore_eos=True))]),
    # chunked prefill (16 tokens a step): a 40-token prompt arrives after step 1 and enters in chunks of 14, 15, 10
    # beside the decodes of two short prompts that finish meanwhile; its last chunk runs alone and samples its only
    # token, so it finishes in the step its final chunk ran
    "chunked": (40, False, [("abc", SamplingParams(max_tokens=2, ignore_eos=True)),
                            ("hello there", SamplingParams(max_tokens=3, ignore_eos=True)),
                            ("a prompt too long for one chunk of 16.", SamplingParams(max_tokens=1, ignore_eos=True))]),
}


def build(tiny, name):
    """The scene's engine with its requests added; returns (engine, request ids, traces of steps already run)."""
    num_blocks, prefix, requests = SCENES[name]
    chunked = name == "chunked"
    engine = make_engine(tiny, num_blocks, prefix=prefix, chunked=chunked)
    ids, early = [], []
    for i, (text, params) in enumerate(requests):
        ids.append(engine.add_request(text, params))
        if prefix and i == 0:
            early.append(engine.step())  # the first prompt fills the prefix cache before the second arrives
        if chunked and i == 1:
            early.append(engine.step())  # the short prompts decode when the long one arrives
    return engine, ids, early


@pytest.mark.parametrize("name", sorted(SCENES))
def test_arrows_carry_what_the_runner_really_built(tiny, monkeypatch, name):
    """The ModelRunner stage's slot_mapping, block_tables and context_lens equal the paged BatchInput that
    prepare_inputs built in that very step (captured by a spy), finished and preempted sequences included."""
    engine, _, early = build(tiny, name)
    steps = [(t, None) for t in early] + run_recorded(engine, monkeypatch)
    kinds = set()
    for trace, batch in steps:
        stages = {s.key: s for s in chain_stages(trace, engine.block_manager.block_size)}
        runner = stages["model_runner"]
        if batch is None:
            assert trace.phase == "idle" and not runner.active or trace in early
            continue
        assert runner.active and runner.out["slot_mapping"] == batch.slot_mapping.tolist()
        rows = batch.block_tables.tolist()
        for i, seq_id in enumerate(batch.seq_ids):
            assert runner.out["block_tables"][seq_id] == [b for b in rows[i] if b >= 0]
            assert runner.out["context_lens"][seq_id] == int(batch.context_lens[i])
        kinds |= {trace.phase} | ({"finish"} if trace.finished else set()) | (
            {"preempt"} if trace.preempted else set()) | ({"cow"} if trace.copies else set())
    expected = {"plain": {"prefill", "decode", "finish"}, "tiny_pool": {"preempt"}, "sharing": {"cow"},
                "chunked": {"mixed", "prefill", "finish"}}[name]
    assert expected <= kinds, kinds
    for lang in ("en", "zh"):  # every arrow of every step has its words in both languages
        ctx = PageContext("engine", lang, translator("engine", lang))
        for trace, _ in steps:
            labels = [arrow_label(ctx, s) for s in chain_stages(trace, engine.block_manager.block_size)]
            assert all(labels) and str(trace.num_free_blocks) in labels[-1]


def test_idle_modules_are_dimmed(tiny, monkeypatch):
    """A decode with no new block leaves the Block Manager dimmed, a step where nothing finished leaves the free
    stage dimmed, a finishing step lights it with exactly the freed blocks; before any step everything is dim."""
    assert not any(s.active for s in chain_stages(None, 4))
    engine, _, _ = build(tiny, "plain")
    steps = run_recorded(engine, monkeypatch)
    quiet = [t for t, _ in steps if t.phase == "decode" and not t.blocks_allocated and not t.finished]
    assert quiet
    stages = {s.key: s for s in chain_stages(quiet[0], 4)}
    assert not stages["block_manager"].active and not stages["free_blocks"].active
    assert stages["scheduler"].active and stages["sampler"].active
    finishing = next(t for t, _ in steps if t.finished)
    free = {s.key: s for s in chain_stages(finishing, 4)}["free_blocks"]
    assert free.active and set(free.out["freed"]) == set(finishing.finished)
    assert all(free.out["freed"][sid] == finishing.blocks_freed[sid] for sid in finishing.finished)


def test_tables_of_finished_sequences_are_rebuilt(tiny, monkeypatch):
    """A sequence that finished in a step is no longer in block_tables_after; its table is rebuilt anyway and
    equals the one attention was handed."""
    engine, _, _ = build(tiny, "plain")
    checked = 0
    for trace, batch in run_recorded(engine, monkeypatch):
        for sid in trace.finished:
            if batch is not None and sid in batch.seq_ids:
                row = batch.block_tables.tolist()[batch.seq_ids.index(sid)]
                assert sid not in trace.block_tables_after
                assert attention_tables(trace, 4)[sid] == [b for b in row if b >= 0]
                checked += 1
    assert checked >= 2


def test_rebuilt_table_after_a_new_block_or_a_copy_on_write():
    """A finished sequence's table: a decode past a full last block appends the new block; a decode into a shared
    partly filled last block replaced it (copy-on-write)."""
    from paged.engine.trace import SeqStepState, StepTrace

    def decode(context_len):
        return StepTrace(step=0, phase="decode", reason="", kv_layout="paged", block_tables_before={5: [3, 7]},
                         blocks_allocated={5: [9]}, finished=[5],
                         seqs=[SeqStepState(5, [1], [context_len - 1], [0], context_len, 2)])

    assert attention_tables(decode(9), 4) == {5: [3, 7, 9]}  # token 8 needs a third block
    assert attention_tables(decode(6), 4) == {5: [3, 9]}  # token 5 lives in logical block 1: it was copied


def test_stage_sources_are_the_real_functions():
    """Every stage shows the source inspect reads from the running library (not a copy), starting with its def."""
    assert set(SOURCES) == set(STAGES)
    for key in STAGES:
        shown = stage_sources(key)
        assert len(shown) == len(SOURCES[key])
        for (name, source), fn in zip(shown, SOURCES[key]):
            assert source == textwrap.dedent(inspect.getsource(fn))
            assert name.endswith(fn.__qualname__) and source.lstrip().startswith(("def ", "@"))
    assert stage_sources("scheduler")[0][1] == textwrap.dedent(inspect.getsource(Scheduler.schedule))
    with pytest.raises(ValueError, match="unknown stage"):
        stage_sources("tokenizer")


@pytest.mark.parametrize("name", sorted(SCENES))
def test_state_rule_rows_follow_the_engine(tiny, monkeypatch, name):
    """For every sequence: cached after = cached before + tokens fed; the first prefill ends with cached =
    prompt_len and generated = [t1]; each decode feeds the last generated token and reads cached-after tokens; the
    generated ids end equal to the engine's output (its own token ids, not this module's)."""
    engine, request_ids, early = build(tiny, name)
    steps = early + [t for t, _ in run_recorded(engine, monkeypatch)]
    checked, hits, chunked = 0, 0, 0
    for rid in request_ids:
        out = engine.output(rid)
        for seq, tokens in zip(engine.groups[rid], out.samples):
            seq_id = seq.seq_id
            rows = state_rows(steps, seq_id)
            assert rows and list(rows[-1].generated) == tokens
            first = rows[0]
            if first.phase == "prefill":
                run = rows[:first.num_chunks]  # the prefill's chunks (one row when the prompt was fed whole)
                assert [(r.phase, r.chunk, r.num_chunks) for r in run] == [("prefill", k, len(run))
                                                                           for k in range(1, len(run) + 1)]
                for k, r in enumerate(run):  # cached after each chunk: the tokens of this chunk and those before
                    assert r.cached_after == first.cached_before + sum(len(c.fed) for c in run[:k + 1])
                    assert r.generated == (() if r is not run[-1] else (tokens[0],))  # sampled at the last only
                assert run[-1].cached_after == len(out.prompt_token_ids)
                hits += first.cached_before > 0  # a prefix-cache hit: only the rest of the prompt is fed
                chunked += len(run) > 1
            else:
                assert first.phase == "fork" and first.fed == () and first.generated == (tokens[0],)
            for prev, row in zip([None] + rows[:-1], rows):
                assert row.cached_after == row.cached_before + len(row.fed)
                if row.phase == "decode":
                    assert row.fed == (tokens[len(prev.generated) - 1],) == (prev.generated[-1],)
                    assert row.context_len == row.cached_after and row.slots and len(row.slots) == 1
                    checked += 1
    assert checked > 5 or name == "chunked"
    assert hits == (name == "sharing") and chunked == (name == "chunked")


def test_preempted_sequence_recomputes_in_one_prefill(tiny, monkeypatch):
    """After a preemption the next prefill feeds prompt + generated tokens from index 0 and ends with cached equal
    to all of them; the generated ids carry over (one more sampled)."""
    engine, _, _ = build(tiny, "tiny_pool")
    steps = [t for t, _ in run_recorded(engine, monkeypatch)]
    victim = next(p for t in steps for p in t.preempted)
    rows = state_rows(steps, victim)
    again = [r for r in rows[1:] if r.phase == "prefill"]
    assert again
    r = again[0]
    prev = rows[rows.index(r) - 1]
    prompt_len = len(engine.output(victim).prompt_token_ids)
    assert r.cached_before == 0 and r.cached_after == prompt_len + len(prev.generated)
    assert r.generated[:-1] == prev.generated


def test_tail_keeps_the_newest():
    assert tail([1, 2, 3, 4, 5, 6], 3) == (True, (4, 5, 6))
    assert tail([1, 2], 3) == (False, (1, 2))


def test_chain_diagram_marks_idle_and_selected():
    """Active boxes are lit, dimmed ones not, the selected one outlined; labels are escaped but keep <br> and <b>;
    each box's tooltip names its module and values; mismatched inputs are refused."""
    import re
    markup = chain_live_html(["a", "b", "c"], [True, False, True], ["x<br>y", "<b>q</b> & <script>", "z"], selected=2)
    boxes = re.findall(r'<div class="pc-box([^"]*)" title="([^"]*)">([^<]*)</div>', markup)
    assert [(cls.split(), text) for cls, _, text in boxes] == [(["pc-on"], "1. a"), ([], "2. b"),
                                                              (["pc-on", "pc-sel"], "3. c")]
    assert boxes[0][1] == "a: x · y"
    assert "<script>" not in markup and "&lt;script&gt;" in markup and "<b>q</b>" in markup
    assert chain_labels(markup) == ["x<br>y", "<b>q</b> & <script>", "z"]
    assert "\n" not in markup
    with pytest.raises(ValueError, match="same length"):
        chain_live_html(["a"], [True, False], ["x"])


def test_mixed_step_shows_the_chunk_beside_decodes(tiny, monkeypatch):
    """A mixed step: the Scheduler arrow says "prefill chunk + decode" with the chunk's own why; the prompt fed a
    chunk before its last has no sampled token ("—" and a note), the decodes have theirs; in both languages."""
    engine, ids, early = build(tiny, "chunked")
    steps = early + [t for t, _ in run_recorded(engine, monkeypatch)]
    long_id = engine.groups[ids[2]][0].seq_id
    mixed = [t for t in steps if t.phase == "mixed"]
    assert len(mixed) == 2  # the two short prompts decode beside the long one's first two chunks
    for trace in mixed:
        stages = {s.key: s for s in chain_stages(trace, 4)}
        assert stages["sampler"].out["mid_prefill"] == [long_id]
        fed = next(s for s in trace.seqs if s.seq_id == long_id)
        assert ("prefill_chunk", dict(seq=long_id, start=fed.positions[0], end=fed.positions[-1],
                                      total=39)) in trace.why
        for lang in ("en", "zh"):
            ctx = PageContext("engine", lang, translator("engine", lang))
            scheduler, sampler = arrow_label(ctx, stages["scheduler"]), arrow_label(ctx, stages["sampler"])
            assert scheduler.startswith(ctx.t("chain.phase_mixed"))
            named = {**dict(trace.why)["prefill_chunk"], "seq": seq_label(long_id)}  # a page names it by letter
            assert ctx.t("engine.why_prefill_chunk", **named) in scheduler
            assert f"{seq_label(long_id)} —" in sampler and ctx.t("chain.out_mid_prefill", seqs=seq_label(long_id)) \
                in sampler
            decoding = [s for s in trace.seqs if s.seq_id != long_id]
            assert all(f"{seq_label(s.seq_id)} {s.text_out!r}" in sampler for s in decoding)
    last = next(t for t in steps if t.seqs and t.seqs[0].seq_id == long_id and t.finished)  # the final chunk
    assert chain_stages(last, 4)[4].out["mid_prefill"] == []


def test_a_long_why_wraps_between_pieces():
    """The scheduler's why on the chain breaks lines only between pieces, counting a CJK character as two columns,
    so a mixed step's several pieces stay inside the figure."""
    from ui.chain_live import wrap_pieces
    assert wrap_pieces(["a" * 30, "b" * 20, "c" * 30], width=60) == "a" * 30 + "; " + "b" * 20 + ";<br>" + "c" * 30
    assert wrap_pieces(["分" * 20, "块" * 15], width=60) == "分" * 20 + ";<br>" + "块" * 15
    assert wrap_pieces(["x" * 80]) == "x" * 80 and wrap_pieces([]) == ""


def test_the_sampler_arrow_shows_each_token_as_the_state_table_does():
    """Given the page's token labels, the sampler arrow names each sampled token by its piece (a space as ␣), not
    by the repr of its text, so the chain and the state table agree."""
    from lessons.tokens import token_label

    tok = ByteTokenizer()
    space, nine = tok.encode(" ")[-1], tok.encode("9")[-1]
    stage = Stage("sampler", True, dict(tokens={0: (space, " "), 1: (nine, "9")}, mid_prefill=[]))
    ctx = PageContext("engine", "en", translator("engine", "en"))
    shown = arrow_label(ctx, stage, lambda tid: token_label(tok, tid))
    assert f"{seq_label(0)} ␣" in shown and f"{seq_label(1)} 9" in shown and "' '" not in shown
    assert f"{seq_label(0)} ' '" in arrow_label(ctx, stage)  # without labels: the text's repr, as before


def test_page_4s_default_engine_calls_the_article_functions_and_the_chain_names_the_kernel(shipped,
                                                                                            monkeypatch):
    """Page 4 at its defaults (the shipped model, the "three" requests, the device's default impl): over three
    decode steps every layer's K/V write goes through write_kv and its attention through paged_attention_decode
    (issue 37: the fast kernels sit behind them), and the chain's PagedAttention arrow names the kernel that ran,
    in both languages."""
    import paged.attention as attention_module
    from lessons.engine import EngineLesson
    from lessons.engine_requests import ENGINE_SCENARIOS
    from paged.kernels import DecodeStep, default_attn_impl

    model, tokenizer = shipped
    num_layers = model.config.num_hidden_layers
    calls, ran = {"paged_attention_decode": 0, "write_kv": 0}, []
    for name in calls:  # what the runner calls, counted
        real = getattr(runner_module, name)
        monkeypatch.setattr(runner_module, name, lambda *a, _real=real, _name=name, **kw:
                            calls.__setitem__(_name, calls[_name] + 1) or _real(*a, **kw))
    for impl, fn in list(attention_module.DECODE_IMPLS.items()):  # which kernel really ran behind the call
        monkeypatch.setitem(attention_module.DECODE_IMPLS, impl, lambda *a, _fn=fn, _impl=impl:
                            ran.append(_impl) or _fn(*a))
    real_attend = DecodeStep.attend
    monkeypatch.setattr(DecodeStep, "attend", lambda self, *a: ran.append("native") or real_attend(self, *a))

    scene = ENGINE_SCENARIOS["three"]
    lesson = EngineLesson(scene.config, model, tokenizer)
    for spec in scene.requests:
        lesson.add(spec)
    decodes = 0
    while decodes < 3:
        calls.update(dict.fromkeys(calls, 0))
        ran.clear()
        trace = lesson.step().paged
        if trace.phase != "decode":
            continue
        decodes += 1
        assert calls == {"paged_attention_decode": num_layers, "write_kv": num_layers}
        assert ran == [default_attn_impl(torch.device("cpu"))] * num_layers
        stage = chain_stages(trace, lesson.view.block_size)[STAGES.index("paged_attention")]
        assert (stage.out["call"], stage.out["kernel"]) == ("paged_attention_decode", ran[0])
        for lang, kernel_name in (("en", {"native": "native C kernel", "gather": "gather then attend"}),
                                  ("zh", {"native": "原生 C kernel", "gather": "先 gather 再做 attention"})):
            label = arrow_label(PageContext("engine", lang, translator("engine", lang)), stage)
            assert f"paged_attention_decode ({kernel_name[ran[0]]})" in label.replace("（", " (").replace("）", ")")
