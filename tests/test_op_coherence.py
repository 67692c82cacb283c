"""Every op is described once and every piece that must exist for it does (IR/PTX half).

Why: adding an intrinsic touches a DSL marker, its frontend lowering, the op's record and its PTX
lowering (docs/architecture.md, "Adding an intrinsic"); nothing else ties them together, so a
missing piece would only show when some kernel happens to use it.  `problems()` lists every
mismatch; the tests below run it on the real tables (no problem) and on copies with one piece
removed (exactly that problem is named).

CPU half (to be added by the CPU-executor side): the executor consumes PTX text, so its decoder
must build every mnemonic of `pyptx.ptx.ptx_mnemonics()` (checked here against the PTX of real
kernels); `pyptx.ir.ops.ir_op_names()` lists the IR ops.  See `cpu_must_cover()`.
"""
from __future__ import annotations

import re
import sys

import pytest

import pyptx
from pyptx import cuda as pyptx_cuda
from pyptx import dsl
from pyptx import math as pyptx_math
from pyptx.dsl import Intrinsic
from pyptx.frontend.intrinsics import BUILTINS, REGISTRY, SPECIAL_FORMS
from pyptx.ir.ops import OPS, ir_op_names, ptx_features
from pyptx.ptx import LOWERINGS, ptx_mnemonics


def dsl_markers() -> set[str]:
    """The `intrinsic` name of every DSL marker reachable from pyptx, pyptx.math, pyptx.cuda
    (module attributes and the members of namespaces such as `pyptx.shared`)."""
    out = set()

    def visit(obj, depth=0):
        if isinstance(obj, Intrinsic):
            out.add(obj.intrinsic)
        elif depth < 2 and not isinstance(obj, type) and hasattr(obj, "__dict__"):
            for v in list(vars(obj).values()):
                visit(v, depth + 1)
    for mod in (pyptx, dsl, pyptx_math, pyptx_cuda):
        for v in list(vars(mod).values()):
            visit(v, 1)
    return out


def problems(ops=OPS, lowerings=LOWERINGS, registry=REGISTRY, markers=None) -> list[str]:
    """Every incoherence between the op records, the PTX lowerings, the DSL markers and the
    frontend's intrinsic registry."""
    markers = dsl_markers() if markers is None else markers
    out = []
    for name, d in ops.items():
        out += [f"record {name!r} is filed under the name {d.name!r}"] if d.name != name else []
        backend = d.succs is None and not d.expanded_by
        if backend and name not in lowerings:
            out.append(f"IR op {name!r} has no PTX lowering (pyptx/ptx/lower_*.py)")
        if not backend and name in lowerings:
            out.append(f"IR op {name!r} is lowered by the emitter or expanded by "
                       f"{d.expanded_by}, yet has a lowering")
        if d.check is None and (d.nargs != 0 or d.result):
            out.append(f"IR op {name!r} has operands or a result but no type rule (check)")
        if d.fold is not None and not (d.pure and d.result):
            out.append(f"IR op {name!r} folds but is not a pure op with a result")
        if d.commutative and not (d.pure and d.nargs == 2):
            out.append(f"IR op {name!r} is commutative but not a pure binary op")
        if backend and not d.ptx:
            out.append(f"IR op {name!r} lists no PTX mnemonics (ptx=...)")
    for name in lowerings:
        if name not in ops:
            out.append(f"PTX lowering for {name!r}, which has no op record (pyptx/ir/ops/)")
    for name in sorted(markers - set(registry) - SPECIAL_FORMS):
        out.append(f"DSL marker {name!r} has no frontend lowering (@intrinsic({name!r}, ...))")
    builtin_keys = set(BUILTINS.values()) | {"builtin.pow"}
    for name in sorted(set(registry) - markers - builtin_keys):
        out.append(f"frontend lowering {name!r} has no DSL marker (pyptx/dsl.py, math.py, "
                   f"cuda.py)")
    return out


def test_every_piece_exists_and_agrees():
    assert problems() == []


def test_the_records_name_every_ptx_feature_once():
    feats = ptx_features()           # raises if two records disagree on a feature
    assert {"mma", "ldmatrix", "cp.async", "sync.warp"} <= set(feats)


@pytest.mark.parametrize("op", ["mma", "shfl", "add", "pack2", "cp_async_wait"])
def test_a_missing_ptx_lowering_is_named(op):
    lowerings = {k: v for k, v in LOWERINGS.items() if k != op}
    assert problems(lowerings=lowerings) == [
        f"IR op {op!r} has no PTX lowering (pyptx/ptx/lower_*.py)"]


