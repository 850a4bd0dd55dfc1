"""The engine and sharing pages' lesson: `EngineLesson`, the ONE replayable object each of pages 4 and 6 keeps (what the
pages read from it, rows, token pieces, series, the twins' verdict, the export: lessons.engine_views.EngineReadings).

A lesson is three things, small enough for a URL (lessons.engine_requests defines the first two):

    config     DemoConfig: block_size, num_blocks, watermark, the scheduler budgets, prefix caching on / off
    requests   RequestSpec each: prompt text, task, sampling knobs, and at_step (steps run when it arrived)
    steps      how many engine steps have run

Replaying them gives the same state bit for bit (greedy or seeded sampling, a seeded free list), so a shared link
lands on the exact step. Engines cannot step backwards, so every move other than forward is a replay, and the lesson
does it itself, in place (the page keeps the same object in st.session_state):

    lesson = EngineLesson.start(config, specs, steps, model, tokenizer)   # a link: replayed to `steps`
    lesson.forward() · lesson.run()        # one step · to the end; a failing step is kept in `news`, not raised
    lesson.back()                          # the same requests replayed to one step fewer
    lesson.load(specs) · lesson.reset()    # a scenario's requests (or the same ones) from step 0, at the next sync
    lesson.sync(config, model, tokenizer)  # each page run: a load, a new config or model replays from step 0
    lesson.offer(spec)                     # add-from-form: the request id or the RequestError goes to `news`
    lesson.take_news()                     # {"added": id, "add_error": RequestError, "failure": (code, message),
                                           #  "run_capped": n}

What it holds: a `paged.engine.twins.TwinEngines` (the library's paged engine + contiguous twin, compared token by
token; tests, the bench and gpu_check use it too), the request log, display ids and per-step snapshots. A request the
engine refuses raises `RequestError` (its code and numbers come from the engine's AdmissionError, see
lessons.engine_checks) and changes nothing; one arriving later that is refused is kept in `rejected` (and in the
log, so a configuration that fits runs it). Streamlit glue (widgets, URL, message boxes) is ui.engine_actions.

Labels: the pages name sequences A, B, C… (viz.colors.seq_label / seq_color of a *display id*). The engine numbers
sequences as they appear, and a request's parallel samples appear only at its prefill, so engine ids would let a
later request's label depend on when an earlier one forked. Display ids are reserved instead when a request enters
the log: n consecutive ids per request (its first sequence, then its samples in order). A sequence keeps its label
and colour for its whole life, whatever arrives or forks around it.
"""

from __future__ import annotations

from typing import Callable

from paged.engine.twins import TwinEngines, TwinStep
from paged.engine.view import EngineView, engine_view
from .engine_views import (Allocation, EngineReadings, Snapshot, export_item, step_export,  # noqa: F401 (pages)
                           table_changes)
from .engine_checks import ENGINE_CODES, check_form, refusal
from .engine_requests import MAX_REQUESTS, MAX_STEPS, DemoConfig, RequestError, RequestSpec
from .engine_rewind import engine_checkpoints, rewound


