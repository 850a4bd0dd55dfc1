"""Outside paged kernels as extra rungs (benchmarks.external): the page-table conversions agree with our address
chain, the flex_attention adapter reads our pool correctly (run eagerly on the CPU), and without a CUDA GPU every
rung is skipped with its reason and nothing is timed."""

from __future__ import annotations

import functools
import random

import pytest
import torch

import benchmarks.external as external
from paged.addressing import pad_block_tables, slot_mapping
from benchmarks.external import (EXTERNAL_RUNGS, flashinfer_page_table, flex_decode, run_external, slot_owners,
                                 why_not)
from benchmarks.kernels import KernelCase, make_case_data

from helpers import naive_decode, scattered_tables

pytestmark = pytest.mark.benchmarks


@pytest.mark.parametrize("seed", range(6))
def test_flashinfer_page_table_addresses_every_token_like_slot_mapping(seed):
    """Token t of sequence b lives at indices[indptr[b] + t // block_size] * block_size + t % block_size, the same
    slot our slot_mapping gives; last_page_len counts the tokens of the last page (1 … block_size)."""
    rng = random.Random(seed)
    block_size = rng.choice([1, 2, 4, 16])
    lens = [rng.randint(1, 40) for _ in range(rng.randint(1, 5))]
    tables = scattered_tables(rng, 200, lens, block_size)
    indptr, indices, last = flashinfer_page_table(pad_block_tables(tables), lens, block_size)
    assert indptr.dtype == indices.dtype == last.dtype == torch.int32 and indptr[0] == 0
    for b, n in enumerate(lens):
        pages = indices[indptr[b]:indptr[b + 1]].tolist()
        assert pages == tables[b]
        slots = [pages[t // block_size] * block_size + t % block_size for t in range(n)]
        assert slots == slot_mapping(tables[b], 0, n, block_size).tolist()
        assert 1 <= last[b] <= block_size and (len(pages) - 1) * block_size + last[b] == n


def test_slot_owners_marks_exactly_the_history():
    tables, lens, bs = [[3, 0], [1]], [6, 2], 4
    owner = slot_owners(pad_block_tables(tables), lens, bs, 16)
    assert owner.tolist() == [0, 0, -1, -1, 1, 1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0]


EAGER_FLEX = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


@EAGER_FLEX
@pytest.mark.parametrize("case", [KernelCase(3, 37, 4, 2, 16, 4), KernelCase(2, 16, 2, 2, 8, 16)])
def test_flex_adapter_reads_our_pool(case):
    """flex_attention over the pool with the ownership mask equals a float64 loop over each sequence's
    contiguous K/V (eager flex: slow but exact, so this runs on a CPU)."""
    data = make_case_data(case, torch.device("cpu"))
    out = flex_decode(data["query"], data["key_cache"], data["value_cache"], data["block_tables"],
                      data["context_lens"], case.head_dim ** -0.5, compile=False)
    for b in range(case.batch):
        ref = naive_decode(data["query"][b], data["keys"][b].transpose(0, 1), data["values"][b].transpose(0, 1))
        torch.testing.assert_close(out[b].double(), ref, rtol=0, atol=1e-5 * max(1.0, ref.abs().max().item()))


def test_without_a_gpu_every_rung_is_skipped_with_its_reason():
    rungs = run_external(KernelCase(2, 64, 4, 2, 16, 16), "cpu")
    assert [r.name for r in rungs] == list(EXTERNAL_RUNGS)
    for r in rungs:
        assert not r.ran and r.code == "no_cuda" and r.detail == {"device": "cpu"} and "CUDA GPU" in r.reason
        assert r.ms is None and r.rel_err is None


def test_cli_says_why_each_rung_was_skipped(capsys):
    """`python -m benchmarks external` on a CPU: one line per kernel with its reason; exit status 0."""
    import benchmarks as bench

    assert bench.main(["external", "--device", "cpu", "--batch", "1", "--context-len", "32"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == list(EXTERNAL_RUNGS)
    assert all("skipped: needs a CUDA GPU; this run is on cpu" in ln for ln in lines)


def test_a_missing_package_is_named(monkeypatch):
    monkeypatch.setattr(external.importlib.util, "find_spec", lambda name: None)
    assert why_not("flashinfer", torch.device("cuda")) == ("missing", {"package": "flashinfer"})
    with pytest.raises(ValueError, match="unknown outside kernel"):
        why_not("xformers", torch.device("cuda"))


@EAGER_FLEX
def test_a_refusing_kernel_is_reported_and_a_correct_one_is_timed(monkeypatch):
    """The pipeline past the GPU gate, on a CPU: a kernel that raises (flash-attn's page-size check) becomes a
    skipped rung quoting it; a wrong one is not timed; the eager flex adapter is checked and then timed."""
    def refuse(*args, **kwargs):
        raise RuntimeError("Paged KV cache block size must be divisible by 256")

    def wrong(query, *args, **kwargs):
        return torch.zeros_like(query)

    monkeypatch.setattr(external, "why_not", lambda name, device: None)
    monkeypatch.setitem(external.ADAPTERS, "flash_attn", refuse)
    monkeypatch.setitem(external.ADAPTERS, "flashinfer", wrong)
    monkeypatch.setitem(external.ADAPTERS, "flex_attention", functools.partial(flex_decode, compile=False))
    monkeypatch.setattr(torch.Tensor, "half", lambda self: self)  # keep float32 data: CPU half matmuls are slow
    fa, fi, flex = run_external(KernelCase(2, 32, 4, 2, 16, 16), "cpu", reps=2, warmup=0)
    assert fa.code == "refused" and "divisible by 256" in fa.reason and fa.ms is None
    assert fi.ran and not fi.ok and fi.rel_err > 0.1 and fi.ms is None
    assert flex.ran and flex.ok and flex.rel_err < 1e-5 and flex.ms > 0 and flex.x_sdpa > 0
