"""The pipeline's skip bookkeeping (`passes._Tracker`) never skips a pass that would have done
something: every skipped call is re-run on a copy of the IR and must report no change and leave
the IR text as it was.  Kernels: the language-feature kernels, the peer benchmark kernels and a
few stdlib specialisations (loops to unroll, address folding, fma, shared memory)."""
from __future__ import annotations

import copy
import sys

import pytest

import pyptx
import pyptx.passes as P
from pyptx.ir.printer import print_function
from pyptx.passes.report import report

from kernels_semantic import cases


def _stdlib():
    from stdlib_kernels.catalog import SPECIALISATIONS
    wanted = ("softmax_block", "rmsnorm", "gemm_tiled", "decode_attention", "rope", "add[")
    out, seen = [], set()
    for spec in SPECIALISATIONS:
        head = next((w for w in wanted if spec.label.startswith(w)), None)
        if head is not None and head not in seen:
            seen.add(head)
            out.append(pytest.param(spec.kernel, spec.constexprs, id=spec.label))
    return out


def _peers():
    sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/benchmarks")
    from peer_kernels import KERNELS, PYPTX_SRC, load
    mod = load(PYPTX_SRC, "skips_peer_kernels")
    return [pytest.param(pyptx.kernel(getattr(mod, n)), {}, id=n) for n in KERNELS]


@pytest.fixture
def checked_skips(monkeypatch):
    """Re-run every skipped pass call on a copy; collect the ones that would have changed."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100000))     # deepcopy of the IR
    orig = P._Tracker.__call__
    log = {"skipped": 0, "bad": []}

    def call(self, pass_run, fn):
        if self.clean.get(pass_run) == self.version:
            c = copy.deepcopy(fn)
            c.__dict__.pop("_cfg_cache", None)
            before = print_function(c)
            silent = report(c).silent_edits
            changed = pass_run(c)
            log["skipped"] += 1
            if changed or report(c).silent_edits != silent or print_function(c) != before:
                log["bad"].append(pass_run.__module__)
        return orig(self, pass_run, fn)
    monkeypatch.setattr(P._Tracker, "__call__", call)
    return log


def _compile_all(kernel, constexprs, opt_levels=(1, 2)):
    for opt in opt_levels:
        kernel._cache.clear()
        pyptx.compile(kernel, arch="sm_90", constexprs=constexprs, opt_level=opt)


@pytest.mark.parametrize("kernel,constexprs",
                         [pytest.param(k, {}, id=name) for name, k, *_ in cases()] + _peers()
                         + _stdlib())
def test_skipped_pass_calls_change_nothing(kernel, constexprs, checked_skips, monkeypatch):
    monkeypatch.setenv("PYPTX_NO_CACHE", "1")
    _compile_all(kernel, constexprs)
    assert not checked_skips["bad"], checked_skips["bad"]


def test_the_check_sees_skips(checked_skips, monkeypatch):
    """The skip rules fire at all on a kernel with loops (else the test above proves nothing)."""
    monkeypatch.setenv("PYPTX_NO_CACHE", "1")
    kernel = _peers()[1].values[0]                 # softmax_rows
    _compile_all(kernel, {}, opt_levels=(2,))
    assert checked_skips["skipped"] >= 3


def test_concurrent_compiles_give_the_sequential_ptx(monkeypatch):
    """The skip bookkeeping's per-pass facts live in each function's PassReport
    (passes/report.py), not in module globals: kernels compiled on several threads at once,
    with thread switches forced often, give the PTX a sequential compile gives."""
    import threading
    kernels = [k.values[0] for k in _peers()] + [k for _name, k, *_ in cases()[:6]]
    want = []
    for k in kernels:
        k._cache.clear()
        want.append(pyptx.compile(k, arch="sm_90").ptx)
    got = [None] * len(kernels)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        def one(i):
            kernels[i]._cache.clear()
            got[i] = pyptx.compile(kernels[i], arch="sm_90").ptx
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(kernels))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert got == want
