"""Helpers the tests share (import as `from helpers import ...`): independent references for attention
(naive_decode, rel_err, scattered_tables), the tiny random model (tiny_model) and tolerances that scale with the magnitude compared.

fp32 results differ in their last bits between CPUs (an AVX-512 / AMX machine sums in another order than an AVX2
one), so an absolute bound like 1e-5 on logits of size ~10 fails on some machines and not others. These helpers
bound the difference by `rel * max(1, max |reference|)`: relative for large values, absolute (rel) near zero.
A real cache mistake moves logits by ~1e-1, so rel = 1e-5 still catches it by four orders of magnitude.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
from pathlib import Path

import torch

from paged.block_manager import BlockManager
from paged.config import ModelConfig, SamplingParams
from paged.engine import LLMEngine
from paged.model import ByteTokenizer, TinyLlama
from paged.sequence import Sequence


def scaled_atol(reference: torch.Tensor | float, rel: float = 1e-5) -> float:
    """rel * max(1, max |reference|): an absolute tolerance that grows with the values it guards."""
    magnitude = reference.detach().abs().max().item() if isinstance(reference, torch.Tensor) else abs(reference)
    return rel * max(1.0, magnitude)


def max_abs_diff(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |actual - expected|, computed in float64 (shapes must match)."""
    assert actual.shape == expected.shape, f"shapes differ: {tuple(actual.shape)} vs {tuple(expected.shape)}"
    return (actual.double() - expected.double()).abs().max().item()


def assert_close_scaled(actual: torch.Tensor, expected: torch.Tensor, rel: float = 1e-5) -> None:
    """Assert max |actual - expected| <= rel * max(1, max |expected|); `expected` is the independent reference."""
    diff, atol = max_abs_diff(actual, expected), scaled_atol(expected, rel)
    assert diff <= atol, f"max |diff| {diff:.3e} > {atol:.3e} (rel {rel:g} of max |expected| {atol / rel:.3g})"


def assert_far_scaled(actual: torch.Tensor, expected: torch.Tensor, rel: float = 1e-3) -> None:
    """Assert max |actual - expected| > rel * max(1, max |expected|): a mistake really moved the result."""
    diff, atol = max_abs_diff(actual, expected), scaled_atol(expected, rel)
    assert diff > atol, f"max |diff| {diff:.3e} <= {atol:.3e}: the change left no visible trace"


@torch.no_grad()
def prompt_logits_scale(model: torch.nn.Module, tokenizer, prompts) -> float:
    """max |logits| of a no-cache forward over each prompt: the magnitude a twin comparison of that model sees."""
    scale = 0.0
    for prompt in prompts:
        ids = tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        scale = max(scale, model(torch.tensor([ids])).abs().max().item())
    return scale


# --- independent references for the attention tests ---------------------------------------------------------
def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref|, computed in float64."""
    out, ref = out.double(), ref.double()
    return ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()


def naive_decode(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float | None = None):
    """An independent float64 decode attention for one sequence: explicit loops over heads, no shared code.

    query [num_heads, head_dim]; keys/values [context_len, num_kv_heads, head_dim] -> [num_heads, head_dim]
    """
    num_heads, head_dim = query.shape
    group = num_heads // keys.shape[1]
    scale = head_dim ** -0.5 if scale is None else scale
    out = torch.empty(num_heads, head_dim, dtype=torch.float64)
    for h in range(num_heads):
        k = keys[:, h // group].double()
        s = (k @ query[h].double()) * scale
        w = torch.exp(s - s.max())
        out[h] = (w / w.sum()) @ values[:, h // group].double()
    return out


def scattered_tables(rng: random.Random, num_blocks: int, lens: list[int], block_size: int) -> list[list[int]]:
    """Disjoint, shuffled block tables with exactly enough blocks for each context length."""
    ids = list(range(num_blocks))
    rng.shuffle(ids)
    tables, at = [], 0
    for n in lens:
        need = -(-n // block_size)
        tables.append(ids[at:at + need])
        at += need
    assert at <= num_blocks, "pool too small for the requested lengths"
    return tables


def tiny_model(hidden_size: int = 64, num_hidden_layers: int = 2, num_attention_heads: int = 4,
               num_key_value_heads: int = 2, seed: int = 0) -> tuple[TinyLlama, ByteTokenizer]:
    """A random, untrained TinyLlama (intermediate size 2 * hidden_size, 256 positions; torch.manual_seed(seed)
    just before it is built, so the same arguments give the same weights) in eval mode, and the byte tokenizer:
    fast, and any cache mistake changes its output."""
    torch.manual_seed(seed)
    cfg = ModelConfig(hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=num_hidden_layers,
                      num_attention_heads=num_attention_heads, num_key_value_heads=num_key_value_heads,
                      max_position_embeddings=256)
    return TinyLlama(cfg).eval(), ByteTokenizer()


def free_port_block(n: int) -> int:
    """A port P such that P .. P + n are all free on 127.0.0.1 (checked by binding each)."""
    for _ in range(50):
        base = random.randint(20000, 60000 - n)
        socks = []
        try:
            for p in range(base, base + n + 1):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports found")


def running_seq(bm: BlockManager, seq_id: int, num_tokens: int) -> Sequence:
    """A sequence of tokens 1..num_tokens allocated in bm with all of them cached, as if prefill had run."""
    seq = Sequence(seq_id, list(range(1, num_tokens + 1)))
    bm.allocate(seq)
    seq.cached_token_count = num_tokens
    return seq


def mistral_window_dir(path: Path, window: int | None) -> Path:
    """The shipped weights laid out as a MistralForCausalLM directory whose config.json sets
    sliding_window = window (no tokenizer file: bytes, as the shipped model reads them).
    Returns path."""
    from paged.model.io import DEFAULT_DIR

    path.mkdir()
    raw = json.loads((DEFAULT_DIR / "config.json").read_text())
    raw.update(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=window)
    (path / "config.json").write_text(json.dumps(raw))
    shutil.copy(DEFAULT_DIR / "model.safetensors", path / "model.safetensors")
    return path


class FakeVLLM:
    """Stands in for VLLMProcess: the engine's own greedy tokens (the first `off` sequences changed), given seconds
    in turn, and the order in which it was called among the engine's runs."""

    def __init__(self, model, tok, seconds: list[float], calls: list[str], off: int = 0) -> None:
        """model, tok: what the engine runs; seconds: what each generate reports, in turn."""
        self.model, self.tok, self.seconds, self.calls, self.off = model, tok, list(seconds), calls, off
        self.version = "stub"

    def generate(self, prompts: list[list[int]], max_tokens: int) -> tuple[float, list[list[int]]]:
        """(the next given seconds, the engine's greedy tokens with the first `off` rows changed)."""
        self.calls.append("vllm")
        engine = LLMEngine(self.model, self.tok, attn_impl="gather", record=False)
        outs = engine.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
        tokens = [o.token_ids for o in outs]
        tokens[:self.off] = [[(t + 1) % 259 for t in row] for row in tokens[:self.off]]
        return self.seconds.pop(0), tokens

    def close(self) -> None:
        """Nothing to stop."""


