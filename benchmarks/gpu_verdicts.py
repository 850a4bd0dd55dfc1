"""Verdicts and the text summary of `benchmarks.gpu_check`, read off its report's sections.

Two kinds of verdict: a "check" is correctness (a failed one fails the run); a "target" is a performance goal,
reported as met or missed. A verdict whose data is missing (section not run, no triton, no GPU) is "skip" with
the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

TRITON_TARGET_PCT = 70.0  # triton decode KV GB/s as % of the device's copy bandwidth
TARGET_BATCHES = (16, 64)  # ... over these batch sizes (inclusive)
TARGET_CONTEXTS = (2048, 8192)  # ... and these context lengths (inclusive)
ENGINE_TARGET_BATCH = 32  # the engine on cuda at least as fast as on the CPU at this batch


@dataclass
class Verdict:
    name: str
    kind: str  # "check" or "target"
    status: str  # "pass", "fail" or "skip"
    detail: str


def _check(name: str, ok: bool, detail: str) -> Verdict:
    return Verdict(name, "check", "pass" if ok else "fail", detail)


def _parity(rows: list[dict]) -> Verdict:
    bad = [r for r in rows if not r["ok"]]
    worst = {}
    for r in rows:
        if r["rel_err"] is not None:
            worst[r["dtype"]] = max(worst.get(r["dtype"], 0.0), r["rel_err"])
    detail = (f"{len(rows) - len(bad)}/{len(rows)} cases within tolerance; impls "
              f"{', '.join(sorted({r['impl'] for r in rows}))}; block sizes "
              f"{', '.join(map(str, sorted({r['block_size'] for r in rows})))}; worst rel err "
              + ", ".join(f"{d} {e:.1e}" for d, e in worst.items()))
    for r in bad[:5]:
        detail += (f"\n    FAILED {r['impl']} {r['dtype']} heads {r['num_heads']}/{r['num_kv_heads']} head_dim "
                   f"{r['head_dim']} block_size {r['block_size']}: " + (r.get("error") or f"rel err {r['rel_err']:.2e}"
                                                                        f" > {r['tol']:.0e}"))
    return _check("parity sweep (every impl vs the contiguous reference)", bool(rows) and not bad, detail)


def _engine(e: dict) -> list[Verdict]:
    twins = e["twins"]
    detail = "; ".join(f"{t['impl']}@{t['block_size']} {'same' if t['identical'] else 'DIFFERENT'} "
                       f"(max logits diff {t['max_logits_diff']:.1e})" for t in twins)
    out = [_check("engine twins: paged == contiguous, token for token", bool(twins) and
                  all(t["identical"] for t in twins), detail)]
    same = [n["same_tokens"] for n in e["no_cache"]]
    out.append(_check(f"engine ({e['default_impl']}) == the model's causal forward with no cache", all(same),
                      f"{sum(same)}/{len(same)} prompts give the same greedy tokens"))
    neg = e["negative_control"]
    out.append(_check("negative control: an injected fault is detected", neg["detected"],
                      f"{neg['fault']} with {neg['impl']}: max logits diff {neg['max_logits_diff']:.2e}"))
    pc = e["prefix_caching"]
    out.append(_check("prefix caching on == off", pc["same_tokens"] and pc["blocks_hit"] > 0,
                      f"tokens {'equal' if pc['same_tokens'] else 'DIFFER'}; {pc['blocks_hit']} blocks reused "
                      f"(block_size {pc['block_size']}, impl {pc['impl']})"))
    return out


def _kernels(k: dict, device: str) -> list[Verdict]:
    cases = k["bench"]["cases"]
    results = [(c["case"], r) for c in cases for r in c["results"]]
    bad = [f"{r['impl']} B={c['batch']} ctx={c['context_len']}" for c, r in results if not r["ok"]]
    out = [_check("bench kernels: every impl matches the reference", bool(results) and not bad,
                  f"{len(results) - len(bad)}/{len(results)} rows ok" + (f"; FAILED {', '.join(bad)}" if bad else ""))]
    name = (f"triton >= {TRITON_TARGET_PCT:.0f}% of copy bandwidth ({k['copy_bw_gbps']:.0f} GB/s) at B "
            f"{TARGET_BATCHES[0]}-{TARGET_BATCHES[1]}, ctx {TARGET_CONTEXTS[0]}-{TARGET_CONTEXTS[1]}")
    rows = [(c, r) for c, r in results if r["impl"] == "triton"
            and TARGET_BATCHES[0] <= c["batch"] <= TARGET_BATCHES[1]
            and TARGET_CONTEXTS[0] <= c["context_len"] <= TARGET_CONTEXTS[1]]
    if not rows:
        why = "needs a CUDA GPU" if not device.startswith("cuda") else "no triton rows in that range"
        out.append(Verdict(name, "target", "skip", why))
    else:
        met = all(r["pct_copy_bw"] >= TRITON_TARGET_PCT for _, r in rows)
        out.append(Verdict(name, "target", "pass" if met else "fail", "; ".join(
            f"B={c['batch']} ctx={c['context_len']}: {r['gbps']:.0f} GB/s = {r['pct_copy_bw']:.0f}%" for c, r in rows)))
    return out


def _bench(b: dict) -> list[Verdict]:
    rows = b["device"] + b.get("cpu", [])
    out = [_check("bench engine: paged and contiguous give the same tokens", bool(rows) and
                  all(r["identical"] for r in rows), f"{sum(r['identical'] for r in rows)}/{len(rows)} runs")]
    name = f"engine on cuda >= on the CPU at batch {ENGINE_TARGET_BATCH} (paged tok/s)"
    dev = {r["batch"]: r["paged_tok_s"] for r in b["device"]}
    cpu = {r["batch"]: r["paged_tok_s"] for r in b.get("cpu", [])}
    if ENGINE_TARGET_BATCH in dev and ENGINE_TARGET_BATCH in cpu:
        d, c = dev[ENGINE_TARGET_BATCH], cpu[ENGINE_TARGET_BATCH]
        out.append(Verdict(name, "target", "pass" if d >= c else "fail",
                           f"cuda {d:.0f} tok/s, cpu {c:.0f} tok/s ({d / c:.2f}x)"))
    else:
        out.append(Verdict(name, "target", "skip", "needs a CUDA GPU (and batch 32 in both runs)"))
    return out


def verdicts(report) -> list[Verdict]:
    """Every verdict the report's sections allow (a `gpu_check.Report`)."""
    s = report.sections
    out = [Verdict(f"section {name} ran to its end", "check", "fail", err) for name, err in report.errors.items()]
    if "parity" in s:
        out.append(_parity(s["parity"]))
    if "engine" in s:
        out += _engine(s["engine"])
    if "kernels" in s:
        out += _kernels(s["kernels"], report.device)
    if "bench" in s:
        out += _bench(s["bench"])
    return out


