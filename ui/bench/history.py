"""`python -m ui.bench history`: what Back, one step and opening a share link cost early and late in a long session
(engine page, shipped model, default config), server side without Streamlit: the lesson's own work behind each.

    back      EngineLesson.back() at step N (from the newest checkpoint, lessons.rewind)
    step      one EngineLesson.forward() at step N
    link      EngineLesson.start(config, requests, N): what opening a `steps=N` link replays (the first visit)
    link_kept opening the same link again in another session (ui.links: a fork of the process's kept replay)
    full      a replay from step 0 to N - 1 (what Back cost before checkpoints), for comparison
Medians over `repeat` tries, in ms, at each N of `at` (default 10 and 600).

`time_page_history` does the same through the page itself (AppTest, the script's own time per run, ui.bench.steps's
wrapper): opening the link, Step and Back on page 4 at step 10 and at MAX_LINK_STEPS (a link's most).
`time_links` (`python -m ui.bench history --links COUNT`): COUNT different `steps=300` links
opened at once (threads; each its own requests, nothing kept to reuse), seconds until each is
ready; then the same links again at once, and the first link's requests at COUNT other steps (what
ui.links keeps makes these a copy and a few steps). Server side, without Streamlit's first-run gate
(which lets one newcomer's run go at a time anyway).

`time_page_redraw`: page 4 drawing what it shows, nothing else (a rerun with no click), at step 10 and 600: the
charts and tables draw only their newest RECENT_STEPS steps (viz.engine), so the two should cost about the same.
"""

from __future__ import annotations

import statistics
import time

STAGGER = 75  # steps between the long requests' arrivals: the engine still has work at step 600


def long_session_specs():
    """Eight 128-token requests arriving every STAGGER steps: a session that is still stepping at step 600."""
    from lessons.engine_requests import RequestSpec

    return [RequestSpec("the quick brown fox jumps " * 2, max_tokens=128, at_step=STAGGER * i) for i in range(8)]