def named_numbers(values: dict) -> dict[str, list[int]]:
    """The ints a sentence's values name, by field: an int as [n], a list or tuple of ints as itself (other values,
    text and "—", are left out). What a words test recomputes from the state the sentence describes."""
    out: dict[str, list[int]] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            out[key] = [value]
        elif isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            out[key] = list(value)
    return out


def import_edges(root: Path, load_time_only: bool = False) -> dict[str, set[str]]:
    """module of the package at `root` -> the modules of it that it imports (any import statement
    outside `if TYPE_CHECKING:`; `from . import x` imports submodule x; a submodule's import of its
    own parent packages aside). load_time_only: only what runs when the module loads (top-level
    statements and the bodies of top-level if / try), imports inside functions aside."""
    import ast

    mods = {".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in root.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if load_time_only:
            nodes, todo = [], list(tree.body)
            while todo:
                node = todo.pop()
                nodes.append(node)
                if isinstance(node, (ast.If, ast.Try)):  # their bodies run at load time
                    if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
                        todo += node.body
                    todo += getattr(node, "orelse", []) + [n for h in getattr(node, "handlers", [])
                                                           for n in h.body]
        else:
            typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                           and "TYPE_CHECKING" in ast.unparse(node.test)
                           for b in node.body for n in ast.walk(b)}
            nodes = [n for n in ast.walk(tree) if id(n) not in typing_only]
        for node in nodes:
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                names = ([f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                         or [target])
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                for i in range(2, len(parts) + 1):  # importing a.b.c loads a.b first
                    t = ".".join(parts[:i])
                    if t in mods and t != mod and not mod.startswith(t + "."):
                        edges[mod].add(t)
    return edges


def import_circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of two or more modules that import one another (strongly connected), sorted."""
    def reach(start: str) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for w in edges[todo.pop()] - seen:
                seen.add(w)
                todo.append(w)
        return seen

    reaches = {m: reach(m) for m in edges}
    groups = {tuple(sorted(m2 for m2 in reaches[m] if m in reaches[m2])) for m in edges}
    return sorted(list(g) for g in groups if len(g) > 1)


def _reachable(obj, skip=()):
    """Every object reachable from `obj` through dicts, lists, tuples, sets and object attributes (ids in `skip`
    not entered; a tensor or a generator is yielded, not entered)."""
    import torch

    seen, todo = set(skip), [obj]
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, (str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(o))
        yield o
        if isinstance(o, (torch.Tensor, torch.Generator)):
            continue
        if isinstance(o, dict):
            todo.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            todo.extend(o)
        elif hasattr(o, "__dict__"):
            todo.extend(vars(o).values())
        elif hasattr(o, "__slots__"):
            todo.extend(getattr(o, name) for name in o.__slots__ if hasattr(o, name))


def tensor_bytes(obj, skip=()) -> int:
    """Bytes of the distinct tensor storages reachable from `obj` (ids in `skip` not entered): an independent
    count to hold lessons.rewind.copied_bytes against."""
    import torch

    storages = {o.untyped_storage().data_ptr(): o.untyped_storage().nbytes()
                for o in _reachable(obj, skip) if isinstance(o, torch.Tensor)}
    return sum(storages.values())


def generator_state_bytes(obj, skip=()) -> int:
    """Bytes of the states of the torch.Generators reachable from `obj` (ids in `skip` not entered): what a deep
    copy of `obj` copies besides its tensors."""
    import torch

    return sum(o.get_state().numel() for o in _reachable(obj, skip) if isinstance(o, torch.Generator))
