"""The emitted PTX of every kernel we ship or benchmark, hashed: a guard for compile-speed work.

    python benchmarks/ptx_hashes.py --save before.json     # on the old tree
    python benchmarks/ptx_hashes.py --check before.json    # after a change: every hash equal?

Kernels: every stdlib specialisation (`stdlib_kernels.catalog.SPECIALISATIONS`) for sm_80 and
sm_90 (the sass_report / ptxas-test set); the three peer kernels of `peer_kernels.py` at
opt_level 0, 1, 2 with fma on and off; the language-feature kernels of
`tests/kernels_semantic.py` at opt_level 0, 1, 2.  The disk cache is off and each compile gets a
fresh function object, so nothing is answered from a cache.  An optimisation that must not change
the generated code (faster analyses, worklists) keeps every hash; `--check` lists the labels
whose PTX differs and exits 1.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import types

os.environ["PYPTX_NO_CACHE"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
from peer_kernels import KERNELS, PYPTX_SRC, load  # noqa: E402


def _fresh(fn):
    f = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                           fn.__closure__)
    f.__annotations__ = dict(fn.__annotations__)
    return f


def _uncached(kernel):
    """The kernel with its in-memory cache emptied (the disk cache is off)."""
    kernel._cache.clear()
    return kernel


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def kernels():
    """(label, thunk -> PTX text) for every kernel of the guard set."""
    import pyptx
    from stdlib_kernels.catalog import SPECIALISATIONS
    out = []
    for spec in SPECIALISATIONS:
        for arch in ("sm_80", "sm_90"):
            out.append((f"stdlib/{spec.label}/{arch}",
                        lambda s=spec, a=arch: pyptx.compile(
                            _uncached(s.kernel), arch=a, constexprs=s.constexprs).ptx))
    pmod = load(PYPTX_SRC, "ptx_hashes_peers")
    for name in KERNELS:
        for opt in (0, 1, 2):
            for fma in (True, False):
                out.append((f"peer/{name}/O{opt}/fma={fma}",
                            lambda f=getattr(pmod, name), o=opt, m=fma: pyptx.compile(
                                _fresh(f), arch="sm_90", opt_level=o, fma=m).ptx))
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import kernels_semantic
    for name, kernel, *_ in kernels_semantic.cases():
        for opt in (0, 1, 2):
            out.append((f"semantic/{name}/O{opt}",
                        lambda k=kernel, o=opt: pyptx.compile(
                            _uncached(k), arch="sm_90", opt_level=o).ptx))
    return out


def hashes() -> dict[str, str]:
    import pyptx
    out = {}
    for label, thunk in kernels():
        try:
            out[label] = _sha(thunk())
        except pyptx.errors.PyptxError as e:           # recorded: an error must stay an error
            out[label] = "error: " + type(e).__name__
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", metavar="FILE")
    g.add_argument("--check", metavar="FILE")
    args = ap.parse_args()
    got = hashes()
    if args.save:
        with open(args.save, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
        print(f"{len(got)} kernels hashed -> {args.save}")
        return 0
    with open(args.check) as f:
        want = json.load(f)
    bad = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    for k in bad:
        print(f"DIFFERS: {k}")
    print(f"{len(got)} kernels hashed, {len(got) - len(bad)} identical, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
