"""What the engine lesson (lessons.engine) records for the pages to draw: a snapshot per step, the blocks a prompt
got when it was admitted, one row per sequence, a step's export, and how block tables changed across a step.
Plain values, no engine objects."""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from typing import Mapping

from paged.engine.twins import RTOL, TwinStep
from .tokens import shown_text, token_label


@dataclass
class Snapshot:
    """The engine after a step (step 0 = before any): per running or finished sequence (cached_token_count,
    generated length), blocks held (distinct) and blocks listed in tables (what no sharing would hold)."""

    step: int
    seqs: dict[int, tuple[int, int]]
    held_blocks: int
    table_blocks: int


@dataclass
class Allocation:
    """A prompt's blocks when a prefill step allocated them: the table and, per logical block, a prefix-cache hit."""

    step: int
    seq_id: int
    table: list[int]
    hits: list[bool]


@dataclass
class SeqRow:
    seq_id: int
    request_id: int
    sample_index: int
    prompt: str
    text: str
    status: str
    finish_reason: str | None
    prompt_len: int
    cached_token_count: int
    generated_len: int
    preemptions: int


def step_export(step: TwinStep) -> dict:
    """One step for the export: the paged engine's StepTrace and the comparison with its contiguous twin (whose own
    trace repeats the same schedule, so only what could differ is kept)."""
    tc = step.contiguous
    return {"paged": step.paged.to_dict(),
            "contiguous": {"phase": tc.phase, "scheduled": tc.scheduled, "tokens_out": [s.token_out for s in tc.seqs]},
            "logits_diff": {str(k): v for k, v in step.logits_diff.items()},
            "same_tokens": {str(k): v for k, v in step.same_tokens.items()}, "same_schedule": step.same_schedule}


def export_text(doc) -> str:
    """An export's JSON text of `doc` (every page's Export: ui.widgets.export_button): indented by 2,
    non-ASCII kept, anything else as str."""
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str)


def export_item(step: dict) -> str:
    """`export_text` of one step as an item of the export's top-level "steps" list (4 spaces in)."""
    return "\n".join("    " + line for line in export_text(step).split("\n"))


def table_changes(before: Mapping[int, list[int]], after: Mapping[int, list[int]]
                  ) -> list[tuple[int, list[int], list[int], list[int]]]:
    """Block tables across one step: (seq_id, before, after, blocks in after that were not in before), for every
    sequence in either (a finished or preempted one has an empty `after`)."""
    out = []
    for sid in sorted(set(before) | set(after)):
        b, a = list(before.get(sid, [])), list(after.get(sid, []))
        out.append((sid, b, a, [x for x in a if x not in b]))
    return out


class EngineReadings:
    """What the pages read from an EngineLesson (the read-only half of lessons.engine.EngineLesson, which inherits
    it): queues, rows, token pieces, the state-rule series, the twins' verdict and the export. Uses the lesson's
    view, twins, tokenizer, request log (requests, request_ids, rejected), history and step_dicts."""

    def queues(self) -> tuple[list[int], list[int], list[int]]:
        """(waiting, running, finished) seq ids of the paged engine."""
        return list(self.view.waiting), list(self.view.running), list(self.view.finished)

    def rows(self) -> list[SeqRow]:
        """One row per sequence (parallel samples included), in id order; the text as lessons.tokens shows it
        (a byte that is not valid UTF-8 as ⟨0xNN⟩)."""
        spec_of = dict(zip(self.request_ids, self.requests))
        out = []
        for sid, s in sorted(self.view.seqs.items()):
            spec = spec_of.get(s.request_id)
            shown = "" if spec is None else spec.shown() if self.tokenizer.sep_token_id is not None else spec.prompt
            out.append(SeqRow(sid, s.request_id, s.sample_index, shown,
                              shown_text(self.tokenizer, list(s.generated_token_ids)), s.status, s.finish_reason,
                              s.prompt_len, s.cached_token_count, len(s.generated_token_ids), s.preemptions))
        return out

    def token_texts(self) -> dict[int, list[str]]:
        """seq_id -> the text piece of each of its tokens by token index (prompt as fed, then generated), as
        lessons.tokens.token_label shows one token (␣ a space, ⟨0xNN⟩ a byte, ⟨EOS⟩): what a pool cell holding
        token i of that sequence holds. Every sequence of the view, forked samples included."""
        spec_of = dict(zip(self.request_ids, self.requests))
        labels = self._token_labels
        out = {}
        for sid, s in self.view.seqs.items():
            spec = spec_of.get(s.request_id)
            ids = (spec.token_ids(self.tokenizer) if spec else []) + list(s.generated_token_ids)
            out[sid] = [labels[i] if i in labels else labels.setdefault(i, token_label(self.tokenizer, i))
                        for i in ids]
        return out

    def cache_series(self, last: int | None = None) -> dict[int, dict[str, list[int]]]:
        """seq_id -> {"step", "cached", "rule"} over the steps it existed: cached_token_count and
        prompt_len + generated − 1 (the state rule; equal once a step has run it, 0 vs rule when preempted).
        last: only the newest `last` steps (what a chart of recent steps shows: its cost does not grow with steps)."""
        prompt_len = {sid: s.prompt_len for sid, s in self.view.seqs.items()}
        series: dict[int, dict[str, list[int]]] = {}
        for snap in (self.history if last is None else self.history[-last:] if last > 0 else []):
            for sid, (cached, generated) in snap.seqs.items():
                if generated == 0 and cached == 0:
                    continue  # still waiting for its first prefill
                d = series.setdefault(sid, {"step": [], "cached": [], "rule": []})
                d["step"].append(snap.step)
                d["cached"].append(cached)
                d["rule"].append(prompt_len[sid] + generated - 1)
        return series

    def twin_summary(self) -> tuple[float, bool]:
        """(max |Δlogits| over every token both twins produced, they agree: same tokens and that difference within
        `twin_tolerance()`). Compared token by token, so schedules that differ (prefix caching saves the paged
        engine steps the contiguous twin must compute) are still compared like with like."""
        verdict = self.twins.verdict()
        return verdict.max_diff, verdict.agrees()

    def twin_tolerance(self) -> float:
        """The largest |Δlogits| still counted as agreement: fp32 reassociation, scaled to the logits' size."""
        return RTOL * max(1.0, self.twins.verdict().max_abs_logit)

    def schedules_differ(self) -> bool:
        """Whether the twins scheduled some step differently (expected only with prefix caching)."""
        return not self.twins.verdict().same_schedule

    def trace(self) -> dict:
        """Everything for the export: config, requests, every step of both twins, the outputs."""
        paged, contiguous = self.twins.outputs()
        return {"config": asdict(self.config), "requests": [asdict(s) for s in self.all_specs()],
                "steps_run": len(self.steps), "steps": self.step_dicts,
                "outputs": {"paged": [asdict(o) for o in paged], "contiguous": [asdict(o) for o in contiguous]},
                "rejected": [{"request": asdict(s), "error": str(e)} for s, e in self.rejected]}

    def trace_text(self) -> str:
        """export_text(trace()), the same characters, from each step's text made once (step_texts): a
        press at step 300 joins 300 kept texts instead of encoding ~1 MB again (json's indenting
        encoder is pure Python: ~30 ms there)."""
        doc, mark = self.trace(), f"steps-{secrets.token_hex(8)}"
        doc["steps"] = mark  # a unique string where the list goes, then the kept texts in its place
        items = self.step_texts
        listed = "[\n" + ",\n".join(items) + "\n  ]" if items else "[]"
        return export_text(doc).replace(f'"steps": "{mark}"', f'"steps": {listed}', 1)
