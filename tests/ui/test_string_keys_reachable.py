"""Every strings key the app can ask for exists in English and 简体中文, found statically over the whole
tree.

An AST walk over app_pages/ and ui/ finds every `t(...)` / `ctx.t(...)` / `tr(...)` call and
resolves its key expression to the keys it can name: string literals, both arms of `a if x else b`,
`+`, f-strings (a part that is a local name assigned or looped over literals is resolved; any other
part is a wildcard), and a local name assigned such values. A key without a module ("no_step_yet")
is asked of the page's own strings module: in a page, the one its `setup_page` / `page_header`
names; in a ui/ helper, the module of *every* page that can reach the helper (pages -> the names
they reference -> the ui functions of those names -> ..., transitively), because a shared helper
asks on each calling page's behalf. A key with a wildcard must match at least one key of its module,
and a few families whose values are a known finite set (a sequence's status, a scenario's name) are
checked value by value. What cannot be resolved at all is listed in DYNAMIC with the reason, so a
new one fails here first.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from itertools import product
from pathlib import Path

import pytest

from ui.strings import LANGS, MODULES, strings

ROOT = Path(__file__).resolve().parents[2]
WILD = None  # a part of a key that cannot be resolved statically
TRANSLATE = {"t", "tr"}  # ctx.t(key, ...), t(key, lang), tr(key): the first argument is the key
SETUP = {"setup_page", "page_header"}
# Calls whose key is built from data at run time: (file, the key expression's source) -> why that
# is fine.
DYNAMIC = {
    ("ui/page.py", "key"): "PageContext.t itself, passing its caller's key on",
    ("ui/engine_actions.py", "FIELD_LABELS.get(detail['field'], detail['field'])"):
        "the fallback for a field FIELD_LABELS lacks: test_every_form_field_has_a_label holds that "
        "none does",
    ("app_pages/10_Swap_or_recompute.py", "key"):
        "a sentence key of lessons.swap.step_words: test_the_step_sentences_have_their_keys runs it",
    ("app_pages/11_Sliding_window.py", "key"):
        "a sentence key of lessons.window.step_words: test_the_step_sentences_have_their_keys runs it",
}


@dataclass(frozen=True)
class Ask:
    """One translate call: where it is, the enclosing top-level function (None: module level), the
    keys it can ask for (Key: a pattern and the page that passed it), and the key expression's
    source."""

    file: str
    line: int
    func: str | None
    patterns: tuple[tuple, ...]
    source: str


def _py(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _sources() -> list[Path]:
    return [p for p in _py("app_pages") + _py("ui") if "strings" not in p.relative_to(ROOT).parts
            and "bench" not in p.relative_to(ROOT).parts]


def _own_nodes(scope: ast.AST):
    """(node, its enclosing nodes) for the nodes of `scope` outside the functions and classes
    defined in it (their names are their own)."""
    todo = [(child, ()) for child in ast.iter_child_nodes(scope)]
    while todo:
        node, parents = todo.pop()
        yield node, parents
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo += [(child, parents + (node,)) for child in ast.iter_child_nodes(node)]


def _targets(target: ast.expr, value: ast.expr | None, name: str) -> list[ast.expr] | None:
    """The values `target = value` gives `name` ([] when it does not bind it), None when they are
    not literal."""
    if isinstance(target, ast.Name):
        return [] if target.id != name else None if value is None else [value]
    if isinstance(target, (ast.Tuple, ast.List)):
        if not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
            return []
        if not isinstance(value, (ast.Tuple, ast.List)) or len(value.elts) != len(target.elts):
            return None
        out: list[ast.expr] = []
        for t, v in zip(target.elts, value.elts):
            got = _targets(t, v, name)
            if got is None:
                return None
            out += got
        return out
    return []


@dataclass(frozen=True)
class Site:
    """Where an expression sits: its file's tree (innermost scope first) and its line."""

    scopes: tuple
    line: int
    file: str = ""


