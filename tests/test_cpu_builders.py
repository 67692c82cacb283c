"""The CPU executor's builder registry agrees with the PTX emitter, and the executor's modules
import each other without a cycle.

Every opcode the emitter can write must have a CPU builder (else a launch of a kernel using it
is a LaunchError) registered with a profiler class (else `pyptx.profile` counts it under a
guessed class, as `match.sync` once was counted as `int`).  The emitter's opcodes are taken
from what it really writes (the PTX of every stdlib specialisation, sm_80 and sm_90, and of the
feature kernels of tests/kernels_semantic.py, parsed by the executor's own parser) and from its
sources (the instruction texts of pyptx/ptx/*.py and the opcode tables of tables.py), so an
opcode only a rare path emits is covered too.
"""
from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import pyptx
from pyptx.runtime.cpu import decode as _decode  # noqa: F401 - fills the registry
from pyptx.runtime.cpu.opkinds import BUILDERS, KIND_NAMES, NORMAL
from pyptx.runtime.cpu.parser import parse

sys.path.insert(0, os.path.dirname(__file__))

ROOT = Path(pyptx.__file__).parent
CPU_DIR = ROOT / "runtime" / "cpu"

#: the profiler's instruction classes (docs/checking.md)
CLASS = re.compile(r"(int|fp(16|32|64)|sfu|control|sync|warp|convert|move|call|other|tensor|"
                   r"cp\.async|(ld|st|atom)\.(global|shared|local|param|const|generic))")


# ---- the emitter's opcodes -----------------------------------------------------------------

def _opcodes_of(ptx: str) -> set:
    out = set()
    for entry in parse(ptx).entries.values():
        out.update(ins.opcode for ins in entry.body if not isinstance(ins, str))
    return out


def _compiled_opcodes() -> set:
    """Full opcodes (`ld.global.nc.v4.f32`) in the PTX of the stdlib and the feature kernels.
    The compile calls are test_stdlib_ptxas.py's, so one pytest run compiles them once."""
    from stdlib_kernels.catalog import SPECIALISATIONS
    import kernels_semantic
    ops = set()
    for arch in ("sm_80", "sm_90"):
        for spec in SPECIALISATIONS:
            ops |= _opcodes_of(pyptx.compile(spec.kernel, arch=arch,
                                             constexprs=spec.constexprs).ptx)
    for _, kernel, *_ in kernels_semantic.cases():
        ops |= _opcodes_of(pyptx.compile(kernel, arch="sm_80").ptx)
    return ops


#: the head of an instruction text: an optional guard, then the base opcode
_HEAD = re.compile(r"\s*(?:@!?%?[\w$]+\s+)?([a-z][a-z0-9_]*)(?=[.\s;]|$)")


def _lead(node, decorators) -> list:
    """The texts an instruction string can start with: its literal start, or for f"{ins.op}.."
    the names of the IR ops its lowering is registered for (`@lowers("popc", "clz")`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if not isinstance(node, ast.JoinedStr) or not node.values:
        return []
    first = node.values[0]
    if isinstance(first, ast.Constant):
        return [first.value]
    if ast.unparse(first.value) == "ins.op":
        return [a.value for d in decorators if isinstance(d, ast.Call) for a in d.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return []


def _source_opcodes() -> set:
    """Base opcodes in the emitter's sources: the texts passed to `em.i(...)` (and the raw
    lines appended to `em.out`, as trap and the printf call block), plus tables.py's opcode
    tables (arithmetic templates, fences, approximate functions)."""
    from pyptx.ptx import tables
    found = set()
    for path in sorted((ROOT / "ptx").glob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Module))]:
            decorators = getattr(fn, "decorator_list", [])
            for n in ast.walk(fn):
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args):
                    continue
                if n.func.attr == "i":
                    texts = _lead(n.args[0], decorators)
                elif n.func.attr in ("append", "extend") and "out" in ast.unparse(n.func.value):
                    a = n.args[0]
                    texts = [t for e in (a.elts if isinstance(a, (ast.Tuple, ast.List)) else [a])
                             for t in _lead(e, ()) if t.startswith("\t")]
                else:
                    continue
                found.update(m.group(1) for t in texts if (m := _HEAD.match(t)))
    for table in ("TEMPLATES", "NORMALISE", "FENCES"):
        found.update(v.split(".")[0] for v in getattr(tables, table, {}).values())
    found.update(getattr(tables, "APPROX", ()))
    return found


@pytest.fixture(scope="module")
def emitted():
    full = _compiled_opcodes()
    return full, {op.split(".")[0] for op in full} | _source_opcodes()


def _unregistered(bases) -> set:
    return {b for b in bases if b not in BUILDERS}


# ---- the registry against the emitter ------------------------------------------------------

def test_the_emitter_opcodes_are_found(emitted):
    """Guards the test itself: the scans must keep seeing the emitter's instructions."""
    full, bases = emitted
    assert len(full) > 100 and len(bases) > 40, (len(full), sorted(bases))
    assert {"ld", "st", "mma", "cp", "match", "bar", "trap", "call", "popc", "ex2"} <= bases