def test_a_missing_record_is_named():
    ops = {k: v for k, v in OPS.items() if k != "ldmatrix"}
    assert problems(ops=ops) == [
        "PTX lowering for 'ldmatrix', which has no op record (pyptx/ir/ops/)"]


def test_a_missing_frontend_lowering_is_named():
    registry = {k: v for k, v in REGISTRY.items() if k != "mma_sync"}
    assert problems(registry=registry) == [
        "DSL marker 'mma_sync' has no frontend lowering (@intrinsic('mma_sync', ...))"]


def test_a_missing_dsl_marker_is_named():
    markers = dsl_markers() - {"popc"}
    assert problems(markers=markers) == [
        "frontend lowering 'popc' has no DSL marker (pyptx/dsl.py, math.py, cuda.py)"]


def test_a_record_without_type_rule_is_named():
    import dataclasses
    ops = dict(OPS, mma=dataclasses.replace(OPS["mma"], check=None))
    assert problems(ops=ops) == [
        "IR op 'mma' has operands or a result but no type rule (check)"]


def test_a_lowering_for_an_unknown_op_cannot_be_registered():
    from pyptx.ptx.emitter import lowers
    with pytest.raises(KeyError):
        lowers("no_such_op")(lambda em, ins: None)


# ---- the PTX side: mnemonics ---------------------------------------------------------------------

_MNEMONIC = re.compile(r"^\t(?:@!?%\w+ )?([a-z][a-z0-9_]*)[.\s;]", re.M)


def emitted_mnemonics(ptx: str) -> set[str]:
    return set(_MNEMONIC.findall(ptx)) - {"reg", "param", "shared", "local"}


def test_the_declared_mnemonics_cover_the_ptx_of_real_kernels():
    """Every mnemonic in the PTX of the semantic test kernels (O0 and O2, sm_75 where bf16 and
    f16 take their longest paths, and sm_90) is declared by some op record or the emitter."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import kernels_semantic
    declared = ptx_mnemonics()
    seen: set[str] = set()
    for name, kernel, *_ in kernels_semantic.cases():
        for arch in ("sm_75", "sm_90"):
            for opt in (0, 2):
                kernel._cache.clear()
                try:
                    ptx = pyptx.compile(kernel, arch=arch, opt_level=opt).ptx
                except pyptx.errors.CompileError:
                    continue                        # needs a newer arch
                got = emitted_mnemonics(ptx)
                assert got <= declared, (name, arch, sorted(got - declared))
                seen |= got
    assert {"add", "ld", "st", "setp", "bra", "ret"} <= seen


def cpu_must_cover() -> dict[str, frozenset[str]]:
    """The hook for the CPU-builder half of this test: what the CPU executor must implement.
    'ptx': every PTX mnemonic the backend may emit (its decoder's BUILDERS must have each);
    'ir': every IR op (for a per-op check, e.g. one CPU-vs-fold test per foldable op)."""
    return {"ptx": ptx_mnemonics(), "ir": ir_op_names()}


def test_cpu_hook_lists_both_sides():
    got = cpu_must_cover()
    assert "mma" in got["ptx"] and "mma" in got["ir"] and "bra" in got["ptx"]


def test_the_checklist_in_the_docs_names_every_place():
    """docs/architecture.md, "Adding an intrinsic": five steps, each pointing at a real place."""
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent
    doc = (root / "docs" / "architecture.md").read_text()
    section = doc.split("## Adding an intrinsic", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^(\d)\. \*\*", section, re.M)
    assert steps == ["1", "2", "3", "4", "5"]
    for place in ("pyptx/dsl.py", "pyptx/frontend/intrinsics.py", "pyptx/ir/ops/",
                  "pyptx/ptx/lower_", "pyptx/runtime/cpu/opkinds.py"):
        assert place in section
        assert list(root.glob(place.rstrip("/") + ("*" if place.endswith("_") else ""))), place


def test_every_ptx_mnemonic_has_a_cpu_builder():
    """The CPU half: each mnemonic the backend may emit is registered by a builder of the CPU
    executor (`@builds`, pyptx/runtime/cpu), with a profiler class."""
    import pyptx.runtime.cpu.decode  # noqa: F401 - imports every builder module
    from pyptx.runtime.cpu.opkinds import BUILDERS
    missing = cpu_must_cover()["ptx"] - set(BUILDERS)
    assert not missing, f"PTX mnemonics without a CPU builder: {sorted(missing)}"
