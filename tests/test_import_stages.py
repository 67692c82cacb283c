"""Imports follow the stages (docs/architecture.md): read from the source — every `import` and
`from ... import`, function-level ones included — no import cycle spans two stage folders
(pyptx/frontend, ir, passes, ptx, mathlib, runtime, runtime/cpu) or involves a module at the
package root (kernel.py, compiler.py, cachekey.py, cuda.py, ...), and pyptx/runtime/cpu has
none at all.  Cycles inside pyptx/frontend (expressions lowering calls that lower expressions)
and among the GPU runtime's modules are allowed.  A submodule importing its own package's
`__init__` (the re-export face) is not counted."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "pyptx"
ACYCLIC = ("pyptx.runtime.cpu",)


def _modules() -> dict:
    mods = {}
    for p in ROOT.rglob("*.py"):
        parts = ("pyptx",) + p.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = p
    return mods


def _targets(mods, cur, node) -> list:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        pkg = cur.split(".") if mods[cur].name == "__init__.py" else cur.split(".")[:-1]
        if node.level:
            base = ".".join(pkg[:len(pkg) - (node.level - 1)])
            mod = base + ("." + node.module if node.module else "")
        else:
            mod = node.module or ""
        names = [mod] + [f"{mod}.{a.name}" for a in node.names]
    return [n for n in names if n in mods]


def import_graph() -> dict:
    mods = _modules()
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(mods, m, node):
                    if t != m and not (mods[t].name == "__init__.py" and m.startswith(t + ".")):
                        graph[m].add(t)
    return graph


def cycles(graph) -> list:
    """The strongly connected components with more than one module (iterative Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def stage(module: str) -> str:
    parts = module.split(".")
    if parts[1:3] == ["runtime", "cpu"]:
        return "pyptx.runtime.cpu"
    if len(parts) > 2 or (len(parts) == 2 and (ROOT / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module                                   # a root module: a stage of its own


def test_no_cycle_crosses_a_stage_folder():
    bad = [c for c in cycles(import_graph()) if len({stage(m) for m in c}) > 1]
    assert not bad, f"import cycles across stages: {bad}"


def test_the_cpu_executor_has_no_import_cycle():
    bad = [c for c in cycles(import_graph()) if stage(c[0]) in ACYCLIC]
    assert not bad, f"import cycles in {ACYCLIC}: {bad}"


def test_the_check_sees_a_planted_cycle():
    g = import_graph()
    assert not any("pyptx.compiler" in c for c in cycles(g))
    g["pyptx.functions"].add("pyptx.compiler")           # the compiler imports functions.py
    planted = [c for c in cycles(g) if "pyptx.compiler" in c]
    assert planted and len({stage(m) for m in planted[0]}) > 1