def test_every_emitted_opcode_has_a_builder_and_a_profiler_class(emitted):
    full, bases = emitted
    assert not _unregistered(bases), f"opcodes the emitter writes with no CPU builder: " \
                                     f"{sorted(_unregistered(bases))}"
    for opcode in sorted(full):
        cls, flops = BUILDERS[opcode.split(".")[0]].classify(opcode.split("."))
        assert CLASS.fullmatch(cls) and isinstance(flops, int) and flops >= 0, (opcode, cls)


def test_every_registration_is_complete():
    for name, b in BUILDERS.items():
        assert callable(b.build), name
        assert b.kinds and set(b.kinds) <= set(KIND_NAMES), (name, b.kinds)
        assert isinstance(b.cls, str) and CLASS.fullmatch(b.cls) or callable(b.cls), name


def test_a_missing_registration_is_caught(emitted, monkeypatch):
    _, bases = emitted
    monkeypatch.delitem(BUILDERS, "match")
    assert _unregistered(bases) == {"match"}


def test_a_builder_must_make_the_kinds_it_registered(monkeypatch):
    """decode checks each Op against its registration, so the registry cannot drift from what
    the scheduler is given (a branch registered as NORMAL is an internal error, not a hang)."""
    from pyptx.runtime.cpu.program import Program
    monkeypatch.setitem(BUILDERS, "bra", BUILDERS["bra"]._replace(kinds=(NORMAL,)))
    with pytest.raises(RuntimeError, match="made a BRANCH op"):
        Program(pyptx.compile(_loop, arch="sm_80").ptx).entry("_loop")


@pyptx.kernel
def _loop(out: pyptx.i32[:], n: pyptx.i32):
    s = 0
    for k in range(n):
        s += k
    out[0] = s


# ---- match.sync is a warp instruction ------------------------------------------------------

@pyptx.kernel
def _groups(out: pyptx.u32[:], x: pyptx.u32[:]):
    t = pyptx.thread_idx.x
    out[t] = pyptx.match_any(x[t])


def test_match_sync_is_classed_warp(monkeypatch):
    for form in ("match.any.sync.b32", "match.all.sync.b64"):
        assert BUILDERS["match"].classify(form.split(".")) == ("warp", 0)
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    monkeypatch.delenv("PYPTX_SANITIZE", raising=False)
    x = (np.arange(64) % 3).astype(np.uint32)
    out = np.zeros(64, np.uint32)
    with pyptx.profile() as prof:
        _groups[1, 64](out, x)
    lane = np.arange(32)
    want = sum(1 << int(j) for j in lane if j % 3 == 0)
    assert out[0] == out[32] == want
    ptx = pyptx.compile(_groups, arch="sm_80").ptx
    warp_ops = sum(1 for ln in ptx.splitlines()
                   if re.match(r"\s*(match|activemask|shfl|vote)\.", ln))
    counts = prof.launches[0].instructions
    assert warp_ops >= 1 and counts["warp"] == 2 * warp_ops     # 2 warps, no branch around them


# ---- no import cycle in the executor ---------------------------------------------------------

def _imports(path: Path, package: str) -> set:
    """Modules of `package` that the module at `path` imports, at any level of its code
    (function-level imports included: a lazy import is still a dependency)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module is None:            # from . import a, b
                out.update(a.name for a in node.names)
            elif node.level == 1:                                   # from .a import x
                out.add(node.module.split(".")[0])
            elif node.level == 0 and (node.module or "").startswith(package + "."):
                out.add(node.module[len(package) + 1:].split(".")[0])
        elif isinstance(node, ast.Import):
            out.update(a.name[len(package) + 1:].split(".")[0] for a in node.names
                       if a.name.startswith(package + "."))
    return out


def _cycle(graph: dict) -> list | None:
    """One import cycle of `graph` (module -> imported modules) as a path, or None."""
    state: dict = {}
    stack: list = []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_cpu_executor_has_no_import_cycle():
    modules = {p.stem: p for p in CPU_DIR.glob("*.py")}
    graph = {m: _imports(p, "pyptx.runtime.cpu") & set(modules) - {m}
             for m, p in modules.items() if m != "__init__"}
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"
    assert graph["opkinds"] == set(), "opkinds.py must stay a leaf"