def _ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def time_history(at=(10, 600), repeat: int = 5) -> dict[str, dict[str, float]]:
    """{"step_N": {"back_ms", "step_ms", "link_ms", "link_kept_ms", "full_ms", "checkpoints", "checkpoint_mb"}} for
    each N in `at` (ms medians; MB of the checkpoints' tensors)."""
    from lessons.engine import EngineLesson
    from lessons.engine_requests import DemoConfig
    from paged.model.io import load_model

    model, tok = load_model(None)
    config, specs = DemoConfig(), long_session_specs()
    out = {}
    for n in at:
        lesson = EngineLesson.replay(config, specs, n, model, tok)
        if len(lesson.steps) != n:
            raise RuntimeError(f"the long session stopped at step {len(lesson.steps)}, before {n}")
        back, step = [], []
        for _ in range(repeat):
            back.append(_ms(lesson.back))
            lesson.forward()  # back to step n (and its checkpoint, if n is a multiple of the spacing)
            step.append(_ms(lesson.forward))
            lesson.back()
        link = [_ms(lambda: EngineLesson.start(config, specs, n, model, tok)) for _ in range(max(1, repeat // 2))]
        full = _ms(lambda: EngineLesson.replay(config, specs, n - 1, model, tok))
        from ui.links import open_link

        open_link(config, specs, n, model, tok)  # the first visit keeps it (when long enough to be kept)
        kept = [_ms(lambda: open_link(config, specs, n, model, tok)) for _ in range(repeat)]
        out[f"step_{n}"] = {"back_ms": statistics.median(back), "step_ms": statistics.median(step),
                            "link_ms": statistics.median(link), "link_kept_ms": statistics.median(kept),
                            "full_ms": full,
                            "checkpoints": len(lesson._rewind), "checkpoint_mb": lesson._rewind.nbytes / 2**20}
    return out


def print_history(results: dict[str, dict[str, float]]) -> None:
    print("engine page, one long session (lesson work only, medians)")
    for name, r in results.items():
        print(f"  {name:<9} back {r['back_ms']:7.1f} ms   step {r['step_ms']:6.1f} ms   link {r['link_ms']:7.1f} ms "
              f"(again {r['link_kept_ms']:6.1f} ms)   replay from 0 {r['full_ms']:7.1f} ms   "
              f"{r['checkpoints']} checkpoints, {r['checkpoint_mb']:.1f} MB")


def time_page_history(at=(10, None), repeat: int = 3) -> dict[str, dict[str, float]]:
    """{"page_step_N": {"first_open_ms", "open_ms", "step_ms", "back_ms"}}: page 4's script time (ms; medians but
    the first open, which replays the link: later opens reuse it) when a link opens at step N (None:
    MAX_LINK_STEPS), then for Step and Back there."""
    import tempfile
    from pathlib import Path

    from lessons.engine_requests import encode_requests
    from streamlit.testing.v1 import AppTest
    from ui.params import MAX_LINK_STEPS

    from .steps import ROOT, WRAPPER

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "bench_engine.py"
        wrapper.write_text(WRAPPER.format(root=str(ROOT), page=str(ROOT / "app_pages" / "4_Engine.py")))
        for n in at:
            n = MAX_LINK_STEPS if n is None else n
            opened, steps, backs = [], [], []
            for _ in range(repeat):
                at_ = AppTest.from_file(str(wrapper), default_timeout=600)
                at_.query_params.update({"lang": "en", "reqs": encode_requests(long_session_specs()), "steps": n})
                at_.run()
                opened.append(at_.session_state["_bench_script_ms"])
                at_.button(key="engine.step").click().run()
                steps.append(at_.session_state["_bench_script_ms"])
                at_.button(key="engine.back").click().run()
                backs.append(at_.session_state["_bench_script_ms"])
                if at_.exception:
                    raise RuntimeError(f"page 4 raised: {at_.exception[0].value}")
            out[f"page_step_{n}"] = {"first_open_ms": opened[0], "open_ms": statistics.median(opened[1:] or opened),
                                     "step_ms": statistics.median(steps),
                                     "back_ms": statistics.median(backs)}
    return out


def time_page_redraw(at=(10, 600), repeat: int = 5) -> dict[str, float]:
    """{"redraw_step_N_ms": …}: page 4's script time (median over `repeat`) for a rerun that changes nothing, with
    the long session at step N (opened by a link, then stepped on past MAX_LINK_STEPS in the lesson itself)."""
    import tempfile
    from pathlib import Path

    from lessons.engine_requests import encode_requests
    from streamlit.testing.v1 import AppTest
    from ui.params import MAX_LINK_STEPS

    from .steps import ROOT, WRAPPER

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "bench_engine.py"
        wrapper.write_text(WRAPPER.format(root=str(ROOT), page=str(ROOT / "app_pages" / "4_Engine.py")))
        for n in at:
            at_ = AppTest.from_file(str(wrapper), default_timeout=600)
            at_.query_params.update({"lang": "en", "reqs": encode_requests(long_session_specs()),
                                     "steps": min(n, MAX_LINK_STEPS)})
            at_.run()
            lesson = at_.session_state["engine.lesson"]
            while len(lesson.steps) < n and lesson.forward():
                pass
            at_.run()  # the first draw at step n
            times = []
            for _ in range(repeat):
                at_.run()
                times.append(at_.session_state["_bench_script_ms"])
            if at_.exception or len(lesson.steps) != n:
                raise RuntimeError(f"page 4 at step {len(lesson.steps)} of {n}: {at_.exception}")
            out[f"redraw_step_{n}_ms"] = statistics.median(times)
    return out


def link_specs(tag: int):
    """Eight 128-token requests arriving every 60 steps, the first prompt carrying `tag` (as
    ui.bench.attack's links): no two tags share a replay."""
    from lessons.engine_requests import RequestSpec

    prompt = f"attack {tag} " + "the quick brown fox " * 2
    return [RequestSpec(prompt if i == 0 else "the quick brown fox " * 2, max_tokens=128,
                        at_step=60 * i) for i in range(8)]


def _ready_s(opens) -> list[float]:
    """Seconds from one common start until each of `opens` (no-argument calls) returned, all run
    at once in threads (sorted)."""
    import threading

    start, done = threading.Event(), [0.0] * len(opens)

    def one(i: int) -> None:
        start.wait()
        opens[i]()
        done[i] = time.perf_counter() - began

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(opens))]
    for t in threads:
        t.start()
    began = time.perf_counter()
    start.set()
    for t in threads:
        t.join()
    return sorted(done)


def time_links(count: int = 5, steps: int = 300, tag: int = 0) -> dict[str, list[float]]:
    """{"first_s", "again_s", "other_steps_s"}: ready times (s, sorted) of `count` different
    `steps`-step links opened at once, of the same links again at once, and of the first link's
    requests at `count` other steps (steps - 1, steps - 2, …) at once. `tag`: the first link's tag
    (another call's links share no replay with this one's when its tags differ)."""
    from lessons.engine_requests import DemoConfig
    from paged.model.io import load_model
    from ui.links import open_link

    model, tok = load_model(None)
    config = DemoConfig()
    tags = range(tag, tag + count)
    links = [lambda t=t: open_link(config, link_specs(t), steps, model, tok) for t in tags]
    first, again = _ready_s(links), _ready_s(links)
    other = _ready_s([lambda n=n: open_link(config, link_specs(tag), steps - 1 - n, model, tok)
                      for n in range(count)])
    return {"first_s": first, "again_s": again, "other_steps_s": other}


def print_links(results: dict[str, list[float]], count: int, steps: int) -> None:
    print(f"{count} share links of page 4 opened at once (steps={steps}; s until each is ready)")
    for name, label in (("first_s", "different requests, first visit"),
                        ("again_s", "the same links again"),
                        ("other_steps_s", "the first link's requests at other steps")):
        print(f"  {label:<42} " + "  ".join(f"{s:6.2f}" for s in results[name]))


def print_page_redraw(results: dict[str, float]) -> None:
    steps = [int(k.split("_")[2]) for k in results]
    values = list(results.values())
    print("engine page redrawn, nothing clicked (script time, medians): "
          + "   ".join(f"step {n} {v:6.1f} ms" for n, v in zip(steps, values))
          + (f"   ratio x{values[-1] / values[0]:.2f}" if len(values) > 1 else ""))


def print_page_history(results: dict[str, dict[str, float]]) -> None:
    print("engine page through AppTest (script time, medians)")
    for name, r in results.items():
        print(f"  {name:<14} first open {r['first_open_ms']:7.1f} ms   open again {r['open_ms']:6.1f} ms   "
              f"step {r['step_ms']:6.1f} ms   back {r['back_ms']:6.1f} ms")