class Index:
    """Every call in the walked files by the called name (to resolve a helper's parameter from its
    callers)."""

    def __init__(self) -> None:
        self.calls: dict[str, list[tuple[ast.Call, Site]]] = {}


INDEX = Index()


def _dict_values(expr: ast.expr, site: Site, depth: int) -> list[ast.expr] | None:
    """For `D[k]` or `D.get(k[, default])` where D is bound to one dict literal: its values (and the
    default)."""
    if depth > 12:
        return None
    if isinstance(expr, ast.Subscript):
        holder, default = expr.value, None
    elif (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
          and expr.func.attr == "get"):
        holder, default = expr.func.value, expr.args[1] if len(expr.args) > 1 else None
    else:
        return None
    if not isinstance(holder, ast.Name):
        return None
    for scope in site.scopes:
        bound, values = _bindings(scope, holder.id, site, depth)
        if bound:
            if values is None or len(values) != 1 or not isinstance(values[0][0], ast.Dict):
                return None
            return list(values[0][0].values) + ([default] if default is not None else [])
    return None


def _bindings(scope: ast.AST, name: str, site: Site, depth: int) -> tuple[bool, list[tuple] | None]:
    """Whether `scope` binds `name` before `site.line`, and the (value, its site) pairs it can hold
    there: the last binding before it (with the other arms of an `if` that holds it); an assignment
    gives its value (each value of a dict literal for `D[k]`), a for loop or comprehension over a
    literal tuple/list each element, a parameter of a named function the argument of each call of
    that name in the walked files (else its default). None for the values when a binding is not
    followed (a loop over data, a parameter of a lambda)."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        params = args.posonlyargs + args.args
        if name in {a.arg for a in params + args.kwonlyargs}:
            return True, None if isinstance(scope, ast.Lambda) else _arguments(scope, name, depth)
    found = []  # (line, enclosing nodes, [(value, site)] or None)
    for node, parents in _own_nodes(scope):
        pairs: list[tuple[ast.expr, ast.expr | None]] = []
        if isinstance(node, ast.Assign):
            if not any(isinstance(n, ast.Name) and n.id == name
                       for t in node.targets for n in ast.walk(t)):
                continue
            at = replace(site, line=node.lineno)
            values = _dict_values(node.value, at, depth + 1) or [node.value]
            pairs = [(t, v) for t in node.targets for v in values]
        elif isinstance(node, (ast.For, ast.comprehension)):
            literal = isinstance(node.iter, (ast.Tuple, ast.List, ast.Set))
            items = node.iter.elts if literal else [None]
            pairs = [(node.target, item) for item in items]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs = [(node.optional_vars, None)]
        got: list[ast.expr] | None = []
        for target, value in pairs:
            more = _targets(target, value, name)
            got = None if got is None or more is None else got + more
        if got == []:
            continue
        where = node.lineno if isinstance(node, ast.stmt) else node.target.lineno
        if where <= site.line:
            pairs_at = None if got is None else [(v, replace(site, line=v.lineno)) for v in got]
            found.append((where, parents, pairs_at))
    if not found:
        return False, None
    last = max(found, key=lambda f: f[0])
    branch = next((p for p in reversed(last[1]) if isinstance(p, ast.If)), None)
    chosen = [f for f in found if f is last or branch is not None and branch in f[1]]
    if any(f[2] is None for f in chosen):
        return True, None
    return True, [pair for f in chosen for pair in f[2]]


def _arguments(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
               depth: int) -> list[tuple] | None:
    """The (argument, its site) pairs every walked call of `func`'s name passes for parameter
    `name`."""
    args = func.args
    params = [a.arg for a in args.posonlyargs + args.args]
    defaults = dict(zip(params[len(params) - len(args.defaults):], args.defaults))
    defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    calls = INDEX.calls.get(func.name, [])
    if not calls or depth > 6:
        return None
    out = []
    for call, site in calls:
        method = params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute)
        offset = 1 if method else 0
        keyword = next((k.value for k in call.keywords if k.arg == name), None)
        position = params.index(name) - offset if name in params else -1
        if keyword is not None:
            out.append((keyword, site))
        elif (0 <= position < len(call.args)
              and not any(isinstance(a, ast.Starred) for a in call.args)):
            out.append((call.args[position], site))
        elif name in defaults:
            out.append((defaults[name], Site((func,), func.lineno, "")))
        else:
            return None  # **kwargs or *args: not followed
    return out


# (pattern: a tuple of literal parts and WILD, origin: the page file whose call supplied it, or "")
Key = tuple


def _resolve(expr: ast.expr, site: Site, depth: int = 0) -> list[Key]:
    """The key patterns `expr` can evaluate to (see the module docstring), each with the page whose
    argument it came from ("" when none did); [((WILD,), "")] when nothing is known."""
    page = site.file if site.file.startswith("app_pages/") else ""
    if depth > 12:
        return [((WILD,), page)]
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [((expr.value,), page)]
    if isinstance(expr, ast.Constant) and expr.value is None:
        return [((), page)]  # "no key": the helper tests it before asking (CONFIG_KNOBS' help)
    if isinstance(expr, ast.IfExp):
        return _resolve(expr.body, site, depth + 1) + _resolve(expr.orelse, site, depth + 1)
    parts = None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        parts = [_resolve(expr.left, site, depth + 1), _resolve(expr.right, site, depth + 1)]
    if isinstance(expr, ast.JoinedStr):
        parts = [_resolve(v.value if isinstance(v, ast.FormattedValue) else v, site, depth + 1)
                 for v in expr.values]
    if parts is not None:
        return [(sum((p for p, _ in combo), ()), next((o for _, o in combo if o), page))
                for combo in product(*parts)]
    values = _dict_values(expr, site, depth + 1)
    if values is not None:
        return [k for v in values for k in _resolve(v, site, depth + 1)]
    if isinstance(expr, ast.Name):
        for k, scope in enumerate(site.scopes):  # innermost first
            here = site if k == 0 else replace(site, line=10**9)
            bound, pairs = _bindings(scope, expr.id, here, depth + 1)
            if bound:
                if pairs is None:
                    return [((WILD,), page)]
                return [(p, o or page) for v, at in pairs for p, o in _resolve(v, at, depth + 1)]
    return [((WILD,), page)]


class _Walker(ast.NodeVisitor):
    """Collects the calls of one file, each with its enclosing scopes (innermost first) and
    top-level function."""

    def __init__(self, rel: str, tree: ast.Module):
        self.rel, self.calls, self.scopes, self.top = rel, [], [tree], None

    def _scoped(self, node) -> None:
        outer_top = self.top
        if self.top is None:
            self.top = node.name
        self.scopes.insert(0, node)
        self.generic_visit(node)
        self.scopes.pop(0)
        self.top = outer_top

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.scopes.insert(0, node)
        self.generic_visit(node)
        self.scopes.pop(0)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = (func.attr if isinstance(func, ast.Attribute)
                else func.id if isinstance(func, ast.Name) else None)
        if name is not None:
            site = Site(tuple(self.scopes), node.lineno, self.rel)
            self.calls.append((name, node, site, self.top))
        self.generic_visit(node)


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _asks() -> list[Ask]:
    walked = []
    for path in _sources():
        walker = _Walker(path.relative_to(ROOT).as_posix(), _parse(path))
        walker.visit(walker.scopes[0])
        walked.append(walker)
        for name, call, site, _ in walker.calls:
            INDEX.calls.setdefault(name, []).append((call, site))
    return [Ask(w.rel, call.lineno, top, tuple(_resolve(call.args[0], site)),
                ast.unparse(call.args[0]))
            for w in walked for name, call, site, top in w.calls if name in TRANSLATE and call.args]


def _names(node: ast.AST) -> set[str]:
    """Every name `node` refers to (called, passed as a callback, or an attribute's name)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
           {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _page_module(tree: ast.Module) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _names(node.func) & SETUP and node.args \
                and isinstance(node.args[0], ast.Constant):
            return node.args[0].value
    return None


def _reach() -> dict[tuple[str, str], set[str]]:
    """(ui file, top-level function or class) -> the strings modules of the pages that can reach it.
    """
    defs: dict[tuple[str, str], set[str]] = {}  # ui function -> the names its body refers to
    for path in _py("ui"):
        for node in _parse(path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defs[(path.relative_to(ROOT).as_posix(), node.name)] = _names(node)
    reach: dict[tuple[str, str], set[str]] = {d: set() for d in defs}
    for page in _py("app_pages"):
        tree = _parse(page)
        module = _page_module(tree)
        if module is None:
            continue
        names, seen = _names(tree), set()
        while True:
            new = {d for d in defs if d[1] in names and d not in seen}
            if not new:
                break
            seen |= new
            for d in new:
                names |= defs[d]
        for d in seen:
            reach[d].add(module)
    return reach


def _modules_of(ask: Ask, origin: str, page_modules: dict[str, str], reach) -> set[str]:
    """The strings modules a key without a module part is asked of at this call: the page's own, the
    page's whose argument it is (`origin`), else those of every page that can reach the helper."""
    if ask.file.startswith("app_pages/") or origin:
        return {page_modules[origin or ask.file]}
    return reach.get((ask.file, ask.func), set())


def _keys(module: str) -> set[str]:
    return set(strings(module)) if module in MODULES else set()


def _check(pattern: tuple, modules: set[str]) -> list[str]:
    """Problems with one key pattern asked of `modules` (its own module part wins)."""
    text = "".join("\0" if p is WILD else p for p in pattern)
    head = text.split("\0", 1)[0]
    if "." in head:
        module, _, rest = text.partition(".")
        targets, rest_pattern = {module}, rest
    else:
        targets, rest_pattern = modules, text
    problems = []
    for module in sorted(targets):
        regex = re.compile("^" + ".*".join(map(re.escape, rest_pattern.split("\0"))) + "$")
        found = [k for k in _keys(module) if regex.match(k)]
        if not found:
            problems.append(f"{module}.{rest_pattern.replace(chr(0), '*')}")
        for key in found:
            problems += [f"{module}.{key} [{lang}]" for lang in LANGS
                         if not strings(module)[key].get(lang, "").strip()]
    return problems


ASKS = _asks()


def test_the_walk_finds_the_calls_it_must():
    """The walk sees literal keys, both arms of a conditional and the page-relative keys of a shared
    helper."""
    found = {(a.file, p) for a in ASKS for p, _ in a.patterns}
    assert ("app_pages/6_Sharing.py", ("hits_msg",)) in found
    assert ("app_pages/6_Sharing.py", ("miss_msg",)) in found
    assert ("ui/engine_actions.py", ("no_step_yet",)) in found
    assert ("ui/engine_actions.py", ("engine.status_", WILD)) in found
    assert ("ui/engine_actions.py", ("engine.chunked_prefill_help",)) in found  # a dict's values
    assert ("ui/quiz.py", ("swap.none_quiz",)) in found  # a helper's parameter, from its callers
    assert len(ASKS) > 500


def test_a_shared_helper_is_reached_from_each_calling_page():
    reach = _reach()
    assert reach[("ui/engine_actions.py", "announce_step")] == {"engine", "sharing"}
    assert "engine" not in reach[("ui/engine_actions.py", "announce_step")] - {"engine", "sharing"}


def test_the_check_catches_a_key_only_another_page_has():
    """The old page 6 bug: "no_step_possible" asked of both pages, held by ui/strings/engine.py
    only."""
    assert _check(("no_step_possible",), {"engine", "sharing"}) == ["sharing.no_step_possible"]
    assert _check(("engine.no_step_possible",), {"engine", "sharing"}) == []
    assert _check(("engine.status_", WILD), set()) == []
    assert _check(("engine.nope_", WILD), set()) == ["engine.nope_*"]


def test_every_key_a_page_can_ask_for_exists_in_both_languages():
    page_modules = {p.relative_to(ROOT).as_posix(): _page_module(_parse(p))
                    for p in _py("app_pages")}
    reach, problems, dynamic = _reach(), [], set()
    for ask in ASKS:
        for pattern, origin in ask.patterns:
            if pattern in (("",), ()):  # "" or None: no key, tested before asking
                continue
            if all(p is WILD or p == "" for p in pattern):
                dynamic.add((ask.file, ask.source))
                continue
            modules = _modules_of(ask, origin, page_modules, reach)
            problems += [f"{ask.file}:{ask.line} {ask.source}: {miss}"
                         for miss in _check(pattern, modules)]
    assert not problems, "\n".join(problems)
    assert dynamic == set(DYNAMIC), f"unresolvable keys: {sorted(dynamic - set(DYNAMIC))}"


def _families() -> list[tuple[str, tuple[str, ...]]]:
    """Key families built at run time from a finite set the library or a lesson defines."""
    from lessons.engine_requests import ENGINE_SCENARIOS, SHARING_SCENARIOS
    from lessons.spec import SCENARIOS as SPEC_SCENARIOS
    from paged.sequence import SequenceStatus

    return [("engine.status_", tuple(s.value for s in SequenceStatus)),
            # Sequence.finish_reason's values, as paged/sequence.py documents them
            ("engine.reason_", ("length", "stop", "eos", "abort", "error")),
            ("engine.scenario_", tuple(ENGINE_SCENARIOS)),
            ("sharing.scenario_", tuple(SHARING_SCENARIOS)),
            ("spec.scenario_", tuple(SPEC_SCENARIOS))]


@pytest.mark.parametrize("family, values", _families(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_families_resolved_value_by_value(family, values):
    """A key family a page builds at run time (f"engine.status_{status}", f"scenario_{n}"): every
    value of its finite set has its key, in both languages."""
    module, _, prefix = family.partition(".")
    missing = [f"{family}{v} [{lang}]" for v in values for lang in LANGS
               if not strings(module).get(prefix + v, {}).get(lang, "").strip()]
    assert not missing, missing


def test_every_form_field_has_a_label():
    """show_request_error names a refused form field by FIELD_LABELS (else by its raw name, not a
    strings key)."""
    from lessons.engine_checks import FORM_FIELDS
    from ui.engine_actions import FIELD_LABELS

    assert set(FORM_FIELDS) <= set(FIELD_LABELS)


def test_the_step_sentences_have_their_keys(shipped):
    """Pages 10 and 11 say each step with keys that lessons' step_words picks from the step's record:
    every key it picks over the default runs and their breaks exists in both languages."""
    from lessons.swap import SwapConfig, SwapLesson
    from lessons.swap import step_words as swap_words
    from lessons.window import WindowConfig, run_window
    from lessons.window import step_words as window_words

    asked = set()
    for config in (SwapConfig(), SwapConfig(swap_space=3)):
        lesson = SwapLesson(config, *shipped)
        asked |= {("swap", key) for run in (lesson.swap, lesson.recompute) for state in run.steps
                  for key, _ in swap_words(state)}
    for config in (WindowConfig(), WindowConfig(free_early=True)):
        run = run_window(config, *shipped)
        asked |= {("window", key) for step in range(len(run.frames)) for key, _ in window_words(run, step)}
    assert {m for m, _ in asked} == {"swap", "window"}
    missing = [(m, k, lang) for m, k in sorted(asked) for lang in LANGS
               if not strings(m).get(k, {}).get(lang)]
    assert missing == []
