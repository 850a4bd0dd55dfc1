"""`python -m paged generate ... --beam-width K --json`: each prompt's object gains "beams", best first, equal to
transformers' beam search."""

from __future__ import annotations

import json

import pytest
import torch

from paged.__main__ import main
from paged.model.tokenizer import EOS, ByteTokenizer

pytestmark = pytest.mark.engine


@torch.no_grad()
def test_beam_width_json_matches_transformers(capsys):
    """--beam-width 4 --length-penalty 2 --json in a pool that holds one group alone: per prompt, K beams whose
    tokens and scores are transformers', best first, token_ids / text are the best beam's, and a group was
    preempted (num_preemptions)."""
    transformers = pytest.importorskip("transformers")
    from paged.model.io import DEFAULT_DIR
    hf = transformers.LlamaForCausalLM.from_pretrained(DEFAULT_DIR, attn_implementation="eager").eval()
    prompts = ["Beam", "hello"]
    assert main(["generate", *prompts, "--json", "--beam-width", "4", "--length-penalty", "2", "--max-tokens", "5",
                 "--block-size", "4", "--num-blocks", "12"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["prompt"] for r in records] == prompts and sum(r["num_preemptions"] for r in records) > 0
    for record in records:
        ids = ByteTokenizer().encode(record["prompt"])
        out = hf.generate(torch.tensor([ids]), num_beams=4, num_return_sequences=4, do_sample=False,
                          early_stopping=True, length_penalty=2.0, max_new_tokens=5, return_dict_in_generate=True,
                          output_scores=True, pad_token_id=EOS, eos_token_id=EOS)
        theirs = [r[:r.index(EOS) + 1] if EOS in r else r for r in out.sequences[:, len(ids):].tolist()]
        assert [b["token_ids"] for b in record["beams"]] == theirs
        scores = torch.tensor([b["score"] for b in record["beams"]])
        assert torch.allclose(scores, out.sequences_scores, rtol=1e-4)
        assert record["token_ids"] == theirs[0] and record["text"] == ByteTokenizer().decode(theirs[0])


def test_beam_width_refusals_exit_2(capsys):
    """A width of 1, a temperature, or a pool too small for the beams exits with status 2 and a one-line error."""
    for extra in (["--beam-width", "1"], ["--beam-width", "2", "--temperature", "0.5"],
                  ["--beam-width", "4", "--num-blocks", "4", "--block-size", "4"]):
        assert main(["generate", "hi", "--json", *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and ("beam_width" in err or "temperature" in err) and "Traceback" not in err


def test_beam_width_refuses_flags_it_would_ignore():
    """--beam-width with --speculative or --preemption swap exits 2 naming the flag, instead of ignoring it."""
    from paged.__main__ import generate_main
    import contextlib, io
    for extra in (["--speculative", "ngram:2"], ["--preemption", "swap"]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert generate_main(["ab", "--beam-width", "2", "--max-tokens", "2", "--quiet", *extra]) == 2
        assert extra[0] in err.getvalue()


@pytest.mark.parametrize("value", ["٣", "²", "３"])
def test_integer_flags_take_ascii_digits_only(value, capsys):
    """--beam-width / --max-tokens / --block-size in other scripts' digits exit 2 naming the flag
    (argparse's int() would read "٣" as 3)."""
    for flag in ("--beam-width", "--max-tokens", "--block-size"):
        with pytest.raises(SystemExit) as exit_:
            main(["generate", "hi", "--json", "--beam-width", "2", flag, value])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and flag in err and "ASCII digits" in err
