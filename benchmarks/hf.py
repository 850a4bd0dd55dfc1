"""transformers' side of `python -m benchmarks engine`: its own CausalLM on our weights, timed by the same clocks
and device syncs as the engine (engine.py and workloads.py both use these)."""

from __future__ import annotations

import importlib.util
import time

import torch

# seconds of this process, all its threads: on a shared CPU machine, where other work steals the cores, it moves far
# less from run to run than wall time does, and it is what the work costs.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def ratios(ours: list[float], theirs: list[float]) -> tuple[float, float, float]:
    """Per repetition, their seconds over ours (= our tok/s over theirs): (median, min, max). Raises ValueError
    when the lists differ in length."""
    each = sorted(t / o for o, t in zip(ours, theirs, strict=True))
    return each[len(each) // 2], each[0], each[-1]


def with_ratio(row: dict, key: str, ours: list[float], theirs: list[float]) -> None:
    """Set row[key] and row[key + "_min" / "_max"] to ratios(ours, theirs)."""
    row[key], row[key + "_min"], row[key + "_max"] = ratios(ours, theirs)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def hf_available() -> bool:
    """True when transformers can be imported (the HF column is then measured)."""
    try:  # absent, broken, or blocked (as the GPU image check does): no HF column
        if importlib.util.find_spec("transformers") is None:
            return False
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def hf_twin(model):
    """transformers' own CausalLM class for model.config (Llama / Qwen2 / Qwen3), holding `model`'s weights (the
    parameter names are the same), on its device, in its dtype, eval mode, SDPA attention."""
    import transformers

    from paged.model.hf_config import config_to_hf_dict

    raw = config_to_hf_dict(model.config)
    config = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    config._attn_implementation = "sdpa"
    param = next(model.parameters())
    hf = transformers.AutoModelForCausalLM.from_config(config, dtype=param.dtype).to(param.device).eval()
    hf.load_state_dict(model.state_dict(), strict=True)
    hf.generation_config.eos_token_id = None  # generate every requested token, as ignore_eos does in the engine
    return hf


def run_hf(hf, token_ids: list[list[int]], max_tokens: int, clock: str = "wall") -> tuple[float, list[list[int]]]:
    """Seconds (of `clock`) for transformers' greedy `generate` (static batch, its own cache) to add max_tokens
    tokens to every prompt (left-padded, with an attention mask), and the new tokens of each prompt."""
    device = next(hf.parameters()).device
    width = max(len(ids) for ids in token_ids)
    inputs = torch.zeros(len(token_ids), width, dtype=torch.long)
    mask = torch.zeros(len(token_ids), width, dtype=torch.long)
    for row, ids in enumerate(token_ids):
        inputs[row, width - len(ids):] = torch.tensor(ids)
        mask[row, width - len(ids):] = 1
    inputs, mask = inputs.to(device), mask.to(device)
    _sync(device)
    t0 = CLOCKS[clock]()
    with torch.inference_mode():
        out = hf.generate(inputs, attention_mask=mask, max_new_tokens=max_tokens, min_new_tokens=0,
                          do_sample=False, pad_token_id=0)
    _sync(device)
    return CLOCKS[clock]() - t0, out[:, width:].tolist()