LABELS = {("check", "pass"): "PASS", ("check", "fail"): "FAIL", ("target", "pass"): "MET",
          ("target", "fail"): "MISSED"}


def format_summary(report) -> str:
    """The text summary: versions, each verdict on a line, the tables of both benches, what was skipped and why."""
    v = report.versions
    gpu = f"{v['gpu']} (sm {v['gpu_capability']})" if v.get("gpu") else "no GPU"
    lines = [f"gpu_check on {report.device}: {gpu}; torch {v['torch']}, triton {v['triton'] or 'not installed'}, "
             f"CUDA {v['cuda'] or 'none'}, python {v['python']}, {v['threads']} threads",
             f"{'quick' if report.quick else 'full'} sizes; seconds: "
             + ", ".join(f"{k} {t:.0f}" for k, t in report.seconds.items()), ""]
    for verdict in report.verdicts:
        label = LABELS.get((verdict.kind, verdict.status), "SKIP")
        lines.append(f"{label:<6} {verdict.kind:<6} {verdict.name}: {verdict.detail}")
    if "kernels" in report.sections:
        lines += ["", "bench kernels (KV GB/s; % bw = of x.sum() read bandwidth; pct_copy_bw in the JSON):",
                  report.sections["kernels"]["table"]]
    if "bench" in report.sections:
        from .engine import format_table

        for where, rows in report.sections["bench"].items():
            lines += ["", f"bench engine on {report.device if where == 'device' else 'cpu (1 thread)'}:",
                      format_table(rows)]
    if report.skipped:
        lines += ["", "skipped:"] + [f"  {what}: {why}" for what, why in report.skipped.items()]
    failed = [x.name for x in report.verdicts if x.kind == "check" and x.status == "fail"]
    lines += ["", "result: " + ("FAILED: " + "; ".join(failed) if failed else "OK, every correctness check passed")]
    return "\n".join(lines)