class EngineLesson(EngineReadings):
    """TwinEngines driven by logged requests and steps, replayed in place for back / reset / a new config (see the
    module docstring)."""

    def __init__(self, config: DemoConfig, model, tokenizer, attn_impl: str | None = None) -> None:
        self.config, self.model, self.tokenizer, self.attn_impl = config, model, tokenizer, attn_impl
        # A fault (lessons.engine_fault) breaks the paged twin only, on the teaching gather path as in the bug lab
        impl = attn_impl if config.fault is None else "gather"
        self.twins = TwinEngines(model, tokenizer, config.cache_config(), config.scheduler_config(), impl,
                                 fault=config.fault)
        self.requests: list[RequestSpec] = []       # accepted, in arrival order (request ids in `request_ids`)
        self.request_ids: list[int] = []
        self.log: list[RequestSpec] = []            # every request given, in order: accepted, pending, refused ones
        self.pending: list[RequestSpec] = []        # arriving after a later step
        self._pending_at: list[int] = []            # each pending request's index in the log
        self._display_base: dict[int, int] = {}     # request id -> display id of its first sequence
        self.rejected: list[tuple[RequestSpec, RequestError]] = []  # arrivals of a replay the engine refused
        self.steps: list[TwinStep] = []
        self._exports: list[dict] = []  # the first steps' exports, each made once when first read
        self._export_texts: list[str] = []  # the same as JSON text (step_texts), made once when first read
        self.history: list[Snapshot] = []
        self.allocations: list[Allocation] = []
        self._view: EngineView | None = None  # built on first use after a change (see `view`)
        self._token_labels: dict[int, str] = {}  # token id -> its label (token_texts), for this lesson's tokenizer
        self._load: list[RequestSpec] | None = None  # requests to replay from step 0 at the next sync (load / reset)
        self.news: dict[str, object] = {}  # what the page says once: "added", "add_error", "failure", "run_capped"
        self._rewind = engine_checkpoints()  # copies every few steps, so Back replays only a few (engine_rewind)
        self._snapshot()

    @property
    def engine(self):
        """The paged engine (the one the pages draw)."""
        return self.twins.paged

    @property
    def step_dicts(self) -> list[dict]:
        """Each step's export (lessons.engine_views.step_export), made when first read, not on the
        step: a replay reaches its step without them (a recorded StepTrace never changes, so a late
        export is the same)."""
        for step in self.steps[len(self._exports):]:
            self._exports.append(step_export(step))
        return self._exports

    @property
    def step_texts(self) -> list[str]:
        """Each step's export as JSON text, indented as an item of the export's "steps" list
        (EngineReadings.trace_text), made when first read and kept like `step_dicts`."""
        for done in self.step_dicts[len(self._export_texts):]:
            self._export_texts.append(export_item(done))
        return self._export_texts

    @property
    def view(self) -> EngineView:
        """The paged engine's state now, as values (built once per change: a step or an arrival)."""
        if self._view is None:
            self._view = engine_view(self.engine)
        return self._view

    # --- actions ------------------------------------------------------------------------------------------------
    def add(self, spec: RequestSpec) -> int | None:
        """Add a request now (at_step <= steps run) or queue it for later. Returns its request id (None if queued).
        Raises RequestError (nothing changed) for a bad prompt or form value, one the engine refuses (the code names
        the limit: paged.engine.admission.check_fits), or when full."""
        spec.check()
        check_form(spec)
        if len(self.log) >= MAX_REQUESTS:
            raise RequestError("too_many", f"at most {MAX_REQUESTS} requests", max_requests=MAX_REQUESTS)
        if spec.at_step > len(self.steps):
            self.pending.append(spec)
            self._pending_at.append(len(self.log))
            self.log.append(spec)
            return None
        rid = self._admit(spec, len(self.log))
        self.log.append(spec)
        return rid

    def _admit(self, spec: RequestSpec, logged_at: int) -> int:
        """Into both engines now; `logged_at`: its index in the log (its display ids follow from the requests
        before it). RequestError if the engine refuses it."""
        try:
            rid = self.twins.add_request(spec.token_ids(self.tokenizer), spec.params())
        except ValueError as err:
            raise refusal(err) from err
        self._view = None
        self.requests.append(spec)
        self.request_ids.append(rid)
        self._display_base[rid] = sum(s.n for s in self.log[:logged_at])
        return rid

    def _arrive(self, spec: RequestSpec, logged_at: int | None = None) -> None:
        """A request arrives: from a replay (not yet in the log) or, after its step, from `pending` (in the log at
        `logged_at`). Refused ones are kept in the log, so the link keeps them and a better configuration runs
        them; malformed ones are dropped."""
        try:
            if logged_at is not None:
                self._admit(spec, logged_at)
            else:
                self.add(spec)
        except RequestError as err:
            self.rejected.append((spec, err))
            if err.code in ENGINE_CODES and logged_at is None and spec.at_step <= len(self.steps):
                self.log.append(spec)  # refused by this config, not malformed

    def can_step(self) -> bool:
        return (self.twins.has_unfinished() or bool(self.pending)) and len(self.steps) < MAX_STEPS

    def step(self) -> TwinStep | None:
        """One engine step of both twins (None when there is nothing left to do), then the arrivals it was waiting
        for."""
        if not self.can_step():
            return None
        step = self.twins.step()
        self.steps.append(step)
        self._view = None
        if step.paged.phase in ("prefill", "mixed"):  # mixed: chunked prefill admits next to decodes
            for seq_id, table in step.paged.blocks_allocated.items():
                if step.paged.block_tables_before.get(seq_id):
                    continue  # a running sequence grew (a decode, a later prompt chunk): not an admission
                hits = self.view.prefix_hits.get(seq_id, (False,) * len(table))
                self.allocations.append(Allocation(len(self.steps), seq_id, list(table), list(hits)))
        self._snapshot()
        waiting = list(zip(self.pending, self._pending_at))
        arrived = [(s, i) for s, i in waiting if s.at_step <= len(self.steps)]
        self.pending = [s for s, _ in waiting if s.at_step > len(self.steps)]
        self._pending_at = [i for s, i in waiting if s.at_step > len(self.steps)]
        for spec, logged_at in arrived:
            self._arrive(spec, logged_at)
        self._rewind.save(len(self.steps), self, self.log)
        return step

    def run_to_end(self, max_steps: int | None = None, between: Callable[[], None] | None = None) -> int:
        """Step until every request finished (at most MAX_STEPS in all, and at most `max_steps` now); `between()`
        is called after each step but the last (the page gives way to other learners there). Returns the steps
        run."""
        n = 0
        while (max_steps is None or n < max_steps) and self.step() is not None:
            n += 1
            if between is not None and self.can_step() and (max_steps is None or n < max_steps):
                between()
        return n

    @classmethod
    def replay(cls, config: DemoConfig, specs: list[RequestSpec], steps: int, model, tokenizer,
               attn_impl: str | None = None) -> "EngineLesson":
        """A fresh lesson with `specs` added in their order (each arrives at its at_step) and `steps` steps run.
        Refused requests are listed in `rejected` and kept in `all_specs()`. A failing step raises."""
        lesson = cls(config, model, tokenizer, attn_impl)
        for spec in specs[:MAX_REQUESTS]:
            lesson._arrive(spec)
        for _ in range(min(steps, MAX_STEPS)):
            if lesson.step() is None:
                break
        return lesson

    @classmethod
    def start(cls, config: DemoConfig, specs: list[RequestSpec], steps: int, model, tokenizer,
              attn_impl: str | None = None) -> "EngineLesson":
        """`replay`, but a step that fails leaves the lesson at step 0 with news["failure"] = ("replay_failed",
        message). Raises RuntimeError / ValueError only when not even step 0 can be built (e.g. a pool larger than
        free memory)."""
        try:
            return cls.replay(config, specs, steps, model, tokenizer, attn_impl)
        except (RuntimeError, ValueError) as err:
            lesson = cls.replay(config, specs, 0, model, tokenizer, attn_impl)
            lesson.news["failure"] = ("replay_failed", str(err))
            return lesson

    def _rebuild(self, specs: list[RequestSpec], steps: int, config: DemoConfig | None = None, model=None,
                 tokenizer=None) -> None:
        """This lesson becomes `start(...)` of the same (or the given) config, model and tokenizer: every attribute
        replaced at once, so it is unchanged if that raises. What the page was told but has not shown is kept."""
        fresh = type(self).start(config or self.config, specs, steps, self.model if model is None else model,
                                 self.tokenizer if tokenizer is None else tokenizer, self.attn_impl)
        fresh.news = {**self.news, **fresh.news}
        vars(self).clear()
        vars(self).update(vars(fresh))

    # --- what the page's buttons do (no Streamlit here: ui.engine_actions wires them) -----------------------------
    def _guarded(self, action) -> None:
        """Run an engine action; an engine error is kept as news["failure"] = ("step_failed", message)."""
        try:
            action()
        except (RuntimeError, ValueError) as err:
            self.news["failure"] = ("step_failed", str(err))

    def forward(self) -> bool:
        """One engine step (the playback bar's Step and Play); False when there is nothing left to run."""
        if not self.can_step():
            return False
        self._guarded(self.step)
        return True

    def run(self, max_steps: int | None = None, between: Callable[[], None] | None = None) -> None:
        """Step to the end (at most MAX_STEPS, and `max_steps` in this call; see run_to_end); a failing step stops
        it, kept in `news`. Stopped by `max_steps` with steps left to run: news["run_capped"] = max_steps."""
        ran = []
        self._guarded(lambda: ran.append(self.run_to_end(max_steps, between)))
        if max_steps is not None and ran and ran[0] >= max_steps and self.can_step():
            self.news["run_capped"] = max_steps

    def back(self) -> bool:
        """The same requests replayed to one step fewer: exactly the state the page had then, from the newest
        checkpoint that fits (lessons.engine_rewind), else from step 0. False at step 0."""
        if not self.steps:
            return False
        fresh = rewound(self, len(self.steps) - 1)
        if fresh is None:
            self._rebuild(self.all_specs(), len(self.steps) - 1)
        else:
            vars(self).clear()
            vars(self).update(vars(fresh))
        return True

    def load(self, specs: list[RequestSpec]) -> None:
        """Replay `specs` from step 0 at the next `sync` (a scenario picked: its config arrives with that sync)."""
        self._load = list(specs)

    def reset(self) -> None:
        """The same requests from step 0, at the next `sync`."""
        self.load(self.all_specs())

    def sync(self, config: DemoConfig, model=None, tokenizer=None) -> bool:
        """Bring the lesson in line with the page's knobs: a pending `load` replays from step 0 under `config`; a
        different config (or model / tokenizer, compared by identity) replays the same requests from step 0 and
        returns True (the page says it restarted). Raises RuntimeError / ValueError, with the lesson unchanged,
        when no engine can be built for `config`."""
        model = self.model if model is None else model
        tokenizer = self.tokenizer if tokenizer is None else tokenizer
        if self._load is not None:
            specs, self._load = self._load, None
            self._rebuild(specs, 0, config, model, tokenizer)
            return False
        if config != self.config or model is not self.model or tokenizer is not self.tokenizer:
            self._rebuild(self.all_specs(), 0, config, model, tokenizer)
            return True
        return False

    def offer(self, spec: RequestSpec) -> None:
        """Add a request from the page's form: its request id (None if it arrives later) goes to news["added"], a
        refusal to news["add_error"]."""
        try:
            self.news["added"] = self.add(spec)
        except RequestError as err:
            self.news["add_error"] = err

    def take_news(self) -> dict[str, object]:
        """What happened since the page last drew (see `news`), then forgotten."""
        news, self.news = self.news, {}
        return news

    def all_specs(self) -> list[RequestSpec]:
        """Every request that arrived (refused ones included) or will arrive, in the order they were given: what a
        URL needs to replay this session with the same labels."""
        return list(self.log)

    def display_id(self, seq_id: int) -> int:
        """The id a page labels and colours sequence `seq_id` by (see the module docstring): its request's reserved
        first id plus its sample index."""
        seq = self.view.seqs[seq_id]
        return self._display_base[seq.request_id] + seq.sample_index

    def display_ids(self) -> dict[int, int]:
        """seq_id -> display_id for every sequence the engine has seen."""
        return {sid: self.display_id(sid) for sid in self.view.seqs}

    # --- views --------------------------------------------------------------------------------------------------
    @property
    def last(self) -> TwinStep | None:
        return self.steps[-1] if self.steps else None

    def _snapshot(self) -> None:
        view = self.view
        seqs = {sid: (s.cached_token_count, len(s.generated_token_ids)) for sid, s in view.seqs.items()}
        self.history.append(Snapshot(len(self.steps), seqs, view.held_blocks, view.table_blocks))
