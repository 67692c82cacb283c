"""Block-level synchronisation, fences and the warp barrier."""
from __future__ import annotations

from ...types import bool_, u32
from .record import family, rule
from .warp import SYNC_WARP

op = family("sync")


def _check_barrier_red(c, ins, T, a):
    c.need(a[0] == bool_ and ins.attrs.get("mode") in ("popc", "and", "or"),
           "barrier_red: bool_, popc/and/or")


OPS = [
    op("barrier", "", "bar.sync 0 (syncthreads)", pure=False, result=False, ptx=("bar",)),
    op("syncwarp", "mask", "bar.warp.sync mask (u32)", pure=False, result=False,
       check=rule(lambda T, a: a[0] == u32, "syncwarp mask is u32"), gate=SYNC_WARP,
       ptx=("bar",)),
    op("fence", "", "attrs scope in {'gl','cta','sys'}: membar", pure=False, result=False,
       check=lambda c, ins, T, a: c.need(ins.attrs.get("scope") in ("gl", "cta", "sys"),
                                         "fence scope must be gl/cta/sys"),
       ptx=("membar",)),
    op("barrier_red", "p",
       "bar.red 0 over the whole block with the bool_ p.  attrs mode 'popc' -> T i32 (how "
       "many threads' p is true), 'and' / 'or' -> T bool_",
       pure=False, check=_check_barrier_red, gate=("bar.red", 60, 30), ptx=("bar",)),
]
