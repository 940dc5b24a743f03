"""mlprof's modules import each other in one direction: no cycles, and ``mlprof.collect`` never reaches up
to the package root (``import mlprof`` inside collect would make the collector depend on the whole API)."""

from __future__ import annotations

import ast
from pathlib import Path

import mlprof

SRC = Path(mlprof.__file__).parent


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for f in SRC.rglob("*.py"):
        parts = list(f.relative_to(SRC.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    return out


def _imports(name: str, f: Path, is_pkg: bool, modules) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import statement, at any depth (lazy ones too)."""
    pkg = name if is_pkg else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, [a.name for a in node.names]))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, (f, is_pkg) in modules.items():
        deps = set()
        for target, names in _imports(name, f, is_pkg, modules):
            # `from pkg import submodule` depends on the submodule, not on the package's own code.
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
            deps.update(subs)
            if not subs or len(subs) < len(names):
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target:
                    deps.add(target)
        deps.discard(name)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_back_into_a_module_that_imports_it():
    assert _cycles(_graph()) == []


def test_collect_never_imports_the_package_root():
    graph = _graph()
    offenders = sorted(m for m, deps in graph.items() if m.startswith("mlprof.collect") and "mlprof" in deps)
    assert offenders == []


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_analyses_only_read_tables():
    """Analyses take tables (or data extracted from them); finding inputs, parsing them on demand and running
    them in worker processes is the workflow layer's job (mlprof.workflow, mlprof.outputs, mlprof.batch)."""
    above = ("mlprof.outputs", "mlprof.batch", "mlprof.parse", "mlprof.workflow", "mlprof.cluster_workflow")
    graph = _graph()
    offenders = sorted(f"{m} -> {d}" for m, deps in graph.items() if _within(m, ("mlprof.analysis",))
                       for d in deps if _within(d, above))
    assert offenders == []


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_collection_never_reaches_a_later_stage():
    """The collector runs inside the training job: it must not load, even through another module, the parser,
    the tables, the analyses, the exports, the presenters or the command line (collect/profiler.py imported
    the dashboard's memory page)."""
    later = ("mlprof.parse", "mlprof.tables", "mlprof.analysis", "mlprof.export", "mlprof.ui", "mlprof.cli",
             "mlprof.workflow", "mlprof.outputs", "mlprof.batch", "mlprof.cluster_workflow")
    graph = _graph()
    offenders = sorted(f"{m} -> {d}" for m in graph if _within(m, ("mlprof.collect",))
                       for d in _reachable(graph, m) if _within(d, later))
    assert offenders == []


def test_analyses_take_a_store_and_do_not_open_one_from_a_path():
    """Opening each output's tables and walking a list of outputs is the workflow layer's (the advisor's
    engine did it for `mlprof advise`). Allowed: whole_trace re-opens the directory of the store it is
    given (cluster_data.rank_data, the reader of an already parsed output, is the cluster workflow's now)."""
    import ast

    allowed = {"mlprof.analysis.advisor.whole_trace"}
    offenders = sorted(name for name, (f, _) in _modules().items()
                       if _within(name, ("mlprof.analysis",)) and name not in allowed
                       for node in ast.walk(ast.parse(f.read_text()))
                       if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "TableStore")
    assert offenders == []
