"""Paged decode kernels from outside this project, as extra rungs of the kernel ladder (CUDA only).
`python -m benchmarks external [--batch B --context-len N --block-size S --json]`.

    flash_attn      FlashAttention's `flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table)`;
                    its paged k_cache / v_cache are [num_blocks, page_block_size, num_kv_heads, head_dim]: ours.
    flashinfer      FlashInfer's `BatchDecodeWithPagedKVCacheWrapper` in the "NHD" layout (again ours), the block
                    tables given as a CSR page table: indptr, indices, last_page_len (`flashinfer_page_table`).
    flex_attention  PyTorch's flex_attention over the whole pool seen as one long K/V sequence, a mask keeping each
                    query to the slots its sequence owns (`slot_owners`); attention does not care about key order.

Each rung reads the same paged pool as the ladder's rungs (`benchmarks.kernels.make_case_data`), is checked against
`contiguous_attention_decode` first and timed only if it matches. FlashAttention and FlashInfer run in float16 (they
have no float32 kernels), checked at float16's tolerance. Where a rung cannot run, its `reason` says why (no CUDA
GPU, the package is missing, or the kernel's own refusal, e.g. a page size it does not take) and nothing is timed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from dataclasses import asdict, dataclass, field

import torch

from paged.addressing import blocks_needed_tensor, slot_mapping
from paged.attention import contiguous_attention_decode
from .kernels import KernelCase, _time_interleaved, make_case_data

EXTERNAL_RUNGS = ("flash_attn", "flashinfer", "flex_attention")
PACKAGES = {"flash_attn": "flash_attn", "flashinfer": "flashinfer", "flex_attention": "torch.nn.attention.flex_attention"}
HALF_TOLERANCE, FULL_TOLERANCE = 1e-2, 1e-4  # relative error allowed against the float32 reference


@dataclass
class ExternalRung:
    """One outside kernel on one case: skipped (`reason`), or checked (ok, rel_err) and then timed (ms, x_sdpa)."""

    name: str
    dtype: str
    reason: str | None = None  # in English (logs, the CLI); `code` and `detail` say the same for a UI to translate
    code: str | None = None    # "no_cuda" (detail: device), "missing" (package), "refused" (message)
    detail: dict = field(default_factory=dict)
    ok: bool = False
    rel_err: float | None = None
    ms: float | None = None
    x_sdpa: float | None = None

    @property
    def ran(self) -> bool:
        return self.reason is None


# --- the page tables the outside kernels want, from ours -----------------------------------------------------------
def flashinfer_page_table(block_tables, context_lens, block_size: int
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Our padded block tables [B, max_blocks] and context_lens [B] as FlashInfer's CSR page table (int32):
    indptr [B + 1] (sequence b's pages are indices[indptr[b]:indptr[b + 1]]), indices [pages in use] (physical
    blocks, in logical order) and last_page_len [B] (tokens in each sequence's last page, 1 … block_size)."""
    tables = torch.as_tensor(block_tables).long().cpu()
    lens = torch.as_tensor(context_lens).long().cpu()
    pages = blocks_needed_tensor(lens, block_size)
    indptr = torch.zeros(len(lens) + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(pages, 0)
    indices = torch.cat([tables[b, :int(pages[b])] for b in range(len(lens))]).int()
    last = (lens - (pages - 1) * block_size).int()
    return indptr, indices, last


def slot_owners(block_tables, context_lens, block_size: int, num_slots: int) -> torch.Tensor:
    """[num_slots] int64: the batch row whose history each slot holds, -1 for slots nobody reads."""
    owner = torch.full((num_slots,), -1, dtype=torch.long)
    tables = torch.as_tensor(block_tables).long().cpu()
    for b, n in enumerate(torch.as_tensor(context_lens).tolist()):
        owner[slot_mapping(tables[b], 0, int(n), block_size)] = b
    return owner


# --- the adapters: our pool in, [B, num_heads, head_dim] out ---------------------------------------------------------
def flash_attn_decode(query, key_cache, value_cache, block_tables, context_lens, scale: float) -> torch.Tensor:
    from flash_attn import flash_attn_with_kvcache

    out = flash_attn_with_kvcache(query[:, None], key_cache, value_cache, cache_seqlens=context_lens.int(),
                                  block_table=block_tables.int(), softmax_scale=scale)
    return out[:, 0]


def flashinfer_decode(query, key_cache, value_cache, block_tables, context_lens, scale: float) -> torch.Tensor:
    import flashinfer

    block_size, num_kv_heads, head_dim = key_cache.shape[1:]
    indptr, indices, last = (x.to(query.device) for x in
                             flashinfer_page_table(block_tables, context_lens, block_size))
    workspace = torch.empty(128 << 20, dtype=torch.uint8, device=query.device)
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
    wrapper.plan(indptr, indices, last, query.shape[1], num_kv_heads, head_dim, block_size,
                 q_data_type=query.dtype, kv_data_type=key_cache.dtype, sm_scale=scale)
    return wrapper.run(query, (key_cache, value_cache))


def flex_decode(query, key_cache, value_cache, block_tables, context_lens, scale: float,
                compile: bool = True) -> torch.Tensor:
    """All B decode queries as one query sequence over the pool as one K/V sequence of num_slots tokens; query row
    b may read a slot only if row b's history holds it. compile=False runs flex_attention eagerly (any device,
    slow: it materialises every score): the tests check the adapter that way on a CPU."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    num_blocks, block_size, num_kv_heads, head_dim = key_cache.shape
    num_slots = num_blocks * block_size
    owner = slot_owners(block_tables, context_lens, block_size, num_slots).to(query.device)

    def mine(b, h, q_idx, kv_idx):
        return owner[kv_idx] == q_idx

    mask = create_block_mask(mine, None, None, query.shape[0], num_slots, device=query.device)
    k = key_cache.reshape(num_slots, num_kv_heads, head_dim).transpose(0, 1)[None]  # [1, num_kv_heads, slots, D]
    v = value_cache.reshape(num_slots, num_kv_heads, head_dim).transpose(0, 1)[None]
    attend = torch.compile(flex_attention) if compile else flex_attention
    out = attend(query.transpose(0, 1)[None], k, v, block_mask=mask, scale=scale,
                 enable_gqa=query.shape[1] != num_kv_heads)
    return out[0].transpose(0, 1)  # [B, num_heads, head_dim]


ADAPTERS = {"flash_attn": flash_attn_decode, "flashinfer": flashinfer_decode, "flex_attention": flex_decode}


def why_not(name: str, device: torch.device) -> tuple[str, dict] | None:
    """Why outside kernel `name` cannot run on `device` here, as (code, detail); None when it can be tried."""
    if name not in EXTERNAL_RUNGS:
        raise ValueError(f"unknown outside kernel {name!r}; choose one of {EXTERNAL_RUNGS}")
    if device.type != "cuda":
        return "no_cuda", {"device": device.type}
    package = PACKAGES[name]
    try:
        found = importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:
        found = False
    return None if found else ("missing", {"package": package.split(".")[0]})


REASONS = {"no_cuda": "needs a CUDA GPU; this run is on {device}", "missing": "the {package} package is not installed",
           "refused": "the kernel refused this case: {message}"}


def _skip(rung: ExternalRung, code: str, detail: dict) -> None:
    rung.code, rung.detail, rung.reason = code, detail, REASONS[code].format(**detail)


def run_external(case: KernelCase, device: torch.device | str, reps: int = 5, warmup: int = 1,
                 names: tuple[str, ...] = EXTERNAL_RUNGS) -> list[ExternalRung]:
    """Each outside kernel on `case` (see the module docstring): skipped with its reason, or checked against the
    float32 contiguous reference and, when it matches, timed next to contiguous SDPA in one interleaved run."""
    device = torch.device(device)
    out = [ExternalRung(n, "float16" if n != "flex_attention" else "float32") for n in names]
    for rung in out:
        why = why_not(rung.name, device)
        if why is not None:
            _skip(rung, *why)
    if all(not r.ran for r in out):
        return out
    data = make_case_data(case, device)
    keys, values = data["keys"].transpose(1, 2), data["values"].transpose(1, 2)  # [B, ctx, num_kv_heads, D]
    ref = contiguous_attention_decode(data["query"], keys, values, data["context_lens"].tolist()).double()
    scale = 1.0 / math.sqrt(case.head_dim)
    half = {k: data[k].half() for k in ("query", "key_cache", "value_cache")}
    fns = {"sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(
        data["query"][:, :, None], data["keys"], data["values"], enable_gqa=case.num_heads != case.num_kv_heads)}
    for rung in out:
        if not rung.ran:
            continue
        src = half if rung.dtype == "float16" else data
        fn = (lambda a=ADAPTERS[rung.name], s=src: a(s["query"], s["key_cache"], s["value_cache"],
                                                      data["block_tables"], data["context_lens"], scale))
        try:
            err = ((fn().double() - ref).abs().max() / ref.abs().max()).item()
        except Exception as exc:  # noqa: BLE001  (an outside kernel's refusal is a result to show, not a crash)
            _skip(rung, "refused", {"message": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"})
            continue
        rung.rel_err = err
        rung.ok = err < (HALF_TOLERANCE if rung.dtype == "float16" else FULL_TOLERANCE)
        if rung.ok:
            fns[rung.name] = fn
    if len(fns) > 1:
        ms = _time_interleaved(fns, reps, warmup, device)
        for rung in out:
            if rung.name in ms:
                rung.ms, rung.x_sdpa = ms[rung.name], ms[rung.name] / ms["sdpa"]
    return out


def main(argv: list[str] | None = None) -> int:
    """One line per outside kernel: skipped with its reason, or its check and time next to contiguous SDPA."""
    p = argparse.ArgumentParser(prog="python -m benchmarks external", description=__doc__.split("\n")[0])
    for name, default in (("batch", 4), ("context_len", 1024), ("num_heads", 8), ("num_kv_heads", 2),
                          ("head_dim", 64), ("block_size", 16), ("reps", 5)):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    args = p.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    case = KernelCase(args.batch, args.context_len, args.num_heads, args.num_kv_heads, args.head_dim,
                      args.block_size)
    rungs = run_external(case, device, reps=args.reps)
    if args.json:
        print(json.dumps([asdict(r) for r in rungs], indent=1))
    for r in rungs if not args.json else []:
        if not r.ran:
            print(f"{r.name:15s} skipped: {r.reason}")
        else:
            timing = f"{r.ms:.3f} ms, {r.x_sdpa:.2f}x sdpa" if r.ms is not None else "not timed"
            print(f"{r.name:15s} {'ok' if r.ok else 'WRONG'} (rel err {r.rel_err:.1e}, {r.dtype}) {timing}")
    return 0 if all(r.ok for r in rungs if r.ran) else 1
