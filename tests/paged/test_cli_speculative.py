"""`python -m paged generate … --speculative ngram:K --json`: the same tokens as without it, plus each prompt's
guess counts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from paged.__main__ import generate_main

pytestmark = pytest.mark.cli

ROOT = Path(__file__).resolve().parents[2]


def test_generate_speculative_json():
    """--speculative ngram:4 --json: token_ids equal plain greedy decoding's (a library run without speculation);
    the repeated word's guesses are all kept, the count's are proposed rarely; accepted never exceeds proposed."""
    prompts = ["go go go go", "1 2 3 4 5"]
    proc = subprocess.run([sys.executable, "-m", "paged", "generate", *prompts, "--max-tokens", "16",
                           "--speculative", "ngram:4", "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    from paged.config import SamplingParams
    from paged.engine import LLMEngine
    from paged.model import load_model
    model, tok = load_model(None)
    outs = LLMEngine(model, tok).generate(prompts, SamplingParams(max_tokens=16))
    assert [r["token_ids"] for r in rows] == [o.token_ids for o in outs]
    assert rows[0]["num_accepted"] == rows[0]["num_proposed"] >= 8
    assert all(0 <= r["num_accepted"] <= r["num_proposed"] for r in rows)


def test_generate_speculative_refuses_a_bad_value(capsys):
    """A malformed --speculative is named in a one-line error (exit code 2), not a traceback."""
    assert generate_main(["hi", "--speculative", "ngram:x", "--json"]) == 2
    assert "speculative must look like 'ngram:K'" in capsys.readouterr().err


def test_generate_without_speculative_adds_no_fields(capsys):
    """Without the flag, --json keeps its fields (no guess counts)."""
    assert generate_main(["hi", "--max-tokens", "2", "--json"]) == 0
    assert "num_proposed" not in json.loads(capsys.readouterr().out)[0]
