"""Every prompt the app ships (page scenarios and presets, the bug lab's tasks, the teacher's guide's links, the CLI
examples of README.md and docs/) gets a visibly right output from the shipped model: an exact copy for recall, the
pattern continued for continue. The prompts are collected from where they are defined, so a new one is checked too.

The oracle is independent of the model: a recall's right answer is its own text then EOS; a continuation's is
computed from the prompt's pattern (a +1 count, an alphabet run, a repeated word). A sampled request (temperature
> 0) may wander, but a sampled count must stay a rising count.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import torch

from lessons.buglab import TASKS, model_scenario, run_fault
from lessons.engine import EngineLesson
from lessons.engine_requests import (ENGINE_SCENARIOS, PROMPT_PRESETS, SHARING_SCENARIOS, DemoConfig, RequestSpec,
                                     decode_requests)
from paged.config import CacheConfig, SamplingParams
from paged.engine import LLMEngine
from paged.faults import Fault
from paged.model import EOS, SEP, load_model
from ui.nav import guide_links

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@lru_cache(maxsize=1)
def shipped():
    torch.set_num_threads(1)
    return load_model()


# --- the oracle ----------------------------------------------------------------------------------------------------
def expected_continuation(prompt: str, length: int) -> str | None:
    """The first `length` characters after `prompt` if it is a pattern the shipped model was taught (None if not)."""
    words = prompt.split(" ")
    if all(w.isdigit() for w in words) and all(int(b) == int(a) + 1 for a, b in zip(words, words[1:])):
        return "".join(f" {n}" for n in range(int(words[-1]) + 1, int(words[-1]) + 1 + length))[:length]
    for letters in (string.ascii_lowercase, string.ascii_uppercase):
        if len(words) == 1 and prompt and all(c in letters for c in prompt):
            start = letters.index(prompt[-1]) + 1
            run = all(letters[(letters.index(a) + 1) % 26] == b for a, b in zip(prompt, prompt[1:]))
            return "".join(letters[(start + i) % 26] for i in range(length)) if run else None
    if len(words) > 1 and len(set(words)) == 1 and words[0]:
        return (f" {words[0]}" * length)[:length]
    return None


def wrong_reason(spec: RequestSpec, token_ids: list[int], tokenizer) -> str | None:
    """Why this output is not visibly right for `spec` (None: it is)."""
    text = tokenizer.decode(token_ids)
    if spec.task == "recall":
        want = list(spec.prompt.encode()) + [EOS]
        want = want[:spec.max_tokens]
        return None if token_ids == want else f"recall of {spec.prompt!r} gave {text!r}"
    if spec.temperature > 0:
        numbers = (spec.prompt + text).split()
        if expected_continuation(spec.prompt, 1) is None or not spec.prompt[0].isdigit():
            return f"a sampled prompt the test cannot judge: {spec.prompt!r}"
        rising = all(n.isdigit() for n in numbers) and all(
            int(b) > int(a) for a, b in zip(numbers[:-1], numbers[1:-1]))
        return None if rising else f"sample of {spec.prompt!r} left the count: {text!r}"
    want = expected_continuation(spec.prompt, len(text))
    if want is None:
        return f"{spec.prompt!r} is no pattern the model was taught to continue"
    return None if text == want and len(token_ids) == spec.max_tokens else f"{spec.prompt!r} went on {text!r}"


# --- where the prompts are defined ----------------------------------------------------------------------------------
def guide_runs() -> list[tuple[str, DemoConfig, list[RequestSpec]]]:
    """Each guide link that names its own requests (the others open a page's scenario, checked below)."""
    out = []
    for doc in sorted((ROOT / "docs").glob("teaching*.md")):
        for link in guide_links(doc.read_text(encoding="utf-8")):
            reqs = parse_qs(urlsplit(link).query).get("reqs")
            if reqs:
                out.append((f"{doc.name}: {link[:60]}", DemoConfig(num_blocks=64), decode_requests(reqs[0])))
    return out


def scenario_runs() -> list[tuple[str, DemoConfig, list[RequestSpec]]]:
    runs = [(f"engine scenario {k}", s.config, list(s.requests)) for k, s in ENGINE_SCENARIOS.items() if s.requests]
    runs += [(f"sharing scenario {k}", s.config, list(s.requests)) for k, s in SHARING_SCENARIOS.items()]
    runs += [(f"page 4 preset {k}", DemoConfig(), [RequestSpec(text, task)]) for k, (task, text) in
             PROMPT_PRESETS.items()]
    return runs + guide_runs()


def cli_examples() -> list[tuple[str, str, int]]:
    """(file, prompt, max_tokens) of every `python -m paged generate "…"` (shipped model) and `engine.generate([…])`
    example in README.md and docs/."""
    out = []
    for doc in DOC_FILES:
        for line in doc.read_text(encoding="utf-8").splitlines():
            cli = re.search(r'python -m paged generate "([^"]+)"(.*)', line)
            if cli and "--model" not in cli.group(2):
                m = re.search(r"--max-tokens (\d+)", cli.group(2))
                out.append((doc.name, cli.group(1), int(m.group(1)) if m else 64))
            api = re.search(r'\.generate\(\["([^"]+)"\], SamplingParams\(max_tokens=(\d+)\)', line)
            if api:
                out.append((doc.name, api.group(1), int(api.group(2))))
    return out


def test_the_oracle_rejects_the_wrong_runs_it_exists_for():
    """The "0 1 1 1" copy that issue 27 found, a count that skips, a typo'd copy and a text that is no pattern are
    all wrong; the right ones pass. And the collectors find every place prompts live."""
    class Bytes:
        def decode(self, ids):
            return bytes(i for i in ids if i < 256).decode()

    recall = RequestSpec("0 1 2 3 4 5 6 7 8 9 10")
    assert wrong_reason(recall, list(b"0 1 1 1 1 1 1 1 1 1 1 1"), Bytes())
    assert wrong_reason(recall, list(b"0 1 2 3 4 5 6 7 8 9 10") + [EOS], Bytes()) is None
    count = RequestSpec("1 2 3", "continue", max_tokens=6)
    assert wrong_reason(count, list(b" 4 5 7"), Bytes()) and wrong_reason(count, list(b" 4 5 6"), Bytes()) is None
    assert wrong_reason(RequestSpec("Hello!", "continue", max_tokens=2), list(b"d!"), Bytes())
    assert wrong_reason(RequestSpec("xyz", "continue", max_tokens=3), list(b"abc"), Bytes()) is None
    assert wrong_reason(RequestSpec("1 2", "continue", max_tokens=6, temperature=1.0), list(b" 3 :V0"), Bytes())
    assert len(scenario_runs()) >= 12 and len(guide_runs()) >= 4 and len(cli_examples()) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("where", [w for w, _, _ in scenario_runs()])
def test_every_shipped_scenario_and_guide_link_gets_a_right_reference(where):
    """Run the scenario (paged engine + contiguous twin) to the end: both sides give every request (and each of its
    samples) a visibly right output."""
    model, tok = shipped()
    _, config, specs = next(r for r in scenario_runs() if r[0] == where)
    lesson = EngineLesson.replay(config, specs, 0, model, tok)
    lesson.run_to_end()
    paged, contiguous = lesson.twins.outputs()
    assert len(paged) == len(specs)
    for spec, p, c in zip(specs, paged, contiguous):
        for side in (p, c):
            for sample in side.samples or [side.token_ids]:
                assert wrong_reason(spec, sample, tok) is None, (where, wrong_reason(spec, sample, tok))


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_bug_lab_reference_is_right_and_every_fault_visibly_drifts(task):
    """The bug lab's reference column (fault-free contiguous twin) is right for every fault's scenario, and every
    fault changes some request's text (the decode position's subtle drift: its logits): the drift is there to see."""
    model, tok = shipped()
    for fault in [None, *Fault]:
        scenario = model_scenario(fault, task, tok)
        run = run_fault(model, tok, fault, scenario)
        for prompt, n, ref in zip(scenario.prompts, scenario.max_tokens, run.contiguous):
            if task == "recall":  # BOS text SEP, as token ids
                assert prompt[-1] == SEP
                prompt = tok.decode(prompt[1:-1])
            spec = RequestSpec(prompt, task, max_tokens=n)
            assert wrong_reason(spec, ref.token_ids, tok) is None, (fault, wrong_reason(spec, ref.token_ids, tok))
        if fault is Fault.POSITION_OFF_BY_ONE:  # its catalogued symptom is a subtle drift: the logits, not a typo
            assert run.max_diff > 1e-2 * max(1.0, run.verdict.max_abs_logit), "position_off_by_one left no trace"
        elif fault is not None:
            assert [p.text for p in run.paged] != [c.text for c in run.contiguous], f"{fault.value} left no typo"


@pytest.mark.slow
def test_cli_examples_count_right():
    """Every documented generate example with the shipped model continues its prompt's pattern, token for token."""
    model, tok = shipped()
    for where, prompt, max_tokens in cli_examples():
        engine = LLMEngine(model, tok, CacheConfig(block_size=16))
        out = engine.generate([prompt], SamplingParams(max_tokens=max_tokens))[0]
        spec = RequestSpec(prompt, "continue", max_tokens=max_tokens)
        assert wrong_reason(spec, out.token_ids, tok) is None, (where, wrong_reason(spec, out.token_ids, tok))
