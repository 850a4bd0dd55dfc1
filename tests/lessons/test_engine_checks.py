"""lessons.engine_checks and the demo's labels: a refused request names the limit it hit with a fix that works (the
suggested number is then accepted by the real engine), form values out of range are refused by name, and display
ids keep a sequence's label for its whole life, however requests arrive and fork."""

from __future__ import annotations

import pytest
import torch

from lessons.engine import EngineLesson
from lessons.engine_requests import SHARING_SCENARIOS, DemoConfig, RequestError, RequestSpec
from paged.config import ModelConfig
from paged.model import ByteTokenizer, TinyLlama


@pytest.fixture(scope="module")
def tiny():
    """A small random model (256 positions); one torch thread, as the app runs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=256)
    yield TinyLlama(cfg).eval(), ByteTokenizer()
    torch.set_num_threads(threads)


def refused(demo, spec) -> RequestError:
    with pytest.raises(RequestError) as info:
        demo.add(spec)
    assert not demo.all_specs() and not demo.engine.sequences, "a refusal changes nothing"
    return info.value


def accepted(config, spec, model, tok) -> bool:
    try:
        EngineLesson(config, model, tok).add(spec)
    except RequestError:
        return False
    return True


def test_each_refusal_names_its_limit_and_a_fix_that_works(tiny):
    model, tok = tiny
    prompt = "x" * 29  # BOS + 29 + SEP = 31 tokens
    # positions: 201 + 100 > 256 positions; the fix's max_tokens fits
    config = DemoConfig(block_size=8, num_blocks=64)
    err = refused(EngineLesson(config, model, tok), RequestSpec("x" * 199, max_tokens=100))
    assert err.code == "positions" and err.detail["fit"] == 256 - 201
    assert accepted(config, RequestSpec("x" * 199, max_tokens=err.detail["fit"]), model, tok)
    assert not accepted(config, RequestSpec("x" * 199, max_tokens=err.detail["fit"] + 1), model, tok)
    # pool: 31 + 40 = 71 tokens need 9 blocks of 8; the pool has 6, of which the watermark (0.2) keeps 1 back
    config = DemoConfig(block_size=8, num_blocks=6, watermark=0.2)
    err = refused(EngineLesson(config, model, tok), RequestSpec(prompt, max_tokens=40))
    assert err.code == "pool" and err.detail["need"] == 9 and err.detail["usable"] == 5
    bigger = DemoConfig(block_size=8, num_blocks=err.detail["min_blocks"], watermark=0.2)
    assert accepted(bigger, RequestSpec(prompt, max_tokens=40), model, tok)
    assert not accepted(DemoConfig(block_size=8, num_blocks=err.detail["min_blocks"] - 1, watermark=0.2),
                        RequestSpec(prompt, max_tokens=40), model, tok)
    fit = err.detail["fit_tokens"] - 31
    assert accepted(config, RequestSpec(prompt, max_tokens=fit), model, tok)
    assert not accepted(config, RequestSpec(prompt, max_tokens=fit + 1), model, tok)
    # samples: n = 4 of 16 new tokens each need 3 + 4 * 3 = 15 blocks, the pool has 10
    config = DemoConfig(block_size=8, num_blocks=10)
    err = refused(EngineLesson(config, model, tok), RequestSpec(prompt, max_tokens=16, n=4))
    assert err.code == "samples" and err.detail["n_fit"] == 2
    assert (err.detail["need"], err.detail["usable"]) == (15, 10)  # the page names the limit that binds
    assert accepted(config, RequestSpec(prompt, max_tokens=16, n=err.detail["n_fit"]), model, tok)
    assert not accepted(config, RequestSpec(prompt, max_tokens=16, n=err.detail["n_fit"] + 1), model, tok)
    err = refused(EngineLesson(DemoConfig(num_blocks=64, max_num_seqs=2), model, tok), RequestSpec("a", n=3))
    assert err.code == "samples" and err.detail["n_fit"] == 2
    # batch_tokens: 31 + 40 = 71 tokens, one step may schedule 64
    config = DemoConfig(block_size=8, num_blocks=64, max_num_batched_tokens=64)
    err = refused(EngineLesson(config, model, tok), RequestSpec(prompt, max_tokens=40))
    assert err.code == "batch_tokens" and (err.detail["tokens"], err.detail["budget"]) == (71, 64)
    raised = DemoConfig(block_size=8, num_blocks=64, max_num_batched_tokens=128)
    assert accepted(raised, RequestSpec(prompt, max_tokens=40), model, tok)


@pytest.mark.parametrize("field, value", [("n", 9), ("n", 0), ("seed", 10**6), ("max_tokens", 9999),
                                          ("temperature", 2.5), ("temperature", float("nan"))])
def test_form_values_out_of_range_are_refused_by_name(tiny, field, value):
    model, tok = tiny
    err = refused(EngineLesson(DemoConfig(num_blocks=64), model, tok), RequestSpec("abc", **{field: value}))
    assert err.code == "out_of_range" and err.detail["field"] == field and err.detail["lo"] <= err.detail["hi"]


def labels(demo) -> dict[str, int]:
    """prompt tail + sample index -> display id, for every sequence."""
    rows = {r.seq_id: r for r in demo.rows()}
    return {f"{rows[s].prompt[-8:]}#{rows[s].sample_index}": d for s, d in demo.display_ids().items()}


def test_a_forking_request_does_not_relabel_a_later_one(tiny):
    """The shared-prefix scenario (A now, B after step 1) plus a request with n = 4 added before step 1: B is still
    B (display id 1) and the new request's sequences are C, D, E, F, although the engine numbers B's sequence 5.
    The labels do not change over the steps, nor when the link is replayed."""
    model, tok = tiny
    scenario = SHARING_SCENARIOS["prefix"]
    demo = EngineLesson.replay(scenario.config, list(scenario.requests), 0, model, tok)
    demo.add(RequestSpec("another question", max_tokens=8, temperature=1.0, n=4))
    seen: dict[str, int] = {}
    for _ in range(4):
        demo.step()
        for name, display in labels(demo).items():
            assert seen.setdefault(name, display) == display, f"{name} was relabelled"
    b = next(s for s, seq in demo.engine.sequences.items() if seq.prompt_len > 60 and
             tok.decode(seq.prompt_token_ids).endswith("Q22"))
    assert b == 5 and demo.display_id(b) == 1
    assert sorted(demo.display_ids().values()) == list(range(6))
    again = EngineLesson.replay(scenario.config, demo.all_specs(), 4, model, tok)
    assert labels(again) == labels(demo)


def test_refusal_keeps_the_engines_code_and_numbers():
    """An AdmissionError becomes a RequestError with its code, message and values; any other engine ValueError is
    "rejected" with the engine's message (the page then shows it verbatim)."""
    from lessons.engine_checks import refusal
    from paged.engine.admission import AdmissionError

    err = refusal(AdmissionError("pool", "no room", need=9, usable=5))
    assert (err.code, str(err), err.detail) == ("pool", "no room", {"need": 9, "usable": 5})
    err = refusal(ValueError("prompt token ids: 300 is not in [0, 259)"))
    assert (err.code, str(err), err.detail) == ("rejected", "prompt token ids: 300 is not in [0, 259)", {})
